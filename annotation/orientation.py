"""Display order <-> model order, in one place.

Model coordinates name the systems of a pair "a" and "b" (what is stored and analysed); display
coordinates say where an output was shown, "first" (left / top) or "second". ``a_shown_first`` is the
stored display order of one pair for one rater. Pure functions, no Django.
"""

from __future__ import annotations

from typing import TypeVar, overload

T = TypeVar("T")


def in_display_order(a: T, b: T, a_shown_first: bool) -> tuple[T, T]:
    """(first shown, second shown) of the values for system a and system b."""
    return (a, b) if a_shown_first else (b, a)


@overload
def to_model(answer: str, a_shown_first: bool) -> str: ...
@overload
def to_model(answer: None, a_shown_first: bool) -> None: ...
def to_model(answer: str | None, a_shown_first: bool) -> str | None:
    """A display answer ("first", "second", or one that names no position such as "tie") in model
    coordinates ("a", "b", or the answer unchanged: None, no choice, stays None)."""
    if answer == "first":
        return "a" if a_shown_first else "b"
    if answer == "second":
        return "b" if a_shown_first else "a"
    return answer


def to_display(answer: str, a_shown_first: bool) -> str:
    """The inverse of ``to_model``: a model answer ("a", "b", or e.g. "tie") where it was shown."""
    if answer == "a":
        return "first" if a_shown_first else "second"
    if answer == "b":
        return "second" if a_shown_first else "first"
    return answer


def probability_first(probability_a: float, a_shown_first: bool) -> float:
    """P(the first-shown output is better) from P(A is better)."""
    return probability_a if a_shown_first else 1 - probability_a
