"""Item selection strategies as pure functions (SPEC §4-5). Every random choice goes through the
``numpy.random.Generator`` passed in, so a seed reproduces the selection exactly.

All functions return indices into the candidate array, in selection order.
"""

from __future__ import annotations

import numpy as np

from selection.core.diffuse import Dendrogram, static_selection


def random_selection(n: int, budget: int, rng: np.random.Generator) -> np.ndarray:
    """``budget`` items uniformly at random without replacement (all of them, shuffled, if fewer)."""
    return rng.permutation(n)[: min(budget, n)]


def diffuse_selection(tree: Dendrogram, budget: int) -> np.ndarray:
    """Static DiffUse: one representative per cluster of the cut into ``budget`` clusters."""
    return np.array(static_selection(tree, budget), dtype=np.int64)


def proportional_allocation(sizes: np.ndarray, budget: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """Split ``budget`` draws over strata in proportion to their sizes, never more than a stratum holds.

    Without ``rng``: deterministic largest-remainder rounding. With ``rng``: randomised systematic
    rounding of the fractional parts, so that every stratum's *expected* count is exactly
    budget * size / total — every item then has the same inclusion probability budget / total and
    the sample majority is unbiased (deterministic rounding favours some strata, which can flip a
    near-even comparison).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    budget = min(budget, int(sizes.sum()))
    quota = budget * sizes / sizes.sum()
    counts = np.minimum(np.floor(quota).astype(np.int64), sizes)
    remainder = quota - counts
    if rng is not None:
        extra = budget - int(counts.sum())
        if extra:
            # systematic sampling on the cumulative fractional parts: stratum h gets one more draw with
            # probability remainder[h], and exactly ``extra`` strata get one
            edges = np.cumsum(remainder)
            points = rng.uniform(0.0, 1.0) + np.arange(extra)
            # clip guards against the float sum of the fractions falling a hair short of ``extra``
            hit = np.minimum(np.searchsorted(edges, points, side="right"), len(sizes) - 1)
            np.add.at(counts, hit, 1)
        return counts
    while counts.sum() < budget:
        open_ = counts < sizes
        best = np.flatnonzero(open_)[np.argmax(remainder[open_])]
        counts[best] += 1
        remainder[best] = -np.inf
    return counts


def cluster_stratified_selection(tree: Dendrogram, budget: int, rng: np.random.Generator,
                                 n_strata: int | None = None) -> np.ndarray:
    """Proportional-allocation stratified sampling over difference-vector clusters.

    The Ward tree is cut into ``n_strata`` clusters (default: budget // 2, at least 2); each stratum
    gets draws in proportion to its size and its items are drawn uniformly at random. The sample is
    self-weighting, so the plain majority over it is an unbiased estimate of the pool's preference —
    unlike DiffUse's one-vote-per-cluster — while the clustering removes between-cluster variance.
    """
    budget = min(budget, tree.n_items)
    strata = min(tree.n, n_strata or max(2, budget // 2))
    nodes = tree.partition(strata)
    counts = proportional_allocation(np.array([tree.size[node] for node in nodes]), budget, rng)
    chosen = [rng.choice(tree.members(node), size=c, replace=False) for node, c in zip(nodes, counts, strict=True)
              if c > 0]
    selection = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
    return rng.permutation(selection)


def separability_weight(delta: np.ndarray, threshold: float = 0.4, alpha: float = 2.0, beta: float = 6.0) -> np.ndarray:
    """The sep-ELO logistic alpha / (1 + exp(-beta (delta - T))) used as a sampling weight (SPEC §3, §5)."""
    return alpha / (1.0 + np.exp(-beta * (np.asarray(delta, dtype=np.float64) - threshold)))


def weighted_selection(weights: np.ndarray, budget: int, rng: np.random.Generator) -> np.ndarray:
    """``budget`` items without replacement with probability proportional to ``weights``."""
    weights = np.asarray(weights, dtype=np.float64)
    if np.any(weights < 0) or not np.isfinite(weights).all():
        raise ValueError("weights must be finite and non-negative")
    positive = np.flatnonzero(weights > 0)
    budget = min(budget, positive.size)
    p = weights[positive] / weights[positive].sum()
    return positive[rng.choice(positive.size, size=budget, replace=False, p=p)]


def value_stratified_selection(values: np.ndarray, budget: int, rng: np.random.Generator,
                               bins: int = 4) -> np.ndarray:
    """Equal counts from each of ``bins`` equal-width bins of ``values`` (e.g. delta); a bin with too
    few items gives what it has and the rest is spread over the others."""
    values = np.asarray(values, dtype=np.float64)
    edges = np.linspace(values.min(), values.max(), bins + 1)
    which = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, bins - 1)
    pools = [rng.permutation(np.flatnonzero(which == b)).tolist() for b in range(bins)]
    budget = min(budget, values.size)
    chosen: list[int] = []
    while len(chosen) < budget:
        for pool in pools:
            if pool and len(chosen) < budget:
                chosen.append(pool.pop())
    return np.array(chosen, dtype=np.int64)
