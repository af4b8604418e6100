"""What a design's estimate is worth in labels by people alone, said conservatively: the efficiency one standard
error (delete-one jackknife) below its estimate, for the designs whose efficiency is a ratio of two noisy variance
estimates from a few labels (docs/human-and-judge.md#labels-worth). Numpy in, numpy out; ``analytics.core.ppi``
calls it.

The plain efficiency of a weighted or stratified sample is Var_ref / Var, both estimated from the same n labels. At
10-40 labels the ratio is biased upwards (a variance that happens to come out small makes the ratio large, and
the ratio is convex in it) and the interval's fair-coin labels pull a design that loses towards 1: on PRD with two
judges the judge-disagreement design claimed 1.02 while it delivered 0.74, Neyman's strata 1.04 against 0.89
(bench/README.md). The claim here is that ratio times exp(-se), se the jackknife standard error of its logarithm
over the labelled items (Quenouille and Tukey's delete-one jackknife; for strata, the stratified jackknife with
(n_h - 1) / n_h per stratum): about a one-sided 84 % lower confidence bound, so a design is said to save labels only
when its sample shows it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def shrunk_worth(
    variance: npt.ArrayLike, reference: npt.ArrayLike, n_labels: npt.ArrayLike, k: npt.ArrayLike, span: float = 1.0
) -> npt.NDArray[np.float64]:
    """``ppi.labels_worth`` element-wise: (n^2 Var_ref + k / 4) / (n^2 Var + k / 4) on the [0, 1] scale, k = z^2 g
    the interval's fair-coin labels (k = 0: the plain variance ratio; 1 where both variances are 0)."""
    n = np.asarray(n_labels, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    low = n * n * np.maximum(np.asarray(variance, dtype=np.float64), 0.0) / span**2 + k / 4
    high = n * n * np.maximum(np.asarray(reference, dtype=np.float64), 0.0) / span**2 + k / 4
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(low > 0, high / np.where(low > 0, low, 1.0), np.where(high > 0, np.inf, 1.0))
    return np.asarray(out, dtype=np.float64)


def jackknife_se(replicates: npt.ArrayLike, factor: float | None = None) -> float:
    """The delete-one jackknife standard error sqrt(c sum_j (t_(j) - mean t_(.))^2), c = (m - 1) / m for m
    replicates (``factor`` overrides c); 0 for fewer than two replicates."""
    t = np.asarray(replicates, dtype=np.float64)
    m = t.size
    if m < 2:
        return 0.0
    c = (m - 1) / m if factor is None else factor
    return float(np.sqrt(c * np.sum((t - t.mean()) ** 2)))


def conservative_worth(worth: float, log_se: float) -> float:
    """The claimed efficiency: ``worth`` exp(-``log_se``), one standard error of its logarithm below it."""
    if not np.isfinite(worth):
        return worth
    return float(worth * np.exp(-max(log_se, 0.0)))


def replicate_log_se(
    variance: npt.ArrayLike,
    reference: npt.ArrayLike,
    share: npt.ArrayLike,
    strata: npt.ArrayLike | None = None,
    factors: npt.ArrayLike | None = None,
    *,
    n_labels: int,
    z2: float,
    span: float = 1.0,
) -> float:
    """The jackknife standard error of log(efficiency) from its leave-one-out replicates (each on ``n_labels``
    labels, its fair-coin labels k = ``z2`` g with g its ``share``): the delete-one jackknife, or with ``strata``
    and ``factors`` the stratified one, sqrt(sum_h (n_h - 1) / n_h sum_{j in h} (t_(hj) - mean_h t)^2)."""
    t = np.log(shrunk_worth(variance, reference, n_labels, z2 * np.asarray(share, dtype=np.float64), span))
    if strata is None:
        return jackknife_se(t)
    strata, factors = np.asarray(strata), np.asarray(factors, dtype=np.float64)
    total = 0.0
    for h in np.unique(strata):
        members = strata == h
        total += float(factors[members][0] * np.sum((t[members] - t[members].mean()) ** 2))
    return float(np.sqrt(total))


def weighted_replicates(
    ys: npt.ArrayLike,
    fs: npt.ArrayLike,
    ps: npt.ArrayLike,
    lam: float,
    fitted: int,
    big_n: int,
    finite: bool,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``ppi.active_mean``'s variance and reference variance with each labelled item left out in turn (lambda
    held at its full-sample value): arrays over the n labelled items (labels ``ys``, the judge's ``fs``, inclusion
    probabilities ``ps``), of (Var_(j), Var_ref_(j), share_(j)) on the m = n - 1 other labels as a draw of m (each
    pi_i scaled by m / n, so that with equal chances and lambda = 0 every replicate's efficiency is 1 as the full
    sample's is), with ``fitted`` coefficients p:

        V_d(j) = m / (m - p) sum_{i != j} (1 - pi_i) w_i^2 (e_i - e_w(j))^2 / N^2
        s_w^2(j) = m / (m - 1) sum_{i != j} w_i (y_i - y_w(j))^2 / sum_{i != j} w_i
        Var(j) = V_d(j) + s_w^2(j) / N (items like these) or V_d(j) (these items),  Var_ref(j) = g s_w^2(j) / m

    with g = 1 - m / N for these items, else 1. Each sum is the full sum less item j's term (O(n))."""
    ys, fs, ps = (np.asarray(v, dtype=np.float64) for v in (ys, fs, ps))
    n = ys.size
    m = n - 1
    if m - fitted <= 0 or m < 2:
        empty = np.zeros(0)
        return empty, empty, empty
    ps = ps * m / n  # the other m labels as a draw of m: each chance scaled as the report scales a part-judged draw
    w = 1.0 / ps
    u = (1.0 - ps) * w * w
    e = ys - lam * fs

    def left_out_spread(
        weights: npt.NDArray[np.float64], values: npt.NDArray[np.float64], centre_weights: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        # sum_{i != j} weights_i (values_i - c_j)^2 with c_j the centre_weights-weighted mean of the others
        c = (np.sum(centre_weights * values) - centre_weights * values) / (centre_weights.sum() - centre_weights)
        s2 = np.sum(weights * values**2) - weights * values**2
        s1 = np.sum(weights * values) - weights * values
        s0 = weights.sum() - weights
        out: npt.NDArray[np.float64] = np.maximum(s2 - 2 * c * s1 + c * c * s0, 0.0)
        return out

    design = m / (m - fitted) * left_out_spread(u, e, w) / big_n**2
    spread = m / (m - 1) * left_out_spread(w, ys, w) / (w.sum() - w)
    share = np.full(n, 1.0 - m / big_n if finite else 1.0)
    variance = design if finite else design + spread / big_n
    return variance, share * spread / m, share


def stratified_replicates(
    y: npt.ArrayLike, strata: npt.ArrayLike, sampled: npt.ArrayLike, finite: bool
) -> tuple[npt.NDArray[np.float64], ...]:
    """``ppi.stratified_mean``'s variance and reference variance with one labelled item left out in turn, for
    every labelled item of a stratum that keeps at least two labels without it (a stratum of two labels has no
    replicate: its share of the jackknife is left out): arrays over those items of (Var_(hj), Var_ref_(hj),
    share_(hj), the item's stratum, (n_h - 1) / n_h), the last the stratified jackknife's factor for its stratum.
    A stratum's mean and variance without item j: (S - y_j) / (n_h - 1) and (Q - y_j^2 - (n_h - 1) mean^2) /
    (n_h - 2), S and Q its labels' sum and sum of squares."""
    y = np.asarray(y, dtype=np.float64)
    sampled = np.asarray(sampled, dtype=bool)
    big_n, n = y.size, int(sampled.sum())
    _, code = np.unique(np.asarray(strata), return_inverse=True)
    sizes = np.bincount(code).astype(np.float64)
    mine, values = code[sampled], y[sampled]
    counts = np.bincount(mine, minlength=sizes.size).astype(np.float64)
    totals = np.bincount(mine, values, minlength=sizes.size)
    squares = np.bincount(mine, values * values, minlength=sizes.size)
    means = totals / np.maximum(counts, 1)
    variances = np.where(counts > 1, (squares - counts * means**2) / np.maximum(counts - 1, 1), 0.0)
    variances = np.maximum(variances, 0.0)
    keep = counts[mine] >= 3  # the labelled items whose stratum keeps two labels without them
    if not keep.any():
        empty = np.zeros(0)
        return empty, empty, empty, empty, empty
    which, left = mine[keep], values[keep]
    rows = which.size
    c, mu, var = (np.tile(a, (rows, 1)) for a in (counts, means, variances))
    at = np.arange(rows)
    k = counts[which]
    c[at, which] = k - 1
    mu[at, which] = (totals[which] - left) / (k - 1)
    var[at, which] = np.maximum(squares[which] - left**2 - (k - 1) * mu[at, which] ** 2, 0.0) / (k - 2)
    variance, reference, share = stratified_parts(sizes, c, mu, var, big_n, n - 1, finite)
    return variance, reference, share, which.astype(np.float64), (k - 1) / k


def stratified_parts(
    sizes: npt.NDArray[np.float64],
    counts: npt.NDArray[np.float64],
    means: npt.NDArray[np.float64],
    variances: npt.NDArray[np.float64],
    big_n: int,
    n: int,
    finite: bool,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The stratified mean's (Var, Var_ref, share g) from each stratum's size N_h, labels n_h, mean and variance
    s_h^2 (``ppi.stratified_mean``'s formulas; the strata on the last axis, one row per replicate when 2-D):
    V_d = sum W_h^2 (1 - n_h / N_h) s_h^2 / n_h, S^2 from within the strata plus between their means (corrected for
    the noise of the means), Var = V_d + S^2 / N or V_d (these items), Var_ref = g S^2 / n."""
    weights = sizes / big_n
    noise = (1 - counts / sizes) * variances / counts
    estimate = np.sum(weights * means, axis=-1, keepdims=True)
    design = np.sum(weights**2 * noise, axis=-1)
    within = np.sum((sizes - 1) * variances, axis=-1)
    between = np.sum(sizes * (means - estimate) ** 2, axis=-1)
    between = between - big_n * np.sum(weights * (1 - weights) * noise, axis=-1)
    spread = (within + np.maximum(between, 0.0)) / max(big_n - 1, 1)
    share = np.full(np.shape(design), 1.0 - n / big_n if finite else 1.0)
    variance = design if finite else design + spread / big_n
    return variance, share * spread / n, share
