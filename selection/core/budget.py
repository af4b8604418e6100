"""What a margin costs, before paying (docs/decisions.md#budget-planning): how many items -- and judgments, with several
raters per item -- a system pair needs before its anytime-valid decision (``selection.core.decisions``) names the
better system with a given power, when the first system's true win rate is a half plus the margin.

Item scores are the mean of ``m`` raters' outcomes (1 / 1/2 / 0), so their variance carries the ties and the
correlation of raters on one item (the design effect): with a single outcome's variance ``s2`` and the intra-item
correlation ``rho`` (one-way ANOVA on a pilot with two or more raters per item),

    Var(item score) = s2 * (1 + (m - 1) * rho) / m,

which is why, while items remain, an item's first rater tells more than its third: per judgment, the m-th rater of an
old item buys ``rater_share`` = (1 - rho) / ((1 + (m - 1) rho)(1 + (m - 2) rho)) of what a new item's first rater
buys -- never more, as rho >= 0 -- so the advice (``advise``) is one rater per item until the pool of items runs
short. The planner draws item scores from the Beta distribution with the planned mean and that variance, runs the
same confidence sequence the study page and the plan use, and returns the smallest number of items at which the
decision is in for ``power`` of the runs. The decision is anytime-valid, so this n is larger than a fixed-sample
test's -- and safe to watch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from selection.core.decisions import betting_confidence_sequence

BLOCK = 100  # simulated studies drawn at once (100 x 20,000 items: 16 MB)
UNKNOWN_RHO = 1.0  # raters' correlation when a pilot cannot show it: the conservative end
NO_PILOT_VARIANCE = 0.25  # the largest variance of an outcome in [0, 1]


NEW_ITEMS = "new items"  # the advice: one rater per item, new items while the pool lasts
ANOTHER_RATER = "another rater"  # the pool is short of items: more raters on the items there are
MORE_ITEMS = "more items"  # no planned number of raters per item fits the pool: the pair needs more items


def design_effect(rho: float, raters: int) -> float:
    """How many times the variance of an item's score exceeds that of ``raters`` independent outcomes: 1 + (m - 1) rho
    (Kish's design effect of clusters of m)."""
    return 1 + (raters - 1) * rho


def rater_share(rho: float, raters: int = 2) -> float:
    """The information the ``raters``-th rater of an old item adds, per judgment, as a share of what the first rater of
    a new item adds. An item's information is m / (s2 (1 + (m - 1) rho)); the m-th rater adds the difference of m and
    m - 1 raters, (1 - rho) / (s2 (1 + (m - 1) rho)(1 + (m - 2) rho)), and a new item 1 / s2. Below 1 whenever
    rho > 0: (1 - rho) / (1 + rho) for a second rater (0.11 at rho = 0.8, 0.04 at 0.93)."""
    if raters < 2:
        raise ValueError("the first rater of an item is a new item's")
    return (1 - rho) / ((1 + (raters - 1) * rho) * (1 + (raters - 2) * rho))


@dataclasses.dataclass(frozen=True)
class Pilot:
    """What a pilot says about one system pair's outcomes: the variance of one rater's outcome, the intra-item
    correlation of raters, and the number of items (with two or more raters) it was estimated on -- none: the
    correlation is not seen and taken as ``UNKNOWN_RHO``."""

    outcome_variance: float
    rho: float
    rho_items: int = dataclasses.field(default=0, compare=False)

    @property
    def rho_seen(self) -> bool:
        return self.rho_items > 0

    def item_variance(self, raters: int) -> float:
        return self.outcome_variance * design_effect(self.rho, raters) / raters


@dataclasses.dataclass(frozen=True)
class Advice:
    """What to buy next for one system pair and margin: ``buy`` (``NEW_ITEMS``, ``ANOTHER_RATER`` or
    ``MORE_ITEMS``) and the raters per item to plan for (None with ``MORE_ITEMS``)."""

    buy: str
    raters: int | None


def advise(items_by_raters: Mapping[int, int | None], pool: int) -> Advice:
    """The plan to follow among those planned (items needed per number of raters per item; None: more than the
    largest plan allows): the fewest raters per item whose items fit the pool. Each further rater buys less per
    judgment than a new item (``rater_share``), so the fewest raters that fit is also the fewest judgments; with the
    fewest planned that is ``NEW_ITEMS``, with more it is ``ANOTHER_RATER`` -- the pool is short of items, and
    raters who do not always agree still tell something new. When none fits (or the pilot could not see rho, taken
    as 1, so that more raters change nothing), the pair needs ``MORE_ITEMS``."""
    planned = sorted(items_by_raters)
    for m in planned:
        items = items_by_raters[m]
        if items is not None and items <= pool:
            return Advice(NEW_ITEMS if m == planned[0] else ANOTHER_RATER, m)
    return Advice(MORE_ITEMS, None)


def pilot_of(ratings_by_item: Iterable[Sequence[float]]) -> Pilot:
    """The pilot from outcomes grouped by item (a list per item of its raters' outcomes in [0, 1]): the outcomes'
    variance and the one-way ANOVA estimate of the intra-item correlation over the items with two or more raters,

        rho = (MSB - MSW) / (MSB + (n0 - 1) MSW),   n0 = (N - sum n_i^2 / N) / (k - 1)

    (k items of n_i raters, N = sum n_i; MSB and MSW the mean squares between and within items; clipped to [0, 1]).
    Without items of two or more raters the correlation cannot be seen and is taken as 1 -- a second rater adds
    nothing -- so a plan for several raters per item is never cheaper than the pilot can show."""
    groups = [np.asarray(g, dtype=np.float64) for g in ratings_by_item if len(g)]
    if not groups:
        raise ValueError("the pilot has no outcomes")
    values = np.concatenate(groups)
    variance = float(values.var(ddof=1)) if len(values) > 1 else 0.25
    multi = [g for g in groups if len(g) >= 2]
    if not multi:
        return Pilot(variance or 0.25, UNKNOWN_RHO)
    if variance == 0:
        return Pilot(0.25, UNKNOWN_RHO)
    k = len(multi)
    n = np.array([len(g) for g in multi], dtype=np.float64)
    grand = np.concatenate(multi).mean()
    between = float(sum(len(g) * (g.mean() - grand) ** 2 for g in multi)) / max(k - 1, 1)
    within = float(sum(((g - g.mean()) ** 2).sum() for g in multi)) / max(n.sum() - k, 1)
    n0 = (n.sum() - (n**2).sum() / n.sum()) / max(k - 1, 1)  # the average group size, unbalanced groups
    rho = (between - within) / (between + (n0 - 1) * within) if between + (n0 - 1) * within > 0 else 0.0
    return Pilot(variance, float(np.clip(rho, 0.0, 1.0)), k)


def beta_scores(
    mean: float, variance: float, size: int | tuple[int, ...], rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Item scores in [0, 1] with this mean and variance (the variance capped below the Beta family's limit)."""
    variance = min(variance, 0.99 * mean * (1 - mean))
    common = mean * (1 - mean) / variance - 1
    return rng.beta(mean * common, (1 - mean) * common, size=size)


def items_needed(
    margin: float,
    item_variance: float,
    alpha: float = 0.05,
    power: float = 0.8,
    max_items: int = 2000,
    rounds: int = 200,
    seed: int = 0,
) -> int | None:
    """The smallest number of items by which the confidence sequence decides for the first system in ``power`` of
    ``rounds`` simulated studies whose first system wins ``0.5 + margin``; None when ``max_items`` do not suffice."""
    if not 0 < margin < 0.5 or not 0 < power < 1 or item_variance <= 0:
        raise ValueError("need 0 < margin < 0.5, 0 < power < 1 and a positive item variance")
    rng = np.random.default_rng(seed)
    first_decided = np.full(rounds, np.inf)
    rank = int(np.ceil(power * (rounds - 1)))  # the run whose decision time is the power quantile ("higher")
    for start in range(0, rounds, BLOCK):  # a block of runs at a time: memory stays BLOCK x max_items draws
        draws = beta_scores(0.5 + margin, item_variance, (min(BLOCK, rounds - start), max_items), rng)
        block = first_decided[start : start + len(draws)]
        n = min(64, max_items)
        while True:  # a prefix of the same draws, doubled until power of the runs have decided (or max_items)
            for r in np.flatnonzero(~np.isfinite(block)):
                lower, _ = betting_confidence_sequence(draws[r, :n], alpha, grid=500)
                hit = np.flatnonzero(lower > 0.5)
                if len(hit):
                    block[r] = hit[0] + 1
            # enough decided in every block that the power quantile over all of them is among the decided
            if np.isfinite(block).sum() > np.ceil(power * (len(block) - 1)) or n == max_items:
                break
            n = min(2 * n, max_items)
    needed = float(np.sort(first_decided)[rank])
    return None if not np.isfinite(needed) else int(needed)


def judgments(items: int, raters: int, pairs_per_item: float = 1) -> int:
    """The judgments a plan buys: items x raters per item x the sampled output pairs each rater judges per item (one
    when each system has one output per item), rounded up."""
    return int(np.ceil(items * raters * pairs_per_item - 1e-9))


@dataclasses.dataclass(frozen=True)
class Plan:
    margin: float
    raters: int
    items: int | None
    judgments: int | None


def plan(
    pilot: Pilot,
    margins: Sequence[float],
    raters: Iterable[int] = (1,),
    alpha: float = 0.05,
    power: float = 0.8,
    max_items: int = 2000,
    rounds: int = 200,
    seed: int = 0,
) -> list[Plan]:
    """Items and judgments per margin and number of raters per item (``judgments``, with one pair per item)."""
    out = []
    for m in raters:
        for margin in margins:
            n = items_needed(margin, pilot.item_variance(m), alpha, power, max_items, rounds, seed)
            out.append(Plan(margin, m, n, None if n is None else judgments(n, m)))
    return out
