"""Racing across system pairs: which open pairs are *behind* -- far from a decision, or needing more items than
their pool holds -- so that raters' next items go first to the pairs closest to being decided
(docs/decisions.md#racing-across-pairs). Pure: numbers in, a set of keys out.

A pair whose item scores so far have mean m over n items, spread sd, needs about

    n_direction   = (z sd / |m - 1/2|)^2                    (the interval clear of 1/2)
    n_equivalence = (z sd / (margin - |m - 1/2|))^2        (inside the margin; only when |m - 1/2| < margin)

items in all, z = Phi^{-1}(1 - alpha/2) (the fixed-sample test's; a ranking heuristic, not a boundary: which pair
gets the next item changes no pair's error rate, as each pair's decision reads only its own items in its own order).
Without a spread, sd = sqrt(m (1 - m)), the largest a score in [0, 1] with mean m can have (Bhatia & Davis 2000).

A pair is behind once it has been seen on ``WARMUP`` items (every pair is measured before it is raced) and either
needs more items than its pool holds, or is in the farther half of the pairs that can still be decided, counted by
the items each still needs. A pair behind is not withheld: it gets the items of a rater for whom the pairs ahead have
nothing (``annotation/rating/allocation.py``), and it moves ahead as the pairs before it are decided.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Mapping
from typing import TypeVar

from scipy import stats

K = TypeVar("K", bound=Hashable)
WARMUP = 10  # items a pair is seen on before it can be behind


@dataclasses.dataclass(frozen=True)
class RaceState:
    """An open pair as the race reads it: items seen (in the current phase), their mean score for the first
    system, the items its pool holds in all (seen included), and the spread of an item's score if known."""

    n: int
    mean: float
    pool: int
    sd: float | None = None


def items_to_decide(mean: float, sd: float | None, alpha: float, margin: float) -> float:
    """Items in all a pair with this mean and spread needs for its interval to clear 1/2 or fall inside the margin,
    whichever comes first (the module's formulas); ``inf`` when neither can (a mean of exactly 1/2 without a
    margin)."""
    if not 0 < alpha < 1:
        raise ValueError("need 0 < alpha < 1")
    spread = math.sqrt(max(mean * (1 - mean), 0.0)) if sd is None else sd
    z = float(stats.norm.isf(alpha / 2))
    gap = abs(mean - 0.5)
    direction = (z * spread / gap) ** 2 if gap > 0 else math.inf
    equivalence = (z * spread / (margin - gap)) ** 2 if margin > gap else math.inf
    return min(direction, equivalence)


def behind(states: Mapping[K, RaceState], alpha: float, margin: float, warmup: int = WARMUP) -> set[K]:
    """The open pairs (``states``: only pairs still bought) that are behind: seen on at least ``warmup`` items, and
    needing more than their pool or in the farther half (by items still needed; ties by key) of those that can be
    decided. Empty when every open pair would be behind: then no pair is ahead of another."""
    raced = {key: s for key, s in states.items() if s.n >= warmup}
    need = {key: items_to_decide(s.mean, s.sd, alpha, margin) for key, s in raced.items()}
    out = {key for key, s in raced.items() if need[key] > s.pool}
    reachable = sorted((need[key] - s.n, key) for key, s in raced.items() if key not in out)
    ahead = math.ceil(len(reachable) / 2)
    out |= {key for _, key in reachable[ahead:]}
    return set() if out == set(states) else out
