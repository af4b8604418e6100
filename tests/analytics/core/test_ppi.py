"""The estimators of a mean from people and judges (analytics/core/ppi.py): formulas worked by hand on tiny cases,
the identities between them, the interval rule's promises (Wilson's interval for 0/1 labels, never zero width while
anything is unlabelled, exact for a census of these items), and power tuning. Coverage on real data is in
test_coverage_prd.py."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from analytics.core.ppi import (
    ITEMS_LIKE_THESE,
    THESE_ITEMS,
    bounded_interval,
    classical_mean,
    labels_worth,
    power_tuned_lambda,
    ppi_mean,
    score_bounds,
    stratified_mean,
)

Z = norm.ppf(0.975)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (7, 20), (19, 40)])
def test_for_0_1_labels_the_interval_rule_is_wilsons(k, n):
    p = k / n
    wilson = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert bounded_interval(p, p * (1 - p) / n, n) == pytest.approx((wilson.low, wilson.high), abs=1e-12)


def test_the_labelled_mean_uses_n_minus_one_degrees_of_freedom_inside_wilsons_rule():
    y = np.array([1.0, 1.0, 0.5, 0.0, 1.0, 0.5])
    n, ss = y.size, float(np.sum((y - y.mean()) ** 2))
    est = classical_mean(y)
    assert est.estimate == pytest.approx(y.mean()) and est.se == pytest.approx(np.sqrt(ss / (n - 1) / n))
    centre = (n * y.mean() + Z**2 / 2) / (n + Z**2)
    half = Z * np.sqrt(n * ss / (n - 1) + Z**2 / 4) / (n + Z**2)
    assert (est.low, est.high) == pytest.approx((centre - half, min(1.0, centre + half)))
    assert est.target == ITEMS_LIKE_THESE and est.efficiency == 1.0


def test_labels_that_all_agree_still_get_an_interval_that_holds_them():
    for value in (0.0, 0.5, 1.0):
        est = classical_mean(np.full(10, value))
        assert est.se == 0 and est.width > 0.2 and est.low <= value <= est.high
    # ten wins out of ten: Wilson's [10 / (10 + z^2), 1]
    assert classical_mean(np.ones(10)).low == pytest.approx(10 / (10 + Z**2))


def test_the_finite_population_correction_makes_a_census_exact():
    y = np.array([1.0, 0.0, 0.5, 1.0])
    census = classical_mean(y, population_size=4)
    assert census.target == THESE_ITEMS and census.width == 0 and census.low == census.high == y.mean()
    half = classical_mean(y, population_size=8)
    # Var = (1 - n/N) s^2 / n; the pseudo-labels shrink with the same share
    assert half.se**2 == pytest.approx(0.5 * np.var(y, ddof=1) / 4)
    assert half.width < classical_mean(y).width
    with pytest.raises(ValueError, match="smaller than the labelled sample"):
        classical_mean(y, population_size=3)


def test_scores_outside_0_1_use_the_range_they_live_in():
    assert score_bounds([-1, 0, 1]) == (-1.0, 1.0) and score_bounds([0, 0.5]) == (0.0, 1.0)
    prefs = np.array([-1.0, 1.0, 1.0, 0.0, 1.0, -1.0, 1.0, 1.0])
    est, scaled = classical_mean(prefs), classical_mean((prefs + 1) / 2)
    assert est.estimate == pytest.approx(2 * scaled.estimate - 1)
    assert (est.low, est.high) == pytest.approx((2 * scaled.low - 1, 2 * scaled.high - 1))


def test_the_prediction_powered_mean_on_a_case_worked_by_hand():
    y, f, fu = [1, 0, 1, 0], [1, 0, 1, 0], [1, 1]
    # Cov(y, f) = Var(y) = 1/3; Var of all six predictions = 4/15; 1 + n/N = 3: lambda = (1/3) / (3 * 4/15)
    assert power_tuned_lambda(y, f, fu) == pytest.approx(5 / 12)
    est = ppi_mean(y, f, fu)
    # theta = lambda * mean(f~) + mean(y - lambda f) = 5/12 + (1/2 - 5/24) = 17/24
    assert est.estimate == pytest.approx(17 / 24) and est.lam == pytest.approx(5 / 12)
    # Var = s^2(y - lambda f) / n + lambda^2 s^2(f, all six) / N; y - lambda f = 7/12 y, whose sum of squares is
    # (7/12)^2 * 1 over n - 2 = 2 degrees of freedom (the mean and lambda were fitted):
    # (49/288) / 4 + (25/144)(4/15) / 2
    assert est.se**2 == pytest.approx(49 / 288 / 4 + 25 / 144 * 4 / 15 / 2)
    # worth in labels: the labelled mean's variance (1/3) / 4 against this one's, each with z^2 / 4 coin labels
    assert est.efficiency == pytest.approx((16 * (1 / 12) + Z**2 / 4) / (16 * est.se**2 + Z**2 / 4))


def test_lambda_zero_is_the_people_only_estimate():
    rng = np.random.default_rng(1)
    y, f, fu = rng.random(30), rng.random(30), rng.random(200)
    plain, human = ppi_mean(y, f, fu, lam=0.0), classical_mean(y)
    assert (plain.estimate, plain.low, plain.high, plain.se) == pytest.approx(
        (human.estimate, human.low, human.high, human.se)
    )
    finite = ppi_mean(y, f, fu, lam=0.0, finite=True)
    assert (finite.low, finite.high) == pytest.approx(
        tuple(classical_mean(y, population_size=230).__dict__[k] for k in ("low", "high"))
    )


def test_one_unlabelled_item_keeps_its_variance_term():
    y, f = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0]), np.array([0.9, 0.2, 0.8, 0.7, 0.1, 0.6])
    est = ppi_mean(y, f, [0.4], lam=0.8)
    var_f = np.var(np.concatenate([f, [0.4]]), ddof=1)
    assert est.se**2 == pytest.approx(np.var(y - 0.8 * f, ddof=1) / 6 + 0.64 * var_f / 1)


def test_the_finite_target_is_the_regression_estimator():
    rng = np.random.default_rng(2)
    y_all = rng.integers(0, 3, 80) / 2
    f_all = np.clip(0.5 * y_all + rng.normal(0.25, 0.3, 80), 0, 1)  # a judge that sees something
    y, f, fu = y_all[:20], f_all[:20], f_all[20:]
    est = ppi_mean(y, f, fu, finite=True)
    slope = np.cov(y, f, ddof=1)[0, 1] / np.var(np.concatenate([f, fu]), ddof=1)
    lam = float(np.clip(slope, 0, 1))
    assert 0 < lam < 1 and est.lam == pytest.approx(lam) and est.target == THESE_ITEMS
    assert est.estimate == pytest.approx(lam * np.concatenate([f, fu]).mean() + np.mean(y - lam * f))
    assert est.se**2 == pytest.approx(0.75 * np.var(y - lam * f, ddof=2) / 20)


def test_an_uninformative_judge_leaves_the_people_alone():
    rng = np.random.default_rng(4)
    ratios = []
    for _ in range(300):
        y, f = (rng.random(40) < 0.6).astype(float), rng.random(240)
        est, human = ppi_mean(y, f[:40], f[40:]), classical_mean(y)
        ratios.append(est.width / human.width)
    assert 0.97 <= np.mean(ratios) <= 1.03


def test_it_refuses_what_it_cannot_estimate():
    with pytest.raises(ValueError, match="at least two"):
        ppi_mean([1.0], [1.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="same labelled items"):
        ppi_mean([1.0, 0.0], [1.0], [0.0])
    with pytest.raises(ValueError, match="finite"):
        classical_mean([1.0, np.nan])
    assert power_tuned_lambda([1, 0, 1], [1, 1, 1], [1, 1]) == 0.0  # a constant judge carries nothing
    assert ppi_mean([1.0, 0.0], [1.0, 0.0], [0.5]).lam == 0.0  # two labels: nothing left to tune on


def test_labels_worth_is_the_squared_ratio_of_unclipped_half_widths():
    assert labels_worth(0.01, 0.01, 20) == 1.0
    n, v, ref = 20, 0.004, 0.008
    assert labels_worth(v, ref, n) == pytest.approx((n * n * ref + Z**2 / 4) / (n * n * v + Z**2 / 4))
    assert labels_worth(v, ref, n, finite_share=0.0) == pytest.approx(2.0)


def test_the_stratified_mean_on_a_case_worked_by_hand():
    strata = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    sampled = np.array([1, 1, 0, 0, 1, 1, 1, 0, 0, 0], dtype=bool)
    y = np.where(sampled, [1.0, 0.0, 0, 0, 1.0, 1.0, 0.5, 0, 0, 0], np.nan)
    est = stratified_mean(y, strata, sampled, finite=True)
    # W = (0.4, 0.6); means (0.5, 5/6); s^2 = (0.5, 1/12); V = 0.16 (1 - 2/4) 0.5 / 2 + 0.36 (1 - 3/6) (1/12) / 3
    assert est.estimate == pytest.approx(0.4 * 0.5 + 0.6 * 5 / 6)
    assert est.se**2 == pytest.approx(0.16 * 0.5 * 0.5 / 2 + 0.36 * 0.5 / 12 / 3)
    assert np.isnan(est.lam) and est.target == THESE_ITEMS


def test_one_stratum_is_the_labelled_mean():
    rng = np.random.default_rng(5)
    y_all = rng.integers(0, 3, 50) / 2
    sampled = np.zeros(50, dtype=bool)
    sampled[rng.choice(50, 15, replace=False)] = True
    y = np.where(sampled, y_all, np.nan)
    one = stratified_mean(y, np.zeros(50, dtype=int), sampled)
    plain = classical_mean(y_all[sampled])
    assert (one.estimate, one.se, one.low, one.high) == pytest.approx((plain.estimate, plain.se, plain.low, plain.high))
    finite = stratified_mean(y, np.zeros(50, dtype=int), sampled, finite=True)
    census = classical_mean(y_all[sampled], population_size=50)
    assert (finite.se, finite.low, finite.high) == pytest.approx((census.se, census.low, census.high))


def test_a_stratum_without_two_labels_is_refused():
    with pytest.raises(ValueError, match="stratum 1 has 1 labelled"):
        stratified_mean(np.array([1.0, 0.0, 1.0, np.nan]), np.array([0, 0, 1, 1]), np.array([True, True, True, False]))


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
        covered += int(np.all((est.low[1:] <= theta[1:]) & (theta[1:] <= est.high[1:])))
        covered_human += int(np.all((human.low[1:] <= theta[1:]) & (theta[1:] <= human.high[1:])))
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
