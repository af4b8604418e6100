"""Benchmarking selection methods without humans (docs/diffuse.md#simulation).

Given an oracle label per item ("a", "b" or "tie"), for each seed draw a pool of 80 % of the items
and treat it as the whole test set: the *test winner* is the oracle majority over the pool, and a
method succeeds when the majority over the items it selected names the same winner. A level sample
(no majority) counts as a failure, the same for every method.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Sequence
from functools import cached_property

import numpy as np
import numpy.typing as npt

from analytics.core import ppi
from selection.core import decisions
from selection.core.diffuse import Dendrogram, IterativeDiffUse, ward_tree
from selection.core.stopping import stopping_status


def majority(labels: Sequence[str] | npt.NDArray[np.str_]) -> str | None:
    """'a' or 'b' by simple majority of the non-tie labels; None when level."""
    labels = np.asarray(labels)
    a, b = int(np.sum(labels == "a")), int(np.sum(labels == "b"))
    return None if a == b else ("a" if a > b else "b")


@dataclasses.dataclass
class Pool:
    """One seed's pool: the candidate vectors (and deltas), its oracle, and a lazily built Ward tree."""

    x: npt.NDArray[np.float64]
    oracle: npt.NDArray[np.str_]  # "a", "b" or "tie" per item
    delta: npt.NDArray[np.float64] | None = None
    judges: npt.NDArray[np.float64] | None = None  # the LLM judges' verdict scores per item (rows), NaN-padded

    @cached_property
    def y(self) -> npt.NDArray[np.float64]:
        """Each item's oracle as the first system's score: 1 a win, 1/2 a tie, 0 a loss."""
        return np.array([SCORE[label] for label in self.oracle], dtype=np.float64)

    @cached_property
    def f(self) -> npt.NDArray[np.float64]:
        """The judges' mean score per item (1/2 where no judge gave a verdict): the prediction beside the oracle."""
        if self.judges is None:
            raise ValueError("this pool has no judge verdicts")
        counts = np.sum(~np.isnan(self.judges), axis=1)
        totals = np.nansum(self.judges, axis=1)
        return np.where(counts > 0, totals / np.maximum(counts, 1), 0.5)

    @cached_property
    def tree(self) -> Dendrogram:
        return ward_tree(self.x)

    @cached_property
    def winner(self) -> str | None:
        return majority(self.oracle)


Method = Callable[[Pool, int, np.random.Generator], npt.NDArray[np.integer]]  # the chosen pool indices
SCORE = {"a": 1.0, "tie": 0.5, "b": 0.0}


def draw_pools(
    x: npt.NDArray[np.float64],
    oracle: npt.NDArray[np.str_],
    seeds: int,
    fraction: float = 0.8,
    seed: int = 0,
    delta: npt.NDArray[np.float64] | None = None,
    judges: npt.NDArray[np.float64] | None = None,
) -> list[Pool]:
    """``seeds`` pools of ``fraction`` of the items each, reproducibly from ``seed``."""
    n = len(oracle)
    size = max(2, int(round(fraction * n)))
    pools = []
    for s in range(seeds):
        index = np.sort(np.random.default_rng([seed, s]).choice(n, size=size, replace=False))
        pools.append(
            Pool(
                x[index],
                oracle[index],
                None if delta is None else delta[index],
                None if judges is None else judges[index],
            )
        )
    return pools


def success_rates(
    pools: Sequence[Pool], methods: dict[str, Method], budgets: Sequence[int], seed: int = 0
) -> dict[str, dict[int, float]]:
    """Success rate per method and budget: the share of pools whose selected-sample majority equals
    the pool's winner. Each (pool, method, budget) gets its own generator derived from ``seed``."""
    rates: dict[str, dict[int, float]] = {name: {} for name in methods}
    for name, method in methods.items():
        for budget in budgets:
            hits = 0
            for s, pool in enumerate(pools):
                rng = np.random.default_rng([seed, s, budget, zlib.crc32(name.encode())])
                chosen = method(pool, budget, rng)
                hits += pool.winner is not None and majority(pool.oracle[chosen]) == pool.winner
            rates[name][budget] = hits / len(pools)
    return rates


# --------------------------------------------------------------------------------------------------------------
# Estimates from people and judges: how close each design's estimate of the pool's win rate comes, how often its
# interval covers it, and how many labels by people alone on a uniform sample it is worth, both as it claims and as
# it delivers. A design draws the items people label (with their inclusion probabilities and strata when the
# strategy states them); an estimator turns the labels (and the judges' scores on every item) into a mean with an
# interval. The target is the pool's own mean (these items: the finite-population correction applies).


@dataclasses.dataclass(frozen=True)
class Drawn:
    """One draw of a design: the chosen pool indices, their inclusion probabilities and every pool item's stratum
    when the strategy states them."""

    chosen: npt.NDArray[np.integer]
    inclusion: npt.NDArray[np.float64] | None = None
    strata: npt.NDArray[np.int64] | None = None


Draw = Callable[[Pool, int, np.random.Generator], Drawn]
Estimator = Callable[[Pool, Drawn], ppi.MeanEstimate]


def _people(pool: Pool, drawn: Drawn) -> ppi.MeanEstimate:
    return ppi.classical_mean(pool.y[drawn.chosen], population_size=len(pool.oracle))


def _people_and_judges(pool: Pool, drawn: Drawn) -> ppi.MeanEstimate:
    rest = np.setdiff1d(np.arange(len(pool.oracle)), drawn.chosen)
    return ppi.ppi_mean(pool.y[drawn.chosen], pool.f[drawn.chosen], pool.f[rest], finite=True)


def _weighted(lam: float | None) -> Estimator:
    def estimate(pool: Pool, drawn: Drawn) -> ppi.MeanEstimate:
        if drawn.inclusion is None:
            raise ValueError("a weighted estimate needs the design's inclusion probabilities")
        sampled = np.zeros(len(pool.oracle), dtype=bool)
        sampled[drawn.chosen] = True
        pi = np.ones(len(pool.oracle))
        pi[drawn.chosen] = drawn.inclusion
        f = pool.f if pool.judges is not None else np.full(len(pool.oracle), 0.5)
        return ppi.active_mean(np.where(sampled, pool.y, np.nan), f, pi, sampled, lam=lam, finite=True)

    return estimate


def _stratified(pool: Pool, drawn: Drawn) -> ppi.MeanEstimate:
    if drawn.strata is None:
        raise ValueError("a stratified estimate needs the design's strata")
    sampled = np.zeros(len(pool.oracle), dtype=bool)
    sampled[drawn.chosen] = True
    return ppi.stratified_mean(np.where(sampled, pool.y, np.nan), drawn.strata, sampled, finite=True)


ESTIMATORS: dict[str, Estimator] = {
    "people": _people,  # the labelled mean (a uniform or self-weighting sample)
    "people+judges": _people_and_judges,  # prediction-powered, power-tuned (a uniform sample)
    "weighted": _weighted(None),  # inverse-probability weighted, the judges as control variate, power-tuned
    "weighted people": _weighted(0.0),  # the people alone, weighted
    "stratified": _stratified,  # the stratified mean (a stratified sample)
}


@dataclasses.dataclass(frozen=True)
class EstimateFigures:
    success: float  # share of pools whose estimate names the pool's winner (above or below 1/2 as the pool is)
    error: float  # mean |estimate - the pool's win rate|
    mse: float  # mean squared error
    width: float  # mean width of the 95 % interval
    coverage: float  # share of intervals that hold the pool's win rate
    claimed: float  # mean efficiency the estimate claims (labels by people alone on a uniform sample, per label)
    # the mean squared error people alone have with a uniform sample of the same size, exactly: (1 - n/N) S^2 / n
    reference_mse: float

    @property
    def realised(self) -> float:
        """The efficiency delivered: people alone's mean squared error (exact) over this design's."""
        return self.reference_mse / self.mse if self.mse else float("inf")


def estimate_rates(
    pools: Sequence[Pool], designs: dict[str, tuple[Draw, str]], budgets: Sequence[int], seed: int = 0
) -> dict[str, dict[int, EstimateFigures]]:
    """Per design (a draw and the name of an estimator in ``ESTIMATORS``) and budget: success, mean error, mean
    squared error, mean interval width, coverage of the pool's win rate (the mean oracle score of its first system),
    the efficiency the estimates claim and the one they deliver (``EstimateFigures.realised``: against people alone
    on a uniform sample, whose mean squared error is known exactly). Each (pool, design, budget) draws with its own
    generator derived from ``seed``; a budget below 2 is skipped."""
    out: dict[str, dict[int, EstimateFigures]] = {name: {} for name in designs}
    for name, (draw, estimator) in designs.items():
        for budget in budgets:
            if budget < 2:
                continue
            rows = []
            for s, pool in enumerate(pools):
                rng = np.random.default_rng([seed, s, budget, zlib.crc32(name.encode())])
                drawn = draw(pool, budget, rng)
                drawn = dataclasses.replace(drawn, chosen=np.asarray(drawn.chosen, dtype=np.int64))
                estimate = ESTIMATORS[estimator](pool, drawn)
                truth = float(pool.y.mean())
                named = None if estimate.estimate == 0.5 else ("a" if estimate.estimate > 0.5 else "b")
                size = len(pool.oracle)
                exact = (1 - budget / size) * float(np.var(pool.y, ddof=1)) / budget if size > 1 else 0.0
                rows.append(
                    (
                        pool.winner is not None and named == pool.winner,
                        abs(estimate.estimate - truth),
                        (estimate.estimate - truth) ** 2,
                        estimate.width,
                        estimate.low - 1e-12 <= truth <= estimate.high + 1e-12,
                        estimate.efficiency,
                        exact,
                    )
                )
            out[name][budget] = EstimateFigures(*(float(np.mean(column)) for column in zip(*rows, strict=True)))
    return out


@dataclasses.dataclass(frozen=True)
class IterativeReport:
    success: float
    error: float
    inconclusive: float
    mean_annotations: float
    risk: float


def _report(outcomes: list[str], annotations: list[int], risk: float) -> IterativeReport:
    n = len(outcomes)
    return IterativeReport(
        outcomes.count("success") / n,
        outcomes.count("error") / n,
        outcomes.count("inconclusive") / n,
        float(np.mean(annotations)),
        risk,
    )


def iterative_random_report(
    pools: Sequence[Pool],
    risk: float = 0.1,
    min_n: int = 5,
    budget: int = 200,
    step: int = 2,
    seed: int = 0,
    ties_count_in_n: bool = True,
) -> IterativeReport:
    """The random baseline for Algorithm 1: the same stopping rule over items drawn at random —
    ``min_n`` first, then ``step`` more at a time (DiffUse adds up to two per split)."""
    outcomes, annotations = [], []
    for s, pool in enumerate(pools):
        n = len(pool.oracle)
        order = np.random.default_rng([seed, s, 7919]).permutation(n)
        taken = min(min_n, n)
        while True:
            labels = pool.oracle[order[:taken]]
            status = stopping_status(
                int(np.sum(labels == "a")),
                int(np.sum(labels == "b")),
                int(np.sum(labels == "tie")),
                n,
                risk,
                ties_count_in_n,
            )
            if decisions.from_hypergeometric(status).decided:
                outcomes.append("success" if status.leader == pool.winner else "error")
                break
            if taken >= budget or taken >= n:
                outcomes.append("inconclusive")
                break
            taken = min(taken + step, n)
        annotations.append(taken)
    return _report(outcomes, annotations, risk)


def iterative_report(
    pools: Sequence[Pool], risk: float = 0.1, min_n: int = 5, budget: int = 200, ties_count_in_n: bool = True
) -> IterativeReport:
    """Run Algorithm 1 on every pool with its oracle: the share of pools decided for the right winner
    (success), for the wrong one (error) and undecided within the budget (inconclusive), and the mean
    number of annotations. ``error`` is what to compare with the promised ``risk``."""
    outcomes, annotations = [], []
    for pool in pools:
        algorithm = IterativeDiffUse(pool.tree, risk=risk, min_n=min_n, budget=budget, ties_count_in_n=ties_count_in_n)
        while True:
            for item in algorithm.to_annotate():
                algorithm.record(item, str(pool.oracle[item]))
            if not algorithm.advance():
                break
        annotations.append(len(algorithm.labels))
        if algorithm.outcome == "inconclusive":
            outcomes.append("inconclusive")
        else:
            outcomes.append("success" if algorithm.winner == pool.winner else "error")
    return _report(outcomes, annotations, risk)
