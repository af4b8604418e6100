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
