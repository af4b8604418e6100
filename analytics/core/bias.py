"""Positional bias (docs/comparative-assessment.md#positional-bias; Liusie et al., "LLM comparative assessment").

P(first shown chosen) over non-tie judgments, with an exact binomial test against 0.5 and a
Clopper-Pearson interval; for judges that return probabilities, the debiasing threshold that makes
the first-shown option win half of a symmetric comparison set.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt
from scipy.stats import binomtest


@dataclasses.dataclass(frozen=True)
class PositionalBias:
    n: int  # non-tie judgments
    first_chosen: int
    rate: float  # P(first shown chosen); 0.5 means unbiased
    low: float
    high: float
    p_value: float


def positional_bias(first_chosen: npt.ArrayLike, confidence: float = 0.95) -> PositionalBias:
    """``first_chosen``: booleans, one per non-tie judgment (True when the first-shown output won)."""
    x = np.asarray(first_chosen, dtype=bool)
    n, k = int(x.size), int(x.sum())
    if n == 0:
        return PositionalBias(0, 0, float("nan"), float("nan"), float("nan"), float("nan"))
    test = binomtest(k, n, 0.5)
    ci = test.proportion_ci(confidence_level=confidence, method="exact")
    return PositionalBias(n, k, k / n, float(ci.low), float(ci.high), float(test.pvalue))


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
