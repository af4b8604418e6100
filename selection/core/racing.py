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

``race_replay`` replays the rule: every pair's replay (``designs.PairStream``) under one budget of human judgments,
an item at a time to an open pair the allocation picks, among those whose next item still fits the budget.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from scipy import stats

if TYPE_CHECKING:
    from selection.core.designs import DesignReplay

K = TypeVar("K", bound=Hashable)
WARMUP = 10  # items a pair is seen on before it can be behind
ALLOCATIONS = ("race", "even")


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
    z = _z(alpha)
    gap = abs(mean - 0.5)
    direction = (z * spread / gap) ** 2 if gap > 0 else math.inf
    equivalence = (z * spread / (margin - gap)) ** 2 if margin > gap else math.inf
    return min(direction, equivalence)


@functools.lru_cache(maxsize=64)
def _z(alpha: float) -> float:
    return float(stats.norm.isf(alpha / 2))


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


class Stream(Protocol):
    """What ``race_replay`` reads of a pair's replay (``designs.PairStream``)."""

    open: bool
    steps: int
    pool: int

    @property
    def looks(self) -> bool: ...

    @property
    def scores(self) -> npt.NDArray[np.float64]: ...

    def next_cost(self) -> int: ...

    def buy(self) -> None: ...

    def result(self) -> DesignReplay: ...


def race_state(stream: Stream) -> RaceState:
    """The race's view of an open pair, as the live plan can read it: its current phase's items and mean, its pool,
    and with planned looks the spread of the phase's observations (ddof 1; the betting sequence reads none, so
    without looks the Bhatia-Davis bound stands in, unless the observations leave [0, 1]: prediction-powered ones
    are read with their own spread)."""
    x = stream.scores
    # prediction-powered observations range over [1 - 1/pi, 1/pi], where the bound for scores in [0, 1] does not hold
    bounded = len(x) == 0 or (float(x.min()) >= 0.0 and float(x.max()) <= 1.0)
    sd = float(np.std(x, ddof=1)) if len(x) > 1 and (stream.looks or not bounded) else None
    return RaceState(len(x), float(x.mean()) if len(x) else 0.5, stream.pool, sd)


def race_replay(
    streams: Mapping[K, Stream], budget: int, alpha: float, margin: float, allocation: str = "race"
) -> dict[K, DesignReplay]:
    """All pairs' replays under one budget of human judgments: repeatedly, among the open pairs whose next item costs
    no more than the budget left, one item to the pair the allocation picks -- ``race``: the pairs not ``behind``
    (computed over every open pair, each at ``alpha``, a pair's own) first, fewest items observed first among them;
    ``even``: fewest items observed first among all; ties by key. Stops when no open pair's next item fits (a pair
    whose next item does not fit waits while cheaper ones go on: phase 1's single judgments can still be bought
    when a whole item cannot) or no pair is open. Judgments spent never exceed ``budget``. Returns each pair's
    replay as it stands: a pair the budget cut off is undecided, with what it had bought."""
    if allocation not in ALLOCATIONS:
        raise ValueError(f"allocation must be one of {', '.join(ALLOCATIONS)}")
    if budget < 0:
        raise ValueError("the budget must be at least 0")
    left = budget
    states = {key: race_state(s) for key, s in streams.items() if s.open}  # only the pair bought changes
    while True:
        fits = {key: streams[key] for key in states if streams[key].next_cost() <= left}
        if not fits:
            break
        slow = behind(states, alpha, margin) if allocation == "race" else set()
        key = min(fits, key=lambda k: (k in slow, fits[k].steps, k))
        left -= fits[key].next_cost()
        fits[key].buy()
        if fits[key].open:
            states[key] = race_state(fits[key])
        else:
            del states[key]
    return {key: s.result() for key, s in streams.items()}
