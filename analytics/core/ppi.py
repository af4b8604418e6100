"""Prediction-powered inference for a mean, with power tuning (PPI++; Angelopoulos, Duchi and Zrnic, 2023):
one estimate from n human-labelled items and a judge's predictions on N more.

    lambda_hat = Cov(Y, f) / ((1 + n / N) Var(f))          (clipped to [0, 1])
    theta_hat  = mean(lambda f~) + mean(Y - lambda f)
    Var        = lambda^2 Var(f~) / N + Var(Y - lambda f) / n

Y: human labels on the labelled items; f: the judge on those same items; f~: the judge on the N unlabelled
items. lambda = 0 is the human-only (classical) estimate, lambda = 1 plain PPI; the tuned lambda minimises
the estimate's variance, so asymptotically it is never worse than human-only. Numpy in, numpy out.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.stats import norm


@dataclasses.dataclass(frozen=True)
class MeanEstimate:
    estimate: float
    low: float
    high: float
    se: float
    n_labelled: int
    n_unlabelled: int
    lam: float  # the power-tuning weight (0: human-only)

    @property
    def width(self) -> float:
        return self.high - self.low


def classical_mean(y, alpha: float = 0.05) -> MeanEstimate:
    """The human-only estimate: the labelled mean with its normal interval."""
    y = np.asarray(y, dtype=np.float64)
    n = y.size
    if n < 2:
        raise ValueError("a mean with an interval needs at least two labelled items")
    se = float(np.std(y, ddof=1) / np.sqrt(n))
    z = norm.ppf(1 - alpha / 2)
    mean = float(y.mean())
    return MeanEstimate(mean, mean - z * se, mean + z * se, se, n, 0, 0.0)


def power_tuned_lambda(y, f, f_unlabelled) -> float:
    """lambda_hat = Cov(Y, f) / ((1 + n/N) Var(f)), Var(f) over all n + N predictions, clipped to [0, 1]."""
    y, f, fu = (np.asarray(v, dtype=np.float64) for v in (y, f, f_unlabelled))
    n, big_n = y.size, fu.size
    variance = float(np.var(np.concatenate([f, fu]), ddof=1))
    if variance == 0.0 or big_n == 0:
        return 0.0  # a judge that says the same thing everywhere carries no information
    covariance = float(np.cov(y, f, ddof=1)[0, 1])
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))


def ppi_mean(y, f, f_unlabelled, alpha: float = 0.05, lam: float | None = None) -> MeanEstimate:
    """The prediction-powered mean of Y with its (1 - alpha) normal interval; ``lam`` None: power-tuned."""
    y, f, fu = (np.asarray(v, dtype=np.float64) for v in (y, f, f_unlabelled))
    if y.shape != f.shape:
        raise ValueError("y and f must hold the same labelled items")
    n, big_n = y.size, fu.size
    if n < 2:
        raise ValueError("a mean with an interval needs at least two labelled items")
    lam = power_tuned_lambda(y, f, fu) if lam is None else float(lam)
    rectifier = y - lam * f
    estimate = float((lam * fu.mean() if big_n else 0.0) + rectifier.mean())
    variance = float(np.var(rectifier, ddof=1) / n)
    if big_n > 1:
        variance += lam**2 * float(np.var(fu, ddof=1)) / big_n
    se = float(np.sqrt(variance))
    z = norm.ppf(1 - alpha / 2)
    return MeanEstimate(estimate, estimate - z * se, estimate + z * se, se, n, big_n, lam)


def active_mean(y, f, pi, sampled, alpha: float = 0.05, lam: float | None = None) -> MeanEstimate:
    """The mean of Y over N items when people labelled a sample drawn with known inclusion probabilities and a judge
    scored every item (active statistical inference, Zrnic and Candes 2024, with power tuning), as a difference
    estimator with two control variates, the judge's score and a constant:

        w_i        = xi_i / pi_i                                    (xi_i = 1 if item i was labelled)
        z_i        = lam f_i + mu + w_i (Y_i - lam f_i - mu)
        theta_hat  = mean(z),   se = sd(z) / sqrt(N)
        (lam, mu)  minimise Var(z) (least squares of A = w Y on B = f (1 - w) and C = 1 - w; lam clipped to [0, 1])

    Unbiased for any fixed (lam, mu) and f because E[w] = 1 (f can be anything known before the draw: an item no
    judge scored takes 1/2); tuned on the same data, as in PPI++, the bias is of order 1/n. lam = 0 is the people
    alone (the constant centres the weighted labels, which keeps it as narrow as the plain mean of a uniform sample;
    with mu = 0 it would be the much wider Horvitz-Thompson estimate), and the tuned lam minimises the variance, so
    adding the judge is never worse (asymptotically). With pi = n / N everywhere and lam = 0 it is the labelled
    mean. The interval treats the draw as independent per item (Poisson sampling); a fixed-size draw
    (``systematic_pps``) is a little less variable, so the interval is conservative.

    ``y`` may hold anything (NaN) where ``sampled`` is False; ``pi`` must be positive where it is True."""
    f, pi, y = (np.asarray(v, dtype=np.float64) for v in (f, pi, y))
    sampled = np.asarray(sampled, dtype=bool)
    if not (f.shape == pi.shape == sampled.shape == y.shape) or f.ndim != 1:
        raise ValueError("y, f, pi and sampled must be 1-D arrays over the same items")
    y = np.where(sampled, y, 0.0)
    n, big_n = int(sampled.sum()), f.size
    if n < 2:
        raise ValueError("a mean with an interval needs at least two labelled items")
    if np.any(pi[sampled] <= 0) or np.any(pi > 1 + 1e-12) or np.isnan(y[sampled]).any():
        raise ValueError("every labelled item needs a label and an inclusion probability in (0, 1]")
    w = np.where(sampled, 1.0 / np.where(sampled, pi, 1.0), 0.0)
    a, b, c = w * y, f * (1.0 - w), 1.0 - w
    if lam is None:
        controls = np.column_stack([b - b.mean(), c - c.mean()])
        coefficients = np.linalg.lstsq(controls, -(a - a.mean()), rcond=None)[0]
        lam = float(np.clip(coefficients[0], 0.0, 1.0))
    lam = float(lam)
    target = a + lam * b
    var_c = float(np.var(c, ddof=1))
    mu = 0.0 if var_c == 0.0 else float(-np.cov(target, c, ddof=1)[0, 1] / var_c)
    z = target + mu * c
    estimate = float(z.mean())
    se = float(np.std(z, ddof=1) / np.sqrt(big_n))
    half = norm.ppf(1 - alpha / 2) * se
    return MeanEstimate(estimate, estimate - half, estimate + half, se, n, big_n - n, lam)


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
    theta: np.ndarray  # log-odds strengths, system 0 = 0
    low: np.ndarray
    high: np.ndarray
    se: np.ndarray
    n_labelled: int
    n_unlabelled: int
    lam: float


MAX_LOG_ODDS = 20.0  # beyond this a fit has run off to infinity (odds of 5e8 to 1)


def battle_design(a, b, n_systems: int) -> np.ndarray:
    """Rows e_a - e_b without system 0's column."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    x = np.zeros((len(a), n_systems))
    rows = np.arange(len(a))
    x[rows, a] += 1.0
    x[rows, b] -= 1.0
    return x[:, 1:]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _log1pexp(z: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, z)


def _rectified_fit(x, y, f, xu, fu, lam: float, start: np.ndarray) -> np.ndarray:
    from scipy.optimize import minimize

    n, big_n = len(y), len(fu)

    def loss_and_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z, zu = x @ theta, xu @ theta
        loss = np.mean(-y * z + _log1pexp(z))
        grad = x.T @ (_sigmoid(z) - y) / n
        if lam:
            loss += lam * (np.mean(-fu * zu + _log1pexp(zu)) - np.mean(-f * z + _log1pexp(z)))
            grad += lam * (xu.T @ (_sigmoid(zu) - fu) / big_n - x.T @ (_sigmoid(z) - f) / n)
        return float(loss), grad

    return minimize(loss_and_grad, start, jac=True, method="L-BFGS-B", options={"gtol": 1e-10, "maxiter": 500}).x


def _stats(theta, x, y, f, xu, fu, use_unlabelled: bool):
    mu, muu = _sigmoid(x @ theta), _sigmoid(xu @ theta)
    if use_unlabelled:
        hessian = ((x * (mu * (1 - mu))[:, None]).T @ x + (xu * (muu * (1 - muu))[:, None]).T @ xu) / (len(y) + len(fu))
    else:
        hessian = (x * (mu * (1 - mu))[:, None]).T @ x / len(y)
    g_y = x * (mu - y)[:, None]
    g_f = x * (mu - f)[:, None]
    g_fu = xu * (muu - fu)[:, None]
    return g_y, g_f, g_fu, np.linalg.inv(hessian)


def _tuned_lambda(g_y, g_f, g_fu, inv_h) -> float:
    n, big_n = len(g_y), len(g_fu)
    cy, cf = g_y - g_y.mean(axis=0), g_f - g_f.mean(axis=0)
    cov = (cy.T @ cf + cf.T @ cy) / n
    var_f = np.atleast_2d(np.cov(np.concatenate([g_f, g_fu]).T))
    denominator = 2 * (1 + n / big_n) * np.trace(inv_h @ var_f @ inv_h)
    if denominator <= 0:
        return 0.0
    return float(np.clip(np.trace(inv_h @ cov @ inv_h) / denominator, 0.0, 1.0))


def ppi_bradley_terry(a, b, y, f, a_unlabelled, b_unlabelled, f_unlabelled, n_systems: int, alpha: float = 0.05,
                      lam: float | None = None) -> StrengthEstimate:
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
