"""Positional bias (SPEC §7; Liusie et al., "LLM comparative assessment").

P(first shown chosen) over non-tie judgments, with an exact binomial test against 0.5 and a
Clopper-Pearson interval; for judges that return probabilities, the debiasing threshold that makes
the first-shown option win half of a symmetric comparison set.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.stats import binomtest


@dataclasses.dataclass(frozen=True)
class PositionalBias:
    n: int  # non-tie judgments
    first_chosen: int
    rate: float  # P(first shown chosen); 0.5 means unbiased
    low: float
    high: float
    p_value: float


def positional_bias(first_chosen: np.ndarray, confidence: float = 0.95) -> PositionalBias:
    """``first_chosen``: booleans, one per non-tie judgment (True when the first-shown output won)."""
    x = np.asarray(first_chosen, dtype=bool)
    n, k = int(x.size), int(x.sum())
    if n == 0:
        return PositionalBias(0, 0, float("nan"), float("nan"), float("nan"), float("nan"))
    test = binomtest(k, n, 0.5)
    ci = test.proportion_ci(confidence_level=confidence, method="exact")
    return PositionalBias(n, k, k / n, float(ci.low), float(ci.high), float(test.pvalue))


def debias_threshold(prob_first: np.ndarray) -> float:
    """tau such that deciding "first" when P(first) > tau picks the first-shown output in half of the
    comparisons: the median of P(first) over a symmetric set (each pair in both orders). Equivalent
    to the alpha reweighting of Eq. 9-10."""
    p = np.asarray(prob_first, dtype=np.float64)
    return float(np.median(p)) if p.size else float("nan")


@dataclasses.dataclass(frozen=True)
class Debiasing:
    threshold: float
    first_rate_before: float
    first_rate_after: float
    accuracy_before: float
    accuracy_after: float
    n: int


def debiasing(prob_first: np.ndarray, truth_first: np.ndarray | None = None) -> Debiasing:
    """Decisions at 0.5 and at the debiasing threshold; accuracy against ``truth_first`` (e.g. the
    human majority, in display coordinates) where given (NaN otherwise)."""
    p = np.asarray(prob_first, dtype=np.float64)
    tau = debias_threshold(p)
    before, after = p > 0.5, p > tau
    if truth_first is None or len(p) == 0:
        acc_b = acc_a = float("nan")
    else:
        t = np.asarray(truth_first, dtype=bool)
        acc_b, acc_a = float(np.mean(before == t)), float(np.mean(after == t))
    n = len(p)
    return Debiasing(tau, float(before.mean()) if n else float("nan"), float(after.mean()) if n else float("nan"),
                     acc_b, acc_a, n)
