"""Style control's loss, gradient and Hessian in one compiled pass over the battles
(``ratings.contextual_bradley_terry``).

Why numba: at 10^6 battles the numpy form of the penalised mean loss, its gradient and its Hessian makes about
twenty passes over the battles per Newton step, against one pass compiled (bench/README.md, "Leaderboards against
arena-rank"). Kept apart, as elo_loops, so that importing analytics.core.ratings does not load
numba. Compiled functions are cached in __pycache__, so only the first run on a machine compiles them.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt


@numba.njit(cache=True, nogil=True)
def loss_and_gradient(
    params: npt.NDArray[np.float64],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    n_systems: int,
    reg: float,
    hessian: npt.NDArray[np.float64],
) -> tuple[float, npt.NDArray[np.float64]]:
    """-mean(w * (y * logit - softplus(logit))) + 0.5 * reg * |gamma|^2 and its gradient, where
    logit = theta[a] - theta[b] + x . gamma and params = (theta, gamma); and, when ``hessian`` is a square matrix
    of params' size rather than empty, the Hessian of the mean loss without the penalty, written into it."""
    n, k = x.shape
    total = 0.0
    gradient = np.zeros(params.shape[0])
    second = hessian.shape[0] > 0
    if second:
        hessian[:, :] = 0.0
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
        if second:
            v = w[t] * p * (1.0 - p)
            hessian[i, i] += v
            hessian[j, j] += v
            hessian[i, j] -= v
            hessian[j, i] -= v
            for f in range(k):
                vf = v * x[t, f]
                hessian[i, n_systems + f] += vf
                hessian[j, n_systems + f] -= vf
                for g in range(f + 1):
                    hessian[n_systems + f, n_systems + g] += vf * x[t, g]
    if second:
        for f in range(k):
            for g in range(f + 1):
                hessian[n_systems + g, n_systems + f] = hessian[n_systems + f, n_systems + g]
            for i in range(n_systems):
                hessian[n_systems + f, i] = hessian[i, n_systems + f]
        hessian /= n
    penalty = 0.0
    for f in range(k):
        g = params[n_systems + f]
        penalty += g * g
    gradient /= n
    for f in range(k):
        gradient[n_systems + f] += reg * params[n_systems + f]
    return total / n + 0.5 * reg * penalty, gradient
