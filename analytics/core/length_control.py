"""Length-controlled win rates (AlpacaEval 2's GLM, Dubois et al. 2024) for one system pair
(docs/ratings.md#length-controlled-win-rates).

AlpacaEval 2 models the probability that system A's answer is preferred to system B's on item i as

    logit p_i = theta + phi * tanh(d_i / sd(d)),    d_i = len(A's answer) - len(B's answer) in characters

(its "length_controlled_minimal" formula: the pair's own judgments carry no instruction-difficulty table or gamed
baselines, which AlpacaEval fits on its own 805 instructions), fitted to the judgments as soft labels (A won 1,
tie 0.5, B won 0), and reports the win rate the model predicts with the length term set to 0: here sigma(theta).
The target is therefore stated: *the win rate of A over B if both answers had the same length*, under the model.

AlpacaEval fits the GLM with an L1 penalty chosen by 5-fold cross-validation and gives no interval for this
variant (its standard error of the predictions is 0 when they are all sigma(theta)). Here the two parameters are
fitted by maximum likelihood (Newton's method), and the interval is a Wald interval on theta from the sandwich
covariance clustered by item (several raters of one item are not independent) with the small-sample correction CR2
(Bell & McCaffrey 2002) and Student's t on Satterthwaite's degrees of freedom (Pustejovsky & Tipton 2018), mapped
through sigma. The plain clustered sandwich with t on G - 2 degrees of freedom covered 0.93 pooled at 20 items on PRD
but 0.83-0.89 on its hardest pairs; with CR2 and Satterthwaite's df every pair covers 0.94 or more
(tests/analytics/core/test_length_control.py, items resampled whole). statsmodels, which is not installed, offers
neither (only the CR1 factor).

Pure: numpy in, numpy out.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt
from scipy.special import expit
from scipy.stats import t

MIN_ITEMS = 20  # fewer items of a pair: no estimate (at 20 items on PRD its worst pair covers 0.94)
MIN_LENGTH_SPREAD = 0.05  # the length term's spread below which it is (nearly) the same for every judgment
MAX_LOGIT = 8.0  # |theta| or |phi| beyond this: the fit ran away (one side won everything), no finite estimate


@dataclasses.dataclass(frozen=True)
class LengthControlled:
    win_rate: float  # the plain win rate of A (ties as half)
    estimate: float  # sigma(theta): A's win rate at equal length
    low: float
    high: float
    length_coefficient: float  # phi: log-odds per unit of tanh(standardised length difference); > 0 favours longer
    battles: int
    items: int


class NoEstimate(ValueError):
    """Why a pair gets no length-controlled win rate (too few judgments, one side won them all, no length data)."""


def length_controlled_win_rate(
    score: npt.ArrayLike,
    length_a: npt.ArrayLike,
    length_b: npt.ArrayLike,
    clusters: npt.ArrayLike | None = None,
    level: float = 0.95,
) -> LengthControlled:
    """The length-controlled win rate of A over B from each judgment's ``score`` for A (1, 0.5, 0) and the lengths
    of the two answers it compared; ``clusters`` (e.g. item ids) groups judgments that are not independent."""
    y = np.asarray(score, dtype=np.float64)
    d = np.asarray(length_a, dtype=np.float64) - np.asarray(length_b, dtype=np.float64)
    n = len(y)
    groups = np.arange(n) if clusters is None else np.unique(np.asarray(clusters), return_inverse=True)[1]
    n_groups = int(groups.max()) + 1 if n else 0
    if n_groups < MIN_ITEMS:
        raise NoEstimate(f"fewer than {MIN_ITEMS} items judged")
    spread = d.std(ddof=1)
    x = np.column_stack([np.ones(n), np.tanh(d / spread) if spread > 0 else np.zeros(n)])
    if spread > 0 and x[:, 1].std() < MIN_LENGTH_SPREAD:
        raise NoEstimate(
            "one system's answers are longer than the other's nearly every time: length cannot be told "
            "apart from the systems"
        )
    k = 2 if spread > 0 else 1
    x = x[:, :k]
    beta = np.zeros(k)
    for _ in range(100):
        p = expit(x @ beta)
        gradient = x.T @ (y - p)
        hessian = (x * (p * (1 - p))[:, None]).T @ x
        try:
            step = np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError as exc:
            raise NoEstimate("the model cannot be fitted to these judgments") from exc
        beta = beta + step
        if np.abs(beta).max() > MAX_LOGIT:
            raise NoEstimate("one system won (nearly) every comparison: no finite estimate")
        if np.abs(step).max() < 1e-10:
            break
    p = expit(x @ beta)
    curvature = p * (1 - p)
    inverse = np.linalg.inv((x * curvature[:, None]).T @ x)
    root = np.sqrt(curvature)  # the weighted regression of the last Newton step: W^1/2 X and W^-1/2 (y - p)
    variance, df = cr2_variance(x * root[:, None], (y - p) / root, groups, inverse, np.eye(k)[0])
    half = t.ppf(0.5 + level / 2, df) * float(np.sqrt(variance))  # Student's t on Satterthwaite's df
    return LengthControlled(
        win_rate=float(y.mean()),
        estimate=float(expit(beta[0])),
        low=float(expit(beta[0] - half)),
        high=float(expit(beta[0] + half)),
        length_coefficient=float(beta[1]) if k == 2 else 0.0,
        battles=n,
        items=int(n_groups),
    )


def cr2_variance(
    x: npt.NDArray[np.float64],
    residual: npt.NDArray[np.float64],
    groups: npt.NDArray[np.integer],
    bread: npt.NDArray[np.float64],
    contrast: npt.NDArray[np.float64],
) -> tuple[float, float]:
    """The bias-reduced cluster-robust ("CR2", Bell & McCaffrey 2002) variance of c^T beta and its Satterthwaite
    degrees of freedom under a working model of independent errors, as Pustejovsky & Tipton (2018) define them
    (their Eq. 5 and §3.1; Imbens & Kolesar 2016 derive the same degrees of freedom). For a GLM the regression is
    the weighted one of its last Newton step, as clubSandwich's ``vcovCR`` takes it.

    ``x`` (n, k): the weighted design W^1/2 X; ``residual`` (n,): the weighted working residuals W^-1/2 (y - p);
    ``groups`` (n,): cluster numbers; ``bread`` (k, k): M = (X^T W X)^-1; ``contrast`` (k,): c. With H = x M x^T and
    per cluster A_g = (I - H_gg)^-1/2 (a pseudo-inverse root where I - H_gg is singular),

        V = c^T M (sum_g X_g^T A_g e_g e_g^T A_g X_g) M c,
        df = (sum lambda)^2 / sum lambda^2,   lambda the eigenvalues of G^T G,  G's columns (I - H)_g^T A_g X_g M c,

    where G^T G = diag(|v_g|^2) - Z M Z^T with v_g = A_g X_g M c and Z's rows z_g = X_g^T v_g, so neither the
    (n, n) hat matrix nor G is formed. Returns (V, df)."""
    n, k = x.shape
    order = np.argsort(groups, kind="stable")
    ordered = groups[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    sizes = np.diff(np.r_[starts, n])
    scores = np.zeros((len(starts), k))  # each cluster's adjusted score X_g^T A_g e_g
    v_squared = np.zeros(len(starts))  # |A_g X_g M c|^2
    z = np.zeros((len(starts), k))  # X_g^T A_g X_g M c
    direction = bread @ contrast
    for size in np.unique(sizes):
        which = np.flatnonzero(sizes == size)
        index = order[starts[which][:, None] + np.arange(size)[None, :]]  # (m, size): the clusters of this size
        xg, eg = x[index], residual[index]
        leverage = np.einsum("msk,kl,mtl->mst", xg, bread, xg)
        values, vectors = np.linalg.eigh(np.eye(size) - leverage)
        root = np.where(values > 1e-12, 1 / np.sqrt(np.clip(values, 1e-12, None)), 0.0)
        adjust = np.einsum("msi,mi,mti->mst", vectors, root, vectors)  # A_g = (I - H_gg)^(-1/2)
        scores[which] = np.einsum("msk,ms->mk", xg, np.einsum("mst,mt->ms", adjust, eg))
        v = np.einsum("mst,mtk,k->ms", adjust, xg, direction)
        v_squared[which] = (v * v).sum(axis=1)
        z[which] = np.einsum("msk,ms->mk", xg, v)
    spread = direction @ scores.T
    variance = float(spread @ spread)
    zmz = z @ bread @ z.T  # G^T G = diag(|v_g|^2) - Z M Z^T
    trace = v_squared.sum() - np.trace(zmz)
    trace_squared = (v_squared**2).sum() - 2 * (v_squared * np.diag(zmz)).sum() + (zmz * zmz).sum()
    return variance, float(trace**2 / trace_squared)
