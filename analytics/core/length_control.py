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
covariance clustered by item (several raters of one item are not independent), with Student's t on the items'
degrees of freedom, mapped through sigma -- its
coverage is checked by simulation on PRD's real answer lengths (tests/analytics/core/test_length_control.py).

Pure: numpy in, numpy out.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt
from scipy.special import expit
from scipy.stats import t

MIN_ITEMS = 20  # fewer items of a pair: no estimate (its interval covers 0.93 at 20 items on PRD, less below)
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
    hessian = (x * (p * (1 - p))[:, None]).T @ x
    scores = x * (y - p)[:, None]
    per_group = np.zeros((n_groups, k))
    np.add.at(per_group, groups, scores)
    meat = per_group.T @ per_group * n_groups / (n_groups - 1)
    inverse = np.linalg.inv(hessian)
    se = float(np.sqrt((inverse @ meat @ inverse)[0, 0]))
    half = t.ppf(0.5 + level / 2, n_groups - k) * se  # Student's t on the items' degrees of freedom
    return LengthControlled(
        win_rate=float(y.mean()),
        estimate=float(expit(beta[0])),
        low=float(expit(beta[0] - half)),
        high=float(expit(beta[0] + half)),
        length_coefficient=float(beta[1]) if k == 2 else 0.0,
        battles=n,
        items=int(n_groups),
    )
