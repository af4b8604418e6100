"""A win rate (or any mean of bounded scores) from people's labels, alone or with LLM judges: the estimators, their
variances and one interval rule for all of them (docs/human-and-judge.md). Numpy in, numpy out.

Every estimator here is a design-based estimate: it is unbiased because the items people labelled were drawn at
random with known chances (uniformly, with unequal known chances, or within strata), never because a model is
right. Each states its **target**:

- *items like these* (the default): the mean over the population the study's items were drawn from. The
  variance then has two parts: how the study's items happen to differ from that population (sigma^2 / N for N
  items) and which of them people labelled (the design variance).
- *these items*: the mean over the study's own N items. Only the design variance counts (the finite-population
  correction 1 - n / N): when people labelled every item the answer is exact.

Estimators, with Y the people's score on a labelled item (e.g. 1 a win, 1/2 a tie, 0 a loss for the first system)
and f a judge's score on every item (known before any draw, so any judge, however poor, keeps the estimate
unbiased; it can only change the variance):

- ``classical_mean``: the labelled mean, Var = s^2 / n.
- ``ppi_mean``: prediction-powered inference with power tuning (PPI++; Angelopoulos, Duchi and Zrnic, 2023),
  theta = lambda mean(f~) + mean(Y - lambda f), Var = s^2(Y - lambda f) / n + lambda^2 s^2(f) / N, s^2(f) over all
  n + N predictions.
- ``active_mean``: unequal known chances pi_i (active statistical inference, Zrnic and Candes 2024), as the Hajek
  difference estimator theta = lambda mean_N(f) + sum_S w (Y - lambda f) / sum_S w with w = 1 / pi.
- ``stratified_mean``: strata of the judges' verdicts, theta = sum_h W_h mean_h(Y) (stratified PPI with one
  stratum per band of the judges' score; no coefficient fitted on the labelled sample).

Small samples. Three things keep the intervals honest at n = 10-40 labels (``tests/analytics/core/
test_coverage_prd.py`` simulates them on the PRD human and judge data):
1. a degree of freedom for every coefficient fitted on the labelled items (the mean, and lambda when it is tuned),
   so tuning lambda on the sample it is judged on does not shrink the variance estimate by itself;
2. the finite-population correction only when the target is the study's own items;
3. ``bounded_interval``: scores are bounded, and a t or normal interval collapses to zero width when every label in
   a small sample is equal (13-15 % of draws of 10 on PRD's lopsided pairs) and under-covers when the labels are
   skewed. The interval adds z^2 fair-coin labels (variance 1/4 each) to the n labels: for 0/1 labels with the
   plug-in variance p(1 - p) / n it is Wilson's score interval (Brown, Cai and DasGupta 2001 recommend it over Wald
   and t at these n); the estimators use the unbiased variance (n - 1 degrees of freedom and more), a little
   wider. It always contains the estimate, never has zero width while any item is unlabelled, and leaves the
   estimate alone.

What a judge (or a design) is worth is each estimate's ``efficiency`` (``labels_worth``): the variance people alone
would have on a uniform sample of the same size over the estimate's -- for items like these, how many labels by
people alone one of its labels stands for (``MeanEstimate.labels_equivalent`` turns it into a number of labels for
either target). It is estimated from the same sample; the coverage suite checks that on real data it matches the
realised efficiency (the ratio of the estimates' mean squared errors) within 10 %.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import numpy.typing as npt
from scipy.stats import norm

from analytics.core import worth as worth_


@functools.lru_cache(maxsize=16)
def _z(alpha: float) -> float:
    """The normal quantile of a two-sided (1 - alpha) interval (cached: scipy's ppf costs more than the estimate)."""
    return float(norm.ppf(1 - alpha / 2))


ITEMS_LIKE_THESE = "items like these"
THESE_ITEMS = "these items"


@dataclasses.dataclass(frozen=True)
class MeanEstimate:
    estimate: float
    low: float
    high: float
    se: float  # the square root of the estimated variance of ``estimate`` (degrees of freedom counted)
    n_labelled: int
    n_unlabelled: int
    lam: float  # the judge's weight (0: people alone; NaN where the estimator fits none, e.g. stratified)
    target: str = ITEMS_LIKE_THESE  # ITEMS_LIKE_THESE or THESE_ITEMS
    # what this estimate is worth in labels by people alone on a uniform sample of the same size (1 for that
    # estimate itself): see ``labels_worth``
    efficiency: float = 1.0

    @property
    def width(self) -> float:
        return self.high - self.low

    @property
    def labels_equivalent(self) -> float:
        """How many labels by people alone on a uniform sample would give this estimate's precision: n x efficiency
        for items like these; for these N items, where a larger sample also shrinks the finite-population
        correction, the n' with (1/n' - 1/N) = (1/n - 1/N) / efficiency."""
        n = self.n_labelled
        if self.target != THESE_ITEMS or not self.n_unlabelled:
            return n * self.efficiency
        big_n = n + self.n_unlabelled
        if self.efficiency == float("inf"):
            return float(big_n)
        return 1.0 / ((1.0 / n - 1.0 / big_n) / self.efficiency + 1.0 / big_n)


def labels_worth(
    variance: float,
    reference_variance: float,
    n_labels: int,
    alpha: float = 0.05,
    finite_share: float = 1.0,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> float:
    """An estimate's efficiency against people alone on a uniform sample of the same size: the ratio of the
    squared half-widths of ``bounded_interval`` for the reference's variance and for the estimate's,

        (n^2 Var_ref + k / 4) / (n^2 Var + k / 4),    k = z^2 g     (variances on the [0, 1] scale)

    i.e. the variance ratio Var_ref / Var with the interval's z^2 fair-coin labels added to both, which keeps a
    small sample's noisy variance ratio from promising more than the labels deliver (the coverage suite checks
    the claim against the realised ratio of mean squared errors on real data). Var_ref is estimated from the same
    sample: the variance the labelled mean of a uniform sample of n would have. For items like these, one label is
    worth ``efficiency`` labels by people alone; for these items see ``MeanEstimate.labels_equivalent``."""
    span = bounds[1] - bounds[0]
    z = _z(alpha)
    k = z * z * finite_share
    n = float(n_labels)
    denominator = n * n * max(variance, 0.0) / span**2 + k / 4
    numerator = n * n * max(reference_variance, 0.0) / span**2 + k / 4
    if denominator == 0:
        return 1.0 if numerator == 0 else float("inf")
    return float(numerator / denominator)


def score_bounds(*values: npt.ArrayLike) -> tuple[float, float]:
    """The range the labels live in, when the caller does not say: [0, 1] (win rates, 1/2 a tie) when every label
    lies there, else the smallest range holding [0, 1] and every label (e.g. [-1, 1] for preferences coded -1 / 0 / 1
    once a -1 is seen). Only the labels count: a judge's scores may live on any scale. A caller that knows the range
    (the report: [0, 1]) passes ``bounds`` to the estimators instead."""
    low, high = 0.0, 1.0
    for v in values:
        v = np.asarray(v, dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size:
            low, high = min(low, float(v.min())), max(high, float(v.max()))
    return low, high


def bounded_interval(
    estimate: float,
    variance: float,
    n_labels: int,
    alpha: float = 0.05,
    finite_share: float = 1.0,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> tuple[float, float]:
    """The (1 - alpha) interval of a mean of scores in ``bounds`` from ``n_labels`` labels, its estimate and the
    estimate's variance: as if k = z^2 g fair-coin labels (each the middle of the range, variance a quarter of
    the range squared) joined the n labels, with g = ``finite_share`` (1 for items like these; 1 - n / N for the
    study's own N items, so a census is exact):

        centre = (n theta + k / 2) / (n + k),   half = z sqrt(n^2 Var + k / 4) / (n + k)     (on the [0, 1] scale)

    With 0/1 labels, the labelled mean and Var = p(1 - p) / n this is Wilson's score interval; with g < 1 its finite-
    population form. The interval always contains ``estimate`` (when it lies in ``bounds``) and is clipped to them."""
    low_bound, high_bound = bounds
    span = high_bound - low_bound
    if not span > 0:
        raise ValueError("the score range must have a positive width")
    if not 0.0 <= finite_share <= 1.0:
        raise ValueError("finite_share must lie in [0, 1]")
    z = _z(alpha)
    theta = (estimate - low_bound) / span
    var = max(float(variance), 0.0) / span**2
    n = float(n_labels)
    k = z * z * finite_share
    if n + k == 0:
        return estimate, estimate
    centre = (n * theta + k / 2) / (n + k)
    half = z * np.sqrt(n * n * var + k / 4) / (n + k)
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return low_bound + span * low, low_bound + span * high


def _finite(values: npt.NDArray[np.float64], name: str) -> None:
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite numbers")


def _estimate(
    estimate: float,
    variance: float,
    n: int,
    n_unlabelled: int,
    lam: float,
    alpha: float,
    finite_share: float,
    bounds: tuple[float, float],
    target: str,
    reference_variance: float | None = None,
    replicates: tuple[npt.NDArray[np.float64], ...] | None = None,
) -> MeanEstimate:
    low, high = bounded_interval(estimate, variance, n, alpha, finite_share, bounds)
    worth = (
        1.0
        if reference_variance is None
        else labels_worth(variance, reference_variance, n, alpha, finite_share, bounds)
    )
    if replicates is not None:  # a weighted or stratified design: claim one jackknife standard error below
        log_se = worth_.replicate_log_se(*replicates, n_labels=n - 1, z2=_z(alpha) ** 2, span=bounds[1] - bounds[0])
        worth = worth_.conservative_worth(worth, log_se)
    return MeanEstimate(
        float(estimate),
        float(low),
        float(high),
        float(np.sqrt(max(variance, 0.0))),
        int(n),
        int(n_unlabelled),
        float(lam),
        target,
        worth,
    )


def classical_mean(
    y: npt.ArrayLike, alpha: float = 0.05, population_size: int | None = None, bounds: tuple[float, float] | None = None
) -> MeanEstimate:
    """The people-only estimate: the mean of the n labels, Var = s^2 / n (s^2 with n - 1 degrees of freedom), for
    items like these; with ``population_size`` N (the labels a uniform sample of N items) for these items,
    Var = (1 - n / N) s^2 / n. Interval: ``bounded_interval`` (Wilson's for 0/1 labels, with s^2 in place of
    p(1 - p) -- n / (n - 1) times wider in the variance)."""
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    n = y.size
    if n < 2:
        raise ValueError("a mean with an interval needs at least two labelled items")
    _finite(y, "labels")
    bounds = score_bounds(y) if bounds is None else bounds
    share, target = 1.0, ITEMS_LIKE_THESE
    if population_size is not None:
        if population_size < n:
            raise ValueError("the population cannot be smaller than the labelled sample")
        share, target = 1.0 - n / population_size, THESE_ITEMS
    variance = share * float(np.var(y, ddof=1)) / n
    unlabelled = 0 if population_size is None else population_size - n
    return _estimate(float(y.mean()), variance, n, unlabelled, 0.0, alpha, share, bounds, target)


def power_tuned_lambda(y: npt.ArrayLike, f: npt.ArrayLike, f_unlabelled: npt.ArrayLike) -> float:
    """lambda_hat = Cov(Y, f) / ((1 + n/N) Var(f)), Var(f) over all n + N predictions, clipped to [0, 1] (PPI++'s
    variance-minimising weight for items like these)."""
    y, f, fu = (np.asarray(v, dtype=np.float64) for v in (y, f, f_unlabelled))
    n, big_n = y.size, fu.size
    variance = float(np.var(np.concatenate([f, fu]), ddof=1))
    if variance == 0.0 or big_n == 0 or n < 2:
        return 0.0  # a judge that says the same thing everywhere carries no information
    covariance = float(np.dot(y - y.mean(), f - f.mean()) / (n - 1))
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))


def ppi_mean(
    y: npt.ArrayLike,
    f: npt.ArrayLike,
    f_unlabelled: npt.ArrayLike,
    alpha: float = 0.05,
    lam: float | None = None,
    finite: bool = False,
    bounds: tuple[float, float] | None = None,
) -> MeanEstimate:
    """The prediction-powered mean of Y from n labelled items (labels ``y``, the judge's ``f``) and N items only the
    judge scored (``f_unlabelled``), the labelled ones a uniform sample; ``lam`` None: power-tuned.

    Items like these (PPI++): theta = lambda mean(f~) + mean(Y - lambda f),
        Var = s^2(Y - lambda f) / n + lambda^2 s^2(f) / N,
    s^2(f) over all n + N predictions (so one unlabelled item is enough), s^2(Y - lambda f) with one more degree
    of freedom taken when lambda is tuned on these labels. ``finite``: these n + N items, theta = lambda mean(f over
    all) + mean(Y - lambda f), Var = (1 - n / (n + N)) s^2(Y - lambda f) / n (the regression estimator), lambda
    tuned as Cov(Y, f) / Var(f). lambda = 0 is ``classical_mean`` exactly."""
    y, f, fu = (np.asarray(v, dtype=np.float64).reshape(-1) for v in (y, f, f_unlabelled))
    if y.shape != f.shape:
        raise ValueError("y and f must hold the same labelled items")
    n, big_n = y.size, fu.size
    if n < 2:
        raise ValueError("a mean with an interval needs at least two labelled items")
    for values, name in ((y, "labels"), (f, "the judge's scores"), (fu, "the judge's scores")):
        _finite(values, name)
    bounds = score_bounds(y) if bounds is None else bounds
    if big_n == 0:
        return classical_mean(y, alpha, population_size=n if finite else None, bounds=bounds)
    f_all = np.concatenate([f, fu])
    var_f = float(np.var(f_all, ddof=1))
    tuned = lam is None
    if lam is None and n < 3:
        lam = 0.0  # two labels leave no degree of freedom to tune the judge's weight on
    elif lam is None:
        if finite:
            covariance = float(np.dot(y - y.mean(), f - f.mean()) / (n - 1))
            lam = 0.0 if var_f == 0 else float(np.clip(covariance / var_f, 0.0, 1.0))
        else:
            lam = power_tuned_lambda(y, f, fu)
    lam = float(lam)
    rectifier = y - lam * f
    var_rectifier = float(np.var(rectifier, ddof=1 + (tuned and lam != 0.0)))
    if finite:
        share = 1.0 - n / (n + big_n)
        estimate = lam * float(f_all.mean()) + float(rectifier.mean())
        variance = share * var_rectifier / n
        target = THESE_ITEMS
    else:
        share = 1.0
        estimate = lam * float(fu.mean()) + float(rectifier.mean())
        variance = var_rectifier / n + lam**2 * var_f / big_n
        target = ITEMS_LIKE_THESE
    reference = share * float(np.var(y, ddof=1)) / n  # the labelled mean's
    return _estimate(estimate, variance, n, big_n, lam, alpha, share, bounds, target, reference)


def active_mean(
    y: npt.ArrayLike,
    f: npt.ArrayLike,
    pi: npt.ArrayLike,
    sampled: npt.ArrayLike,
    alpha: float = 0.05,
    lam: float | None = None,
    finite: bool = False,
    bounds: tuple[float, float] | None = None,
) -> MeanEstimate:
    """The mean of Y when people labelled a sample of N items drawn with known inclusion probabilities ``pi`` and a
    judge scored every item (active statistical inference, Zrnic and Candes 2024, with power tuning), as the Hajek
    difference estimator (w_i = 1 / pi_i, S the labelled items, e = Y - lambda f):

        theta  = lambda mean_N(f) + sum_S w e / sum_S w
        V_d    = n / (n - p) sum_S (1 - pi_i) w_i^2 (e_i - e_w)^2 / N^2          (the design variance)
        Var    = V_d + s_w^2(Y) / N     for items like these,     V_d for these N items (``finite``)

    with p the coefficients fitted on the labels (the weighted mean, and lambda when tuned) and s_w^2(Y) the
    weighted variance of the labels (n - 1 degrees of freedom). Unbiased (to order 1/n, as any ratio estimator) for
    any lambda and any f known before the draw; lambda tuned minimises V_d (the slope of Y on f with weights
    (1 - pi) w^2, clipped to [0, 1], its denominator taken over every item where f is known). With equal chances
    pi = n / N and lambda = 0 it is ``classical_mean`` exactly (for these items, with ``population_size`` N). V_d
    is the Poisson-sampling approximation; a fixed-size draw (``systematic_pps``) is a little less variable, so it
    is slightly conservative.

    ``y`` may hold anything (NaN) where ``sampled`` is False; ``pi`` must be in (0, 1] where it is True."""
    f, pi, y = (np.asarray(v, dtype=np.float64) for v in (f, pi, y))
    sampled = np.asarray(sampled, dtype=bool)
    if not (f.shape == pi.shape == sampled.shape == y.shape) or f.ndim != 1:
        raise ValueError("y, f, pi and sampled must be 1-D arrays over the same items")
    n, big_n = int(sampled.sum()), f.size
    if n < 2:
        raise ValueError("a mean with an interval needs at least two labelled items")
    if np.any(pi[sampled] <= 0) or np.any(pi > 1 + 1e-12) or np.isnan(y[sampled]).any():
        raise ValueError("every labelled item needs a label and an inclusion probability in (0, 1]")
    _finite(f, "the judge's scores")
    _finite(y[sampled], "labels")
    bounds = score_bounds(y[sampled]) if bounds is None else bounds
    ys, fs, ps = y[sampled], f[sampled], np.minimum(pi[sampled], 1.0)
    w = 1.0 / ps
    u = (1.0 - ps) * w * w
    y_w, f_w = float(np.sum(w * ys) / w.sum()), float(np.sum(w * fs) / w.sum())
    tuned = lam is None
    if lam is None and n < 3:
        lam = 0.0  # two labels leave no degree of freedom to tune the judge's weight on
    elif lam is None:
        # the slope's denominator, sum_S u (f - f_w)^2, has its expectation sum_N (1 - pi)/pi (f - f_bar)^2 over every
        # item (f is known everywhere), which is far steadier than the sample's at 10-20 labels (as PPI++ takes
        # Var(f) over all predictions): on PRD at n = 10 this lifted the worst pair's coverage from 0.916 to 0.934
        a = (1.0 - np.minimum(pi, 1.0)) / np.where(pi > 0, pi, 1.0)
        f_bar = float(np.sum(a * f) / a.sum()) if a.sum() > 0 else float(f.mean())
        spread = (n - 1) / n * float(np.sum(a * (f - f_bar) ** 2))
        lam = 0.0 if spread == 0 else float(np.clip(np.sum(u * (ys - y_w) * (fs - f_w)) / spread, 0.0, 1.0))
    lam = float(lam)
    p = 1 + (tuned and lam != 0.0)
    e = ys - lam * fs
    e_w = float(np.sum(w * e) / w.sum())
    estimate = lam * float(f.mean()) + e_w
    design = n / (n - p) * float(np.sum(u * (e - e_w) ** 2)) / big_n**2
    spread_y = n / (n - 1) * float(np.sum(w * (ys - y_w) ** 2) / w.sum())  # the population's variance of Y
    if finite:
        share, variance, target = 1.0 - n / big_n, design, THESE_ITEMS
    else:
        share, variance, target = 1.0, design + spread_y / big_n, ITEMS_LIKE_THESE
    replicates = worth_.weighted_replicates(ys, fs, ps, lam, p, big_n, finite)
    reference = share * spread_y / n
    return _estimate(estimate, variance, n, big_n - n, lam, alpha, share, bounds, target, reference, replicates)


def stratified_mean(
    y: npt.ArrayLike,
    strata: npt.ArrayLike,
    sampled: npt.ArrayLike,
    alpha: float = 0.05,
    finite: bool = False,
    bounds: tuple[float, float] | None = None,
) -> MeanEstimate:
    """The stratified mean over N items in strata (e.g. ``selection.core.sampling.judge_strata``: bands of the
    judges' score), people having labelled a uniform sample within each stratum (stratified sampling):

        theta = sum_h W_h mean_h(Y),   W_h = N_h / N
        V_d   = sum_h W_h^2 (1 - n_h / N_h) s_h^2 / n_h
        Var   = V_d + S^2 / N   for items like these (S^2 the items' variance, estimated from the strata: within
                                them plus between their means), V_d for these N items

    Stratified prediction-powered inference with the judges' score constant within a band: nothing is fitted on
    the labelled sample beyond the strata's means. Every stratum needs two labelled items (or all of its items)."""
    y = np.asarray(y, dtype=np.float64)
    strata = np.asarray(strata)
    sampled = np.asarray(sampled, dtype=bool)
    if not (y.shape == strata.shape == sampled.shape) or y.ndim != 1:
        raise ValueError("y, strata and sampled must be 1-D arrays over the same items")
    n, big_n = int(sampled.sum()), y.size
    if n < 2:
        raise ValueError("a mean with an interval needs at least two labelled items")
    if np.isnan(y[sampled]).any():
        raise ValueError("every labelled item needs a label")
    _finite(y[sampled], "labels")
    bounds = score_bounds(y[sampled]) if bounds is None else bounds
    sizes, counts, means, variances = [], [], [], []
    for h in np.unique(strata):
        members = strata == h
        size, labelled = int(members.sum()), members & sampled
        n_h = int(labelled.sum())
        if n_h < 2 and n_h < size:
            raise ValueError(f"stratum {h} has {n_h} labelled item(s) of {size}: every stratum needs at least two")
        values = y[labelled]
        sizes.append(size)
        counts.append(n_h)
        means.append(float(values.mean()))
        variances.append(float(np.var(values, ddof=1)) if n_h > 1 else 0.0)
    # the population's variance S^2 = (sum (N_h - 1) S_h^2 + sum N_h (mean_h - theta)^2) / (N - 1), the between
    # part corrected for the noise of the sample means (E sum W_h (m_h - theta)^2 = true between + sum W_h (1 - W_h)
    # Var(m_h)): ``worth.stratified_parts``, the one home of these formulas
    size_, count_, mean_, var_ = (np.array(v, dtype=np.float64) for v in (sizes, counts, means, variances))
    estimate = float(np.sum(size_ / big_n * mean_))
    parts = worth_.stratified_parts(size_, count_, mean_, var_, big_n, n, finite)
    variance, reference, share = (float(v) for v in parts)
    target = THESE_ITEMS if finite else ITEMS_LIKE_THESE
    jackknife = worth_.stratified_replicates(y, strata, sampled, finite)
    return _estimate(estimate, variance, n, big_n - n, float("nan"), alpha, share, bounds, target, reference, jackknife)


# --------------------------------------------------------------------------------------------------------------
# Bradley-Terry strengths (logistic M-estimation, PPI++ section 3 / Algorithm 2).
#
# A battle of systems a and b is a row x = e_a - e_b (system 0's column dropped: its strength is 0), its label
# the score of a (1 a win, 1/2 a tie, 0 a loss; fractional labels are fine for the cross-entropy loss
# l_theta(x, y) = -y x.theta + log(1 + exp(x.theta))). With n labelled battles (Y: the humans' score, f: the
# judge's on the same battle) and N battles the judge alone scored (f~):
#
#     theta_lambda = argmin (1/n) sum l(x, Y) + lambda [ (1/N) sum l(x~, f~) - (1/n) sum l(x, f) ]
#     Sigma        = H^-1 ( (n/N) Cov(lambda g~_f) + Cov(g_Y - lambda g_f) ) H^-1,      se = sqrt(diag Sigma / n)
#     lambda_hat   = tr(H^-1 C H^-1) / (2 (1 + n/N) tr(H^-1 V_f H^-1)),  clipped to [0, 1]
#
# with g the per-battle gradients x (sigma(x.theta) - label), C = (1/n)(G_Y'G_f + G_f'G_Y) on centred gradients,
# V_f the covariance of the judge's gradients on all n + N battles, and H the Hessian of the loss over all
# battles (the labelled ones alone when lambda = 0). These are the published formulas the ppi-python package
# implements; it is not used because its logistic fit starts from scikit-learn's LogisticRegression, which
# refuses fractional labels (a tie is 1/2 here), and it pulls numba, pandas, statsmodels and gdown.


@dataclasses.dataclass(frozen=True)
class StrengthEstimate:
    theta: npt.NDArray[np.float64]  # log-odds strengths, system 0 = 0
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]
    se: npt.NDArray[np.float64]
    n_labelled: int
    n_unlabelled: int
    lam: float


MAX_LOG_ODDS = 20.0  # beyond this a fit has run off to infinity (odds of 5e8 to 1)


def battle_design(a: npt.ArrayLike, b: npt.ArrayLike, n_systems: int) -> npt.NDArray[np.float64]:
    """Rows e_a - e_b without system 0's column."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    x = np.zeros((len(a), n_systems))
    rows = np.arange(len(a))
    x[rows, a] += 1.0
    x[rows, b] -= 1.0
    return x[:, 1:]


def _sigmoid(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _log1pexp(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return np.logaddexp(0.0, z)


def _rectified_fit(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    f: npt.NDArray[np.float64],
    xu: npt.NDArray[np.float64],
    fu: npt.NDArray[np.float64],
    lam: float,
    start: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    from scipy.optimize import minimize

    n, big_n = len(y), len(fu)

    def loss_and_grad(theta: npt.NDArray[np.float64]) -> tuple[float, npt.NDArray[np.float64]]:
        z, zu = x @ theta, xu @ theta
        loss = np.mean(-y * z + _log1pexp(z))
        grad = x.T @ (_sigmoid(z) - y) / n
        if lam:
            loss += lam * (np.mean(-fu * zu + _log1pexp(zu)) - np.mean(-f * z + _log1pexp(z)))
            grad += lam * (xu.T @ (_sigmoid(zu) - fu) / big_n - x.T @ (_sigmoid(z) - f) / n)
        return float(loss), grad

    result = minimize(loss_and_grad, start, jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "maxiter": 500})
    theta: npt.NDArray[np.float64] = result.x
    return theta


def _stats(
    theta: npt.NDArray[np.float64],
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    f: npt.NDArray[np.float64],
    xu: npt.NDArray[np.float64],
    fu: npt.NDArray[np.float64],
    use_unlabelled: bool,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.floating]]:
    mu, muu = _sigmoid(x @ theta), _sigmoid(xu @ theta)
    if use_unlabelled:
        hessian = ((x * (mu * (1 - mu))[:, None]).T @ x + (xu * (muu * (1 - muu))[:, None]).T @ xu) / (len(y) + len(fu))
    else:
        hessian = (x * (mu * (1 - mu))[:, None]).T @ x / len(y)
    g_y = x * (mu - y)[:, None]
    g_f = x * (mu - f)[:, None]
    g_fu = xu * (muu - fu)[:, None]
    return g_y, g_f, g_fu, np.linalg.inv(hessian)


def _tuned_lambda(
    g_y: npt.NDArray[np.float64],
    g_f: npt.NDArray[np.float64],
    g_fu: npt.NDArray[np.float64],
    inv_h: npt.NDArray[np.floating],
) -> float:
    n, big_n = len(g_y), len(g_fu)
    cy, cf = g_y - g_y.mean(axis=0), g_f - g_f.mean(axis=0)
    cov = (cy.T @ cf + cf.T @ cy) / n
    var_f = np.atleast_2d(np.cov(np.concatenate([g_f, g_fu]).T))
    denominator = 2 * (1 + n / big_n) * np.trace(inv_h @ var_f @ inv_h)
    if denominator <= 0:
        return 0.0
    return float(np.clip(np.trace(inv_h @ cov @ inv_h) / denominator, 0.0, 1.0))


def ppi_bradley_terry(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    y: npt.ArrayLike,
    f: npt.ArrayLike,
    a_unlabelled: npt.ArrayLike,
    b_unlabelled: npt.ArrayLike,
    f_unlabelled: npt.ArrayLike,
    n_systems: int,
    alpha: float = 0.05,
    lam: float | None = None,
) -> StrengthEstimate:
    """Bradley-Terry log-odds strengths from n labelled battles (systems ``a`` vs ``b``, human score ``y`` for a,
    the judge's ``f``) and N battles only the judge scored, with power tuning (``lam=None``) or a fixed lambda
    (0: the humans alone). Raises ValueError when the labelled battles do not connect every system."""
    x = battle_design(a, b, n_systems)
    xu = battle_design(a_unlabelled, b_unlabelled, n_systems)
    y, f, fu = (np.asarray(v, dtype=np.float64) for v in (y, f, f_unlabelled))
    n, big_n = len(y), len(fu)
    if n < 2 or big_n < 1:
        raise ValueError("need at least two labelled battles and one scored by the judge alone")
    if np.linalg.matrix_rank(x) < n_systems - 1:
        raise ValueError("the labelled battles do not connect every system")
    classical = _rectified_fit(x, y, f, xu, fu, 0.0, np.zeros(n_systems - 1))
    if lam is None:
        # the gradients for lambda are taken at the humans' fit (consistent, and finite whenever any fit is;
        # the package takes them at the lambda = 1 fit, which small samples can push to infinity)
        lam = _tuned_lambda(*_stats(classical, x, y, f, xu, fu, True))
    theta = classical if lam == 0 else _rectified_fit(x, y, f, xu, fu, lam, classical)
    if not np.all(np.isfinite(theta)) or np.max(np.abs(theta), initial=0.0) > MAX_LOG_ODDS:
        raise ValueError(f"no finite strengths at lambda = {lam:.2f}: a system wins or loses every battle")
    g_y, g_f, g_fu, inv_h = _stats(theta, x, y, f, xu, fu, lam != 0)
    d = n_systems - 1
    var_u = np.atleast_2d(np.cov((lam * g_fu).T)).reshape(d, d) if big_n > 1 else np.zeros((d, d))
    var = np.atleast_2d(np.cov((g_y - lam * g_f).T)).reshape(d, d)
    sigma = inv_h @ (n / big_n * var_u + var) @ inv_h
    se = np.sqrt(np.clip(np.diag(sigma), 0, None) / n)
    z = norm.ppf(1 - alpha / 2)
    full = np.concatenate([[0.0], theta])
    se_full = np.concatenate([[0.0], se])
    return StrengthEstimate(full, full - z * se_full, full + z * se_full, se_full, n, big_n, float(lam))
