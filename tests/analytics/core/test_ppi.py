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


# ---- Bradley-Terry strengths (PPI++ logistic M-estimation)

def battles(rng, theta, size):
    k = len(theta)
    a = rng.integers(0, k, size)
    b = (a + rng.integers(1, k, size)) % k  # never a system against itself
    p = 1 / (1 + np.exp(-(theta[a] - theta[b])))
    return a, b, (rng.random(size) < p).astype(float)


def test_lambda_zero_is_the_bradley_terry_fit_of_the_humans():
    """The human-only strengths are the report's Bradley-Terry (ties as half a win), on its log-odds scale."""
    from analytics.core.ppi import ppi_bradley_terry
    from analytics.core.ratings import BASE, SCALE, bradley_terry

    rng = np.random.default_rng(3)
    theta = np.array([0.0, 0.5, -0.3, 1.0])
    a, b, y = battles(rng, theta, 400)
    y[rng.random(400) < 0.1] = 0.5  # ties
    au, bu, fu = battles(rng, theta, 600)
    est = ppi_bradley_terry(a, b, y, y, au, bu, fu, 4, lam=0.0)
    ratings = bradley_terry(a, b, y, 4)
    expected = np.log(BASE) * (ratings - ratings[0]) / SCALE
    np.testing.assert_allclose(est.theta, expected, atol=2e-4)
    assert est.lam == 0.0 and est.se[0] == 0.0 and np.all(est.se[1:] > 0)


def test_a_perfect_judge_gives_the_fit_on_everything_it_scored():
    """With f = Y, lambda = 1 cancels the labelled terms: the estimate is the fit on the judge's N battles."""
    from analytics.core.ppi import ppi_bradley_terry
    from analytics.core.ratings import BASE, SCALE, bradley_terry

    rng = np.random.default_rng(4)
    theta = np.array([0.0, 0.8, 0.2])
    a, b, y = battles(rng, theta, 100)
    au, bu, yu = battles(rng, theta, 900)
    est = ppi_bradley_terry(a, b, y, y, au, bu, yu, 3, lam=1.0)
    ratings = bradley_terry(au, bu, yu, 3)
    np.testing.assert_allclose(est.theta, np.log(BASE) * (ratings - ratings[0]) / SCALE, atol=2e-4)


def simulate_strengths(agreement: float, reps: int = 150, n: int = 150, big_n: int = 1500):
    from analytics.core.ppi import ppi_bradley_terry

    rng = np.random.default_rng(5)
    theta = np.array([0.0, 0.6, -0.4, 0.2])
    covered = covered_human = 0
    ratios = []
    for _ in range(reps):
        a, b, y = battles(rng, theta, n + big_n)
        keep = rng.random(n + big_n) < agreement
        f = np.where(keep, y, rng.random(n + big_n) < 0.5).astype(float)  # the judge: right or a coin
        est = ppi_bradley_terry(a[:n], b[:n], y[:n], f[:n], a[n:], b[n:], f[n:], 4)
        human = ppi_bradley_terry(a[:n], b[:n], y[:n], f[:n], a[n:], b[n:], f[n:], 4, lam=0.0)
        covered += np.all((est.low[1:] <= theta[1:]) & (theta[1:] <= est.high[1:]))
        covered_human += np.all((human.low[1:] <= theta[1:]) & (theta[1:] <= human.high[1:]))
        ratios.append(np.mean((est.high - est.low)[1:] / (human.high - human.low)[1:]))
    return covered / reps, covered_human / reps, float(np.mean(ratios))


def test_strengths_with_an_informative_judge_are_narrower_and_cover():
    coverage, human, ratio = simulate_strengths(agreement=0.9)
    # three 95 % intervals at once: about 0.95^3 = 0.86 joint coverage for either estimate
    assert coverage >= human - 0.05 and coverage >= 0.8
    assert ratio < 0.75


def test_strengths_with_a_coin_for_a_judge_stay_human_only():
    coverage, human, ratio = simulate_strengths(agreement=0.0, reps=60)
    assert coverage >= human - 0.05
    assert 0.97 <= ratio <= 1.05


def test_strengths_refuse_disconnected_battles():
    from analytics.core.ppi import ppi_bradley_terry

    with pytest.raises(ValueError, match="connect"):
        ppi_bradley_terry([0, 0], [1, 1], [1.0, 0.0], [1.0, 0.0], [2], [1], [1.0], 3)
