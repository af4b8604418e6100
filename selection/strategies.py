"""Selection strategies: which items of a system pair are sent to raters, and in which order.

The assignment builder (``annotation.services.rebuild_plan``) asks the study's strategy for each
system pair; new strategies register here and plug in without touching the builder.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol


class SelectionStrategy(Protocol):
    name: str
    label: str

    def select(self, candidates: Sequence[int], budget: int | None, rng: random.Random) -> list[int]:
        """Return the chosen candidate item indices, in release order."""


class RandomSelection:
    """Uniformly random items (all of them when no budget is set), in random order."""

    name = "random"
    label = "Random"

    def select(self, candidates: Sequence[int], budget: int | None, rng: random.Random) -> list[int]:
        chosen = list(candidates)
        rng.shuffle(chosen)
        return chosen if budget is None else chosen[:budget]


STRATEGIES: dict[str, SelectionStrategy] = {s.name: s for s in (RandomSelection(),)}


def get_strategy(name: str) -> SelectionStrategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown selection method {name!r}; choose one of {sorted(STRATEGIES)}") from None
