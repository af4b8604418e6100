"""Positional bias (docs/comparative-assessment.md#positional-bias; Liusie et al., "LLM comparative assessment").

P(first shown chosen) over non-tie judgments, clustered by item: an exact sign-flip randomisation test over items
against 0.5 and a Korn-Graubard interval (Clopper-Pearson at the clustered effective sample size); for judges that
return probabilities, the debiasing threshold that makes the first-shown option win half of a symmetric comparison
set.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt
from scipy.signal import convolve
from scipy.stats import beta, binom, t


@dataclasses.dataclass(frozen=True)
class PositionalBias:
    n: int  # non-tie judgments
    first_chosen: int
    rate: float  # P(first shown chosen); 0.5 means unbiased
    low: float
    high: float
    p_value: float
    items: int  # the clusters: items with a non-tie judgment


def positional_bias(first_chosen: npt.ArrayLike, items: npt.ArrayLike, confidence: float = 0.95) -> PositionalBias:
    """``first_chosen``: booleans, one per non-tie judgment (True when the first-shown output won); ``items``: the
    item each judgment is of (any ids). The raters of an item agree with each other, so the item, not the vote, is
    the unit: the p-value is ``sign_flip_p`` of each item's (first-shown wins - second-shown wins), the interval
    ``clustered_interval``. With one judgment per item both are the exact binomial test and (a little wider than)
    Clopper-Pearson."""
    x = np.asarray(first_chosen, dtype=bool)
    ids = np.asarray(items)
    if ids.shape != x.shape:
        raise ValueError(f"one item per judgment: {ids.shape} items for {x.shape} judgments")
    n, k = int(x.size), int(x.sum())
    if n == 0:
        return PositionalBias(0, 0, float("nan"), float("nan"), float("nan"), float("nan"), 0)
    _, cluster = np.unique(ids, return_inverse=True)
    per_item_n = np.bincount(cluster)
    per_item_first = np.bincount(cluster, weights=x).astype(np.int64)
    low, high = clustered_interval(per_item_first, per_item_n, confidence)
    p = sign_flip_p(2 * per_item_first - per_item_n)
    return PositionalBias(n, k, k / n, low, high, p, int(per_item_n.size))


def sign_flip_p(differences: npt.ArrayLike) -> float:
    """Two-sided p-value of the sign-flip randomisation test that integer ``differences`` (one per item: first-shown
    wins - second-shown wins) are symmetric about 0, with S = their sum: P(|S*| >= |S|) over all 2^m sign flips,
    exactly. Under the null (the display order drawn at random per item and no position effect) flipping an item's
    sign is flipping its order, so the test is exact at any number of items. The flip distribution is a
    convolution: the c items with |d| = v add v (2 B - c), B ~ Binomial(c, 1/2). With every |d| = 1 (one judgment
    per item) it is the exact two-sided binomial test against 1/2."""
    d = np.abs(np.asarray(differences, dtype=np.int64))
    d = d[d > 0]
    observed = abs(int(np.sum(differences)))
    if not observed:
        return 1.0
    values, counts = np.unique(d, return_counts=True)
    b = np.concatenate([np.arange(c + 1) for c in counts])
    pmfs = np.split(binom.pmf(b, np.repeat(counts, counts + 1), 0.5), np.cumsum(counts + 1)[:-1])  # one call
    dist = np.ones(1)
    for v, c, pmf in zip(values.tolist(), counts.tolist(), pmfs, strict=True):
        step = np.zeros(2 * v * c + 1)
        step[:: 2 * v] = pmf  # v (2 B - c) on the grid -v c .. v c
        # small ones directly; large ones direct or by FFT, whichever scipy reckons faster
        dist = np.convolve(dist, step) if dist.size * step.size < 1_000_000 else convolve(dist, step)
    half = (dist.size - 1) // 2  # dist[j] = P(S* = j - half), symmetric
    tail = float(dist[half + observed :].sum())  # P(S* >= |S|)
    return float(np.clip(2 * tail, 0.0, 1.0))  # (an FFT's rounding, ~1e-16 a point, can leave a tail below 0)


def clustered_interval(
    per_item_first: npt.ArrayLike, per_item_n: npt.ArrayLike, confidence: float = 0.95
) -> tuple[float, float]:
    """Korn & Graubard's (1998) interval for a proportion from clustered data: the ratio r = sum f_i / sum n_i with
    its cluster-robust variance V = m / (m - 1) * sum (f_i - r n_i)^2 / (sum n_i)^2 over m items; the effective
    sample size n* = r (1 - r) / V (at most sum n_i: never narrower than the votes taken as independent; sum n_i
    at r = 0 or 1), shrunk by (t_{N-1} / t_{m-1})^2 for the m - 1 degrees of freedom, and Clopper-Pearson at
    r n* successes of n*. (0, 1) from one item: its raters alone say nothing of how items vary."""
    f = np.asarray(per_item_first, dtype=np.float64)
    ni = np.asarray(per_item_n, dtype=np.float64)
    m, total = f.size, float(ni.sum())
    if m < 2:
        return 0.0, 1.0
    r = float(f.sum()) / total
    var = m / (m - 1) * float(np.sum((f - r * ni) ** 2)) / total**2
    n_eff = min(total, r * (1 - r) / var) if var > 0 and 0 < r < 1 else total
    alpha = 1 - confidence
    t_votes, t_items = t.ppf(1 - alpha / 2, [total - 1, m - 1])
    n_eff *= (t_votes / t_items) ** 2
    x = r * n_eff
    low, high = beta.ppf([alpha / 2, 1 - alpha / 2], [max(x, 1e-300), x + 1], [n_eff - x + 1, max(n_eff - x, 1e-300)])
    return 0.0 if x <= 0 else float(low), 1.0 if x >= n_eff else float(high)


def debias_threshold(prob_first: npt.ArrayLike) -> float:
    """tau such that deciding "first" when P(first) > tau picks the first-shown output in half of the
    comparisons: the median of P(first) over a symmetric set (each pair in both orders). Equivalent
    to the alpha reweighting of Eq. 9-10. When several comparisons sit exactly at the median, no threshold
    alone reaches one half: ``tie_share`` says how often to decide "first" there."""
    p = np.asarray(prob_first, dtype=np.float64)
    return float(np.median(p)) if p.size else float("nan")


def tie_share(prob_first: npt.ArrayLike, tau: float) -> float:
    """The share of the comparisons at exactly ``tau`` to decide "first" (at random, Eq. 9-10's randomised
    threshold) so that "first" is decided in half of all comparisons: (n/2 - #(P > tau)) / #(P = tau), within
    [0, 1]; 0 when none sits at tau. E.g. P = (.9, .9, .9, .9, .2, .1): tau = .9, none above, four at it: 3/4."""
    p = np.asarray(prob_first, dtype=np.float64)
    at = int(np.sum(p == tau))
    if not at:
        return 0.0
    return float(np.clip((p.size / 2 - np.sum(p > tau)) / at, 0.0, 1.0))


@dataclasses.dataclass(frozen=True)
class Debiasing:
    threshold: float
    tie_share: float  # at exactly the threshold, "first" is decided this share of the time
    first_rate_before: float
    first_rate_after: float  # expected, with the comparisons at the threshold decided at random
    accuracy_before: float
    accuracy_after: float  # expected accuracy of the randomised rule
    n: int


def debiasing(prob_first: npt.ArrayLike, truth_first: npt.ArrayLike | None = None) -> Debiasing:
    """Decisions at 0.5 and at the debiasing threshold (randomised at the threshold: ``tie_share``); accuracy
    against ``truth_first`` (e.g. the human majority, in display coordinates) where given (NaN otherwise). The
    rates and accuracy after debiasing are expectations over that randomisation, so they need no seed."""
    p = np.asarray(prob_first, dtype=np.float64)
    n = len(p)
    tau = debias_threshold(p)
    gamma = tie_share(p, tau) if n else 0.0
    before = p > 0.5
    after = np.where(p > tau, 1.0, np.where(p == tau, gamma, 0.0))  # P(decide "first")
    if truth_first is None or n == 0:
        acc_b = acc_a = float("nan")
    else:
        t = np.asarray(truth_first, dtype=bool)
        acc_b = float(np.mean(before == t))
        acc_a = float(np.mean(np.where(t, after, 1.0 - after)))
    rate_before = float(before.mean()) if n else float("nan")
    rate_after = float(after.mean()) if n else float("nan")
    return Debiasing(tau, gamma, rate_before, rate_after, acc_b, acc_a, n)
