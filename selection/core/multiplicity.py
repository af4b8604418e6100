"""Study-wide error across system pairs (docs/decisions.md#study-wide-error): the one home of "which alpha does a
pair's decision use". A study decides each of its system pairs (all K (K - 1) / 2 of K systems, or fewer: each
system against a baseline, or a list) with its own anytime-valid confidence sequence at level alpha_pair; by the
union bound the chance that any pair's sequence ever misses its mean (and so that any decision is false) is at most
the sum of the pairs' alphas. Bonferroni's split alpha_pair = alpha / pairs therefore holds alpha study-wide however
often anyone looks, whatever the dependence between pairs -- exactly with the betting confidence sequence; with
planned looks (selection/core/group_sequential.py) as far as their normal-approximate boundaries hold at the split
alpha (bench/README.md measures it on PRD). It is split over the pairs the study compares, not over every pair its
systems could form: fewer pairs, more power each.

``control``: "per_pair" (alpha for every pair: each pair alone holds alpha), "study_wide" (Bonferroni split), or
"auto" (study-wide when the study decides more than one pair -- more than two systems -- per pair otherwise: with
one pair they coincide).
"""

from __future__ import annotations

CONTROLS = ("auto", "per_pair", "study_wide")


def pair_count(systems: int) -> int:
    """Unordered pairs of ``systems`` systems (every pair compared)."""
    return max(systems, 0) * (max(systems, 0) - 1) // 2


def in_force(control: str, pairs: int) -> str:
    """The control a study deciding ``pairs`` system pairs uses: "per_pair" or "study_wide" ("auto" resolved)."""
    if control not in CONTROLS:
        raise ValueError(f"control must be one of {', '.join(CONTROLS)}, got {control!r}")
    if control == "auto":
        return "study_wide" if pairs > 1 else "per_pair"
    return control


def pair_alpha(alpha: float, pairs: int, control: str = "auto") -> float:
    """The alpha each of ``pairs`` pairs' confidence sequences uses so that the study holds ``alpha`` as ``control``
    says."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if in_force(control, pairs) == "study_wide" and pairs > 1:
        return alpha / pairs
    return alpha
