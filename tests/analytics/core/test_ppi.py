"""Prediction-powered inference for a mean with power tuning: the PPI++ formulas, worked by hand on a tiny
case, and their promises checked by simulation (coverage near the nominal 95 %, never wider than human-only
when the judge carries information, human-only when it carries none)."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.core.ppi import classical_mean, power_tuned_lambda, ppi_mean


def test_the_formulas_on_a_case_worked_by_hand():
    y, f, fu = [1, 0, 1, 0], [1, 0, 1, 0], [1, 1]
    # Cov(y, f) = Var(y) = 1/3; Var of all six predictions = 4/15; 1 + n/N = 3: lambda = (1/3) / (3 * 4/15)
    assert power_tuned_lambda(y, f, fu) == pytest.approx(5 / 12)
    est = ppi_mean(y, f, fu)
    # theta = lambda * mean(f~) + mean(y - lambda f) = 5/12 + (1/2 - 5/24) = 17/24
    assert est.estimate == pytest.approx(17 / 24) and est.lam == pytest.approx(5 / 12)
    # Var = lambda^2 Var(f~)/N + Var(y - lambda f)/n; Var(f~) = 0, y - lambda f = 7/12 * y: Var = (7/12)^2 * 1/3
    assert est.se == pytest.approx(np.sqrt((7 / 12) ** 2 * (1 / 3) / 4))


def test_lambda_zero_is_the_human_only_estimate():
    rng = np.random.default_rng(1)
    y, f, fu = rng.random(30), rng.random(30), rng.random(200)
    plain, human = ppi_mean(y, f, fu, lam=0.0), classical_mean(y)
    assert (plain.estimate, plain.low, plain.high) == pytest.approx((human.estimate, human.low, human.high))


def simulate(correlation: float, n: int = 40, big_n: int = 200, reps: int = 2000, seed: int = 0):
    """Y = Bernoulli(0.6); the judge agrees with Y with probability (1 + correlation) / 2. Returns the coverage
    of the true 0.6 by the hybrid and by the human-only interval, and the mean width ratio."""
    rng = np.random.default_rng(seed)
    covered, covered_human, ratios = 0, 0, []
    for _ in range(reps):
        y_all = (rng.random(n + big_n) < 0.6).astype(float)
        agree = rng.random(n + big_n) < (1 + correlation) / 2
        f_all = np.where(agree, y_all, 1 - y_all)
        est, human = ppi_mean(y_all[:n], f_all[:n], f_all[n:]), classical_mean(y_all[:n])
        covered += est.low <= 0.6 <= est.high
        covered_human += human.low <= 0.6 <= human.high
        ratios.append(est.width / human.width)
    return covered / reps, covered_human / reps, float(np.mean(ratios))


def test_an_informative_judge_narrows_the_interval_and_keeps_coverage():
    coverage, human, ratio = simulate(correlation=0.8)
    # normal intervals at n = 40: both near the nominal 95 %, the hybrid no worse than human-only beyond noise
    assert coverage >= human - 0.02 and 0.92 <= coverage <= 0.97
    # with agreement 0.9 the rectifier's variance is a fraction of Var(Y): the interval is clearly narrower
    assert ratio < 0.8


def test_an_uninformative_judge_leaves_the_human_only_estimate():
    coverage, human, ratio = simulate(correlation=0.0)
    assert coverage >= human - 0.02
    assert 0.97 <= ratio <= 1.06  # lambda near 0: as wide as human-only, never much wider


def test_it_refuses_what_it_cannot_estimate():
    with pytest.raises(ValueError):
        ppi_mean([1.0], [1.0], [0.0, 1.0])
    with pytest.raises(ValueError):
        ppi_mean([1.0, 0.0], [1.0], [0.0])
    assert power_tuned_lambda([1, 0, 1], [1, 1, 1], [1, 1]) == 0.0  # a constant judge carries nothing
