"""Sandwich intervals clustered by item (docs/ratings.md#clustered-by-item): the meat from its definition, the
case with one vote per item, and coverage on PRD's real votes and answers when whole items are resampled -- the
plain Bradley-Terry board and the style-controlled one, as the report computes them."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit
from scipy.stats import t

from analytics.core import clusters, ratings
from tests.analytics.core.test_style_control import prd_styled_battles, simulated

UNIT = 400 / math.log(10)


def design_matrix(a, b, n, x=None):
    """Each battle's row (e_a - e_b, x): the derivative of its log-odds by the parameters."""
    rows = np.zeros((len(a), n + (0 if x is None else x.shape[1])))
    rows[np.arange(len(a)), a] += 1
    rows[np.arange(len(a)), b] -= 1
    if x is not None:
        rows[:, n:] = x
    return rows


def test_the_bradley_terry_meat_sums_each_items_scores_before_the_outer_product():
    """Cov = H^+ M H^+ with M = G / (G - 1) sum_g (sum_(i in g) (S_i - p_i) d_i)(...)^T, and the ends use Student's
    t on G - 1 degrees of freedom."""
    a, b, score, _, _, n = simulated(600, seed=5)
    items = np.random.default_rng(5).integers(0, 150, len(a))
    point = ratings.bradley_terry(a, b, score, n)
    low, high = ratings.sandwich_bradley_terry(a, b, score, n, point, items=items)
    theta = (point - 1000) / UNIT
    design = design_matrix(a, b, n)
    p = expit(design @ theta)
    hessian = design.T @ (design * (p * (1 - p))[:, None])
    per_item = np.zeros((items.max() + 1, n))
    np.add.at(per_item, items, design * (score - p)[:, None])
    g = len(np.unique(items))
    meat = per_item.T @ per_item * g / (g - 1)
    inverse = np.linalg.pinv(hessian)
    half = t.ppf(0.975, g - 1) * np.sqrt(np.diag(inverse @ meat @ inverse)) * UNIT
    np.testing.assert_allclose(high - point, half, rtol=1e-3)  # H's ridge, 1e-5 n, against the pseudo-inverse
    np.testing.assert_allclose(point - low, half, rtol=1e-3)


def test_with_one_vote_per_item_the_clustered_meat_is_the_plain_one_times_the_small_sample_factor():
    a, b, score, counts_a, counts_b, n = simulated(800, seed=6)
    g = len(a)
    point = ratings.bradley_terry(a, b, score, n)
    plain = ratings.sandwich_bradley_terry(a, b, score, n, point)[1] - point
    clustered = ratings.sandwich_bradley_terry(a, b, score, n, point, items=np.arange(g)[::-1])[1] - point
    factor = math.sqrt(g / (g - 1)) * t.ppf(0.975, g - 1) / t.ppf(0.975, np.inf)
    np.testing.assert_allclose(clustered, plain * factor, rtol=1e-7)  # p per battle, not per distinct row
    # style control without a penalty: the same (with one, the clustered meat centres each battle's score on the
    # penalty's share, reg gamma, where arena-rank's subtracts (reg gamma)(reg gamma)^T / n: see the next test)
    x = ratings.style_features(counts_a, counts_b)
    fit = ratings.contextual_bradley_terry(a, b, score, x, n, reg=0.0)
    by_item = ratings.contextual_bradley_terry(a, b, score, x, n, reg=0.0, items=np.arange(g))
    np.testing.assert_allclose(by_item.high - by_item.ratings, (fit.high - fit.ratings) * factor, rtol=1e-7)
    meat = clusters.clustered_meat(np.eye(3)[[0, 1, 1]])  # three items' summed scores e_1, e_2, e_2
    np.testing.assert_allclose(meat, np.diag([1.0, 2.0, 0.0]) * 3 / 2)


def test_one_item_gives_no_interval_rather_than_one_of_zero_width():
    """One item's summed scores are zero at the fit, so its clustered meat would be zero and the interval a point:
    with fewer than two items there is no interval (NaN ends), on both boards."""
    a, b, score, counts_a, counts_b, n = simulated(60, seed=2)
    point = ratings.bradley_terry(a, b, score, n)
    low, high = ratings.sandwich_bradley_terry(a, b, score, n, point, items=np.zeros(len(a), dtype=int))
    assert np.isnan(low).all() and np.isnan(high).all()
    x = ratings.style_features(counts_a, counts_b)
    fit = ratings.contextual_bradley_terry(a, b, score, x, n, items=np.zeros(len(a), dtype=int))
    assert np.isnan(fit.low).all() and np.isnan(fit.high).all() and np.isfinite(fit.ratings).all()


def test_the_style_controlled_meat_sums_the_penalised_estimating_function_per_item():
    """psi_g = sum_(i in g) w_i (S_i - p_i) d_i - n_g reg (0, gamma): the penalised mean loss's gradient is
    sum_g psi_g / n, zero at the fit; Cov = H^-1 (G / (G - 1) sum_g psi_g psi_g^T) H^-1 with H the penalised loss's
    Hessian (times n) and the ridge."""
    a, b, score, counts_a, counts_b, n = simulated(2000, seed=8)
    items = np.random.default_rng(8).integers(0, 400, len(a))
    x = ratings.style_features(counts_a, counts_b)
    w = ratings.pair_weights(a, b, n)
    reg = 1.0
    fit = ratings.contextual_bradley_terry(a, b, score, x, n, reg=reg, penalty_curvature=True, items=items)
    m, k = len(a), x.shape[1]
    design = design_matrix(a, b, n, x)
    p = expit(design @ np.concatenate([(fit.ratings - 1000) / UNIT, fit.coefficients]))
    penalty = np.concatenate([np.zeros(n), reg * fit.coefficients])
    psi = np.zeros((items.max() + 1, n + k))
    np.add.at(psi, items, design * ((score - p) * w)[:, None] - penalty)
    np.testing.assert_allclose(psi.sum(axis=0), 0, atol=1e-7)  # the fit's estimating equation
    psi = psi[np.unique(items)]
    g = len(psi)
    hessian = design.T @ (design * (p * (1 - p) * w)[:, None]) / m + 1e-5 * np.eye(n + k)
    hessian[n:, n:] += reg * np.eye(k)
    inverse = np.linalg.inv(hessian * m)
    covariance = inverse @ (psi.T @ psi * g / (g - 1)) @ inverse
    half = t.ppf(0.975, g - 1) * np.sqrt(np.diag(covariance)[:n]) * UNIT
    np.testing.assert_allclose(fit.high - fit.ratings, half, rtol=1e-6)


def prd_by_question():
    """PRD's human battles among its five answered systems with their style counts and question, and the battles of
    each question."""
    a, b, score, counts_a, counts_b, n, question = prd_styled_battles(with_questions=True)
    questions = np.unique(question)
    return a, b, score, counts_a, counts_b, n, [np.flatnonzero(question == q) for q in questions]


def resampled_items(members, rng):
    """One study of as many questions as PRD's, drawn with replacement, each with all its votes: the battles' indices
    and each battle's item (a question drawn twice is two items)."""
    drawn = rng.integers(0, len(members), len(members))
    index = np.concatenate([members[d] for d in drawn])
    items = np.repeat(np.arange(len(drawn)), [len(members[d]) for d in drawn])
    return index, items


def test_the_style_controlled_interval_covers_the_penalised_rating_when_items_are_resampled_whole():
    """PRD's 80 questions stand for the population of items; a study is 80 questions drawn with replacement with
    all their human votes (about 2 per question and pair, 22 per question), its features z-scored and its weights
    computed on the battles at hand, and the target is the report's rating on all of PRD (penalty 1, the default):
    the interval is for the penalised model's value. Votes taken as independent covered 0.915 (0.83 for one
    system); clustered by item 0.949."""
    a, b, score, counts_a, counts_b, n, members = prd_by_question()
    everything = np.arange(len(a))
    target = ratings.contextual_bradley_terry(
        a, b, score, ratings.style_features(counts_a, counts_b), n, penalty_curvature=True, items=everything
    ).ratings
    rng = np.random.default_rng(5)
    rounds = 300
    covered = np.zeros(n)
    for _ in range(rounds):
        index, items = resampled_items(members, rng)
        x = ratings.style_features(counts_a[index], counts_b[index])
        fit = ratings.contextual_bradley_terry(
            a[index], b[index], score[index], x, n, penalty_curvature=True, items=items
        )
        covered += (fit.low <= target) & (target <= fit.high)
    rate = covered / rounds
    se = math.sqrt(0.95 * 0.05 / rounds)  # one system's binomial standard error
    assert rate.mean() >= 0.93 and rate.mean() <= 0.97, rate
    assert rate.min() >= 0.95 - 3 * se, rate


def test_the_plain_bradley_terry_interval_covers_when_items_are_resampled_whole():
    """The same resampling for the plain board's sandwich (the report's Bradley-Terry intervals): votes as
    independent covered 0.897 (0.80 for one system), clustered by item 0.947. The point is the maximum-likelihood
    fit by Newton's method (the style-controlled fit without features or weights, the same likelihood), ten times
    faster than the report's L-BFGS and no less exact."""
    a, b, score, _, _, n, members = prd_by_question()
    ones, zero = np.ones(len(a)), np.zeros((len(a), 1))

    def point(index):
        return ratings.contextual_bradley_terry(
            a[index], b[index], score[index], zero[index], n, 0.0, weights=ones[index]
        ).ratings

    target = point(np.arange(len(a)))
    assert np.abs(target - ratings.bradley_terry(a, b, score, n)).max() < 0.05
    rng = np.random.default_rng(6)
    rounds = 300
    covered = np.zeros(n)
    for _ in range(rounds):
        index, items = resampled_items(members, rng)
        fitted = point(index)
        low, high = ratings.sandwich_bradley_terry(a[index], b[index], score[index], n, fitted, items=items)
        covered += (low <= target) & (target <= high)
    rate = covered / rounds
    se = math.sqrt(0.95 * 0.05 / rounds)
    assert rate.mean() >= 0.93 and rate.mean() <= 0.97, rate
    assert rate.min() >= 0.95 - 3 * se, rate
