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
an item at a time to an open pair the allocation picks, among those whose next item still fits the budget. Its
baselines: ``even`` (the plan without racing: the budget spread over every open pair) and ``serial`` (the budget
concentrated, one pair at a time in an order that reads nothing of the pairs' progress), so that what racing adds
over concentrating the budget at all can be told apart (bench/README.md, "Racing across pairs under one budget").
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from scipy import stats

if TYPE_CHECKING:
    from selection.core.designs import DesignReplay

K = TypeVar("K", bound=Hashable)
WARMUP = 10  # items a pair is seen on before it can be behind
ALLOCATIONS = ("race", "even", "serial")


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


def spread(scores: npt.ArrayLike) -> float | None:
    """The spread of a pair's observations as the race reads it (the standard deviation, ddof 1); None below two."""
    x = np.asarray(scores, dtype=np.float64)
    return float(np.std(x, ddof=1)) if len(x) > 1 else None


def race_state(stream: Stream) -> RaceState:
    """The race's view of an open pair, as the live plan can read it: its current phase's items and mean, its pool,
    and with planned looks the spread of the phase's observations (ddof 1; the betting sequence reads none, so
    without looks the Bhatia-Davis bound stands in, unless the observations leave [0, 1]: prediction-powered ones
    are read with their own spread)."""
    x = stream.scores
    # prediction-powered observations range over [1 - 1/pi, 1/pi], where the bound for scores in [0, 1] does not hold
    bounded = len(x) == 0 or (float(x.min()) >= 0.0 and float(x.max()) <= 1.0)
    sd = spread(x) if stream.looks or not bounded else None
    return RaceState(len(x), float(x.mean()) if len(x) else 0.5, stream.pool, sd)


def race_replay(
    streams: Mapping[K, Stream],
    budget: int,
    alpha: float,
    margin: float,
    allocation: str = "race",
    order: Sequence[K] | None = None,
) -> dict[K, DesignReplay]:
    """All pairs' replays under one budget of human judgments: repeatedly, among the open pairs whose next item costs
    no more than the budget left, one item to the pair the allocation picks -- ``race``: the pairs not ``behind``
    (computed over every open pair, each at ``alpha``, a pair's own) first, fewest items observed first among them;
    ``even``: fewest items observed first among all; ``serial``: most items observed first, that is one pair at a
    time -- the pair being bought keeps every item until it is decided, stopped or its next item no longer fits,
    then the next pair in ``order`` starts. Ties go by ``order`` (every key once; default: the keys sorted). Stops
    when no open pair's next item fits (a pair whose next item does not fit waits while cheaper ones go on: phase
    1's single judgments can still be bought when a whole item cannot) or no pair is open. Judgments spent never
    exceed ``budget``. Returns each pair's replay as it stands: a pair the budget cut off is undecided, with what it
    had bought.

    ``serial`` is the baseline that concentrates the budget without reading any pair's progress. Its order matters
    (the pairs first in it get the budget), so a replay should pass a random order per seed (``simulate`` does): a
    fixed order such as the pairs' names would put the clear or the hopeless pairs first by the luck of their
    names, and the baseline would measure that luck rather than what concentrating the budget does on average."""
    if allocation not in ALLOCATIONS:
        raise ValueError(f"allocation must be one of {', '.join(ALLOCATIONS)}")
    if budget < 0:
        raise ValueError("the budget must be at least 0")
    ranked = sorted(streams) if order is None else list(order)  # type: ignore[type-var]  # keys compare (str)
    if len(ranked) != len(streams) or set(ranked) != set(streams):
        raise ValueError("the order must name every pair once")
    rank = {key: i for i, key in enumerate(ranked)}
    sign = -1 if allocation == "serial" else 1  # serial: the most items first
    left = budget
    states = {key: race_state(s) for key, s in streams.items() if s.open}  # only the pair bought changes
    while True:
        fits = {key: streams[key] for key in states if streams[key].next_cost() <= left}
        if not fits:
            break
        slow = behind(states, alpha, margin) if allocation == "race" else set()
        key = min(fits, key=lambda k: (k in slow, sign * fits[k].steps, rank[k]))
        left -= fits[key].next_cost()
        fits[key].buy()
        if fits[key].open:
            states[key] = race_state(fits[key])
        else:
            del states[key]
    return {key: s.result() for key, s in streams.items()}
