"""Style control's loss and gradient in one compiled pass over the battles (``ratings.contextual_bradley_terry``).

Why numba: at 10^6 battles the numpy form of the penalised mean loss and its gradient makes about ten passes over
the battles per evaluation (0.09 s; L-BFGS evaluates it ~30 times), against one pass compiled (bench/README.md,
"Leaderboards against arena-rank"). Kept apart, as elo_loops, so that importing analytics.core.ratings does not load
numba. Compiled functions are cached in __pycache__, so only the first run on a machine compiles them.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def loss_and_gradient(params: np.ndarray, a: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray,
                      w: np.ndarray, n_systems: int, reg: float) -> tuple[float, np.ndarray]:
    """-mean(w * (y * logit - softplus(logit))) + 0.5 * reg * |gamma|^2 and its gradient, where
    logit = theta[a] - theta[b] + x . gamma and params = (theta, gamma)."""
    n, k = x.shape
    total = 0.0
    gradient = np.zeros(params.shape[0])
    for t in range(n):
        i, j = a[t], b[t]
        z = params[i] - params[j]
        for f in range(k):
            z += x[t, f] * params[n_systems + f]
        if z > 0.0:
            e = math.exp(-z)
            softplus = z + math.log1p(e)
            p = 1.0 / (1.0 + e)
        else:
            e = math.exp(z)
            softplus = math.log1p(e)
            p = e / (1.0 + e)
        total -= w[t] * (y[t] * z - softplus)
        r = w[t] * (p - y[t])
        gradient[i] += r
        gradient[j] -= r
        for f in range(k):
            gradient[n_systems + f] += r * x[t, f]
    penalty = 0.0
    for f in range(k):
        g = params[n_systems + f]
        penalty += g * g
    gradient /= n
    for f in range(k):
        gradient[n_systems + f] += reg * params[n_systems + f]
    return total / n + 0.5 * reg * penalty, gradient
