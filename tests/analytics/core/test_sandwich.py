"""Bradley-Terry's closed-form ("sandwich") intervals, as LMArena's arena-rank computes them
(docs/ratings.md#sandwich-intervals): the formula derived again battle by battle, the width against a 1,000-round
bootstrap on PRD's human votes, and coverage at 95 % in simulations of PRD's own design."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import norm

from analytics.core import ratings
from tests.analytics.conftest import PRD

BATTLES = PRD / "battles_prd_human_individual_votes.csv"


def prd_battles():
    if not BATTLES.exists():
        pytest.skip(f"{BATTLES} is missing: the real data lives in ../shared/data (see shared/data/README.md)")
    from analytics.battles import read_battles

    battles = read_battles(str(BATTLES), 10**8)
    return battles.systems, battles.a, battles.b, battles.score


def by_battle(a, b, score, n, point):
    """The sandwich from its definition, one battle at a time: H = sum p(1-p) x x^T, G = sum (o - p)^2 x x^T with
    x = e_a - e_b, Cov = H^+ G H^+ (the pseudo-inverse: ratings are defined up to a common shift)."""
    theta = (point - 1000) * math.log(10) / 400
    hessian, spread = np.zeros((n, n)), np.zeros((n, n))
    for i, j, o in zip(a, b, score, strict=True):
        x = np.zeros(n)
        x[i], x[j] = 1, -1
        p = expit(theta[i] - theta[j])
        hessian += p * (1 - p) * np.outer(x, x)
        spread += (o - p) ** 2 * np.outer(x, x)
    inverse = np.linalg.pinv(hessian)
    return norm.ppf(0.975) * np.sqrt(np.diag(inverse @ spread @ inverse)) * 400 / math.log(10)


def test_the_closed_form_is_the_sandwich_of_its_definition():
    rng = np.random.default_rng(3)
    n, battles = 5, 600
    a = rng.integers(0, n, battles)
    b = (a + rng.integers(1, n, battles)) % n
    strength = np.array([0.0, 0.3, 0.6, -0.2, 1.0])
    score = np.where(
        rng.random(battles) < 0.1, 0.5, (rng.random(battles) < expit(strength[a] - strength[b])).astype(float)
    )
    point = ratings.bradley_terry(a, b, score, n)
    low, high = ratings.sandwich_bradley_terry(a, b, score, n, point)
    np.testing.assert_allclose(high - point, point - low)
    np.testing.assert_allclose(high - point, by_battle(a, b, score, n, point), rtol=1e-3)


def test_on_prd_the_closed_form_lands_near_a_long_bootstrap():
    """LMArena found the sandwich within ~0.7 points of a 1,000-round bootstrap; on PRD's 32 human pairs among 9
    systems every interval end is within 3 points of the bootstrap's percentile ends (intervals ~50-100 wide)."""
    systems, a, b, score = prd_battles()
    n = len(systems)
    point = ratings.bradley_terry(a, b, score, n)
    low, high = ratings.sandwich_bradley_terry(a, b, score, n, point)
    samples = ratings.bootstrap_bradley_terry(a, b, score, n, rounds=1000, seed=1)
    boot_low, boot_high = np.percentile(samples, [2.5, 97.5], axis=0)
    assert np.all(high - low > 20)
    assert np.max(np.abs(low - boot_low)) < 3 and np.max(np.abs(high - boot_high)) < 3


def test_the_closed_form_covers_at_95_percent_on_prd_s_design():
    """Battles drawn on PRD's own pairs (the same system pairs, the same counts) from the Bradley-Terry fit of its
    human votes, with PRD's share of ties: each system's interval covers its true (centred) rating in about 95 % of
    300 simulated studies. A battle is a tie with PRD's rate t, else a win with chance q = (p - t/2) / (1 - t), so
    its expected score is the model's p (ties count half a win): the fit's target is the true rating."""
    systems, a, b, score = prd_battles()
    n = len(systems)
    truth = ratings.bradley_terry(a, b, score, n)
    theta = (truth - 1000) * math.log(10) / 400
    tie_rate = float(np.mean(score == 0.5))
    rng = np.random.default_rng(29)
    covered, runs = np.zeros(n), 300
    p = expit(theta[a] - theta[b])
    q = (p - tie_rate / 2) / (1 - tie_rate)
    assert np.all((q >= 0) & (q <= 1))
    for _ in range(runs):
        ties = rng.random(len(a)) < tie_rate
        wins = rng.random(len(a)) < q
        drawn = np.where(ties, 0.5, wins.astype(float))
        point = ratings.bradley_terry(a, b, drawn, n)
        low, high = ratings.sandwich_bradley_terry(a, b, drawn, n, point)
        covered += (low <= truth) & (truth <= high)
    rate = covered / runs
    print("coverage per system", np.round(rate, 3), "mean", rate.mean())
    se = math.sqrt(0.95 * 0.05 / runs)
    assert abs(rate.mean() - 0.95) < 3 * se / math.sqrt(n) + 0.01, rate
    assert rate.min() > 0.95 - 4 * se, rate
