"""The outlier test (analytics/core/outliers.py): its false-flag rate by simulation against Ville's bound, and how
many reversed votes flag a rater, from the formula."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analytics.core import outliers, ratings


def test_each_vote_ratio_has_expectation_one_under_the_ratings():
    """p L(A won) + (1 - p) L(B won) = 1 for any p within the clip: the product is a test martingale."""
    for p in (0.05, 0.2, 0.5, 0.73, 0.95):
        won, lost = outliers.vote_ratios([p, p], [1.0, 0.0])
        assert p * won + (1 - p) * lost == pytest.approx(1.0, abs=1e-12)
    # by hand, c = 1/2, p = 0.8: A won 0.5 + 0.5 * 0.2 / 0.8 = 0.625, B won 0.5 + 0.5 * 0.8 / 0.2 = 2.5, a tie 1
    assert outliers.vote_ratios([0.8, 0.8, 0.8], [1.0, 0.0, 0.5]).tolist() == pytest.approx([0.625, 2.5, 1.0])


def test_a_reversing_rater_is_flagged_after_the_votes_the_formula_says():
    """Every vote against a favourite of p = 0.8 multiplies the evidence by 2.5: flagged at the first n with
    2.5^n >= 1 / alpha (alpha 0.001: n = ceil(ln 1000 / ln 2.5) = 8)."""
    assert outliers.votes_to_flag(0.8) == math.ceil(math.log(1000) / math.log(2.5)) == 8
    test = outliers.sequential_test(np.full(20, 0.8), np.zeros(20))
    assert test.flagged_at == 7 and test.votes == 20
    assert test.evidence == pytest.approx(20 * math.log(2.5))
    # one vote short is not flagged
    assert not outliers.sequential_test(np.full(7, 0.8), np.zeros(7)).flagged
    # ties carry no evidence; an even pair neither
    assert outliers.sequential_test(np.full(50, 0.8), np.full(50, 0.5)).evidence == 0.0
    assert outliers.sequential_test(np.full(50, 0.5), np.zeros(50)).evidence == pytest.approx(0.0, abs=1e-12)


def test_rater_tests_equal_each_raters_own_sequential_test():
    rng = np.random.default_rng(1)
    n, systems = 400, 4
    strengths = np.array([1100.0, 1050.0, 980.0, 870.0])
    a = rng.integers(0, systems, n)
    b = (a + rng.integers(1, systems, n)) % systems
    rater = rng.integers(0, 9, n)
    score = (rng.random(n) < outliers.win_probability(strengths[a], strengths[b])).astype(float)
    score[rng.random(n) < 0.1] = 0.5
    every = outliers.rater_tests(rater, a, b, score, strengths, alpha=0.05)
    for code in range(9):
        own = rater == code
        p = outliers.win_probability(strengths[a[own]], strengths[b[own]])
        alone = outliers.sequential_test(p, score[own], alpha=0.05)
        assert (every[code].votes, every[code].flagged_at) == (alone.votes, alone.flagged_at)
        assert (every[code].evidence, every[code].peak) == pytest.approx((alone.evidence, alone.peak))


def _honest_votes(rng, raters: int, votes: int, strengths: np.ndarray):
    n = raters * votes
    a = rng.integers(0, len(strengths), n)
    b = (a + rng.integers(1, len(strengths), n)) % len(strengths)
    p = outliers.win_probability(strengths[a], strengths[b])
    tie = rng.random(n) < 0.15
    score = np.where(tie, 0.5, (rng.random(n) < p).astype(float))
    rater = np.repeat(np.arange(raters), votes)
    order = rng.permutation(n)  # votes of all raters interleaved, each rater's in their own order
    return rater[order], a[order], b[order], score[order]


def test_honest_raters_are_flagged_at_most_alpha_of_the_time():
    """Ville's inequality: an honest rater's evidence ever reaches 1 / alpha with chance at most alpha. 4,000 honest
    raters of 60 votes each over 6 systems, the test at alpha = 0.05 (larger than the product's, so that a breach
    shows in a simulation of this size): the share flagged stays under alpha + 3 binomial standard errors
    (0.05 + 3 sqrt(0.05 * 0.95 / 4000) = 0.0603), both with the true ratings and with the ratings fitted on the votes
    themselves, as the board reads them (Bradley-Terry on every counted vote)."""
    rng = np.random.default_rng(20261128)
    strengths = np.array([1180.0, 1090.0, 1040.0, 1000.0, 930.0, 760.0])
    raters, votes, alpha = 4000, 60, 0.05
    bound = alpha + 3 * math.sqrt(alpha * (1 - alpha) / raters)
    rater, a, b, score = _honest_votes(rng, raters, votes, strengths)
    known = outliers.rater_tests(rater, a, b, score, strengths, alpha=alpha)
    assert len(known) == raters
    share_known = sum(t.flagged for t in known.values()) / raters
    fitted = ratings.bradley_terry(a, b, score, len(strengths))
    estimated = outliers.rater_tests(rater, a, b, score, fitted, alpha=alpha)
    share_estimated = sum(t.flagged for t in estimated.values()) / raters
    assert share_known <= bound and share_estimated <= bound
    # and the product's own alpha: at most 0.001 + 3 sqrt(0.001 * 0.999 / 4000) = 0.0025
    strict = outliers.rater_tests(rater, a, b, score, fitted)
    assert sum(t.flagged for t in strict.values()) / raters <= 0.001 + 3 * math.sqrt(0.001 * 0.999 / raters)


def test_raters_voting_at_random_or_against_the_ratings_are_caught():
    """Among 300 honest raters, 10 who reverse every vote and 10 who flip a coin (60 votes each, alpha 0.001): every
    reverser is flagged, most coin-flippers are, and honest raters hardly ever (the bound: 0.001 each)."""
    rng = np.random.default_rng(7)
    strengths = np.array([1250.0, 1100.0, 1000.0, 900.0, 750.0])
    rater, a, b, score = _honest_votes(rng, 320, 60, strengths)
    reverser, coin = rater >= 310, (rater >= 300) & (rater < 310)
    score = np.where(reverser & (score != 0.5), 1 - score, score)
    score = np.where(coin, (rng.random(len(score)) < 0.5).astype(float), score)
    fitted = ratings.bradley_terry(a, b, score, len(strengths))
    tests = outliers.rater_tests(rater, a, b, score, fitted)
    assert all(tests[r].flagged for r in range(310, 320))
    assert sum(tests[r].flagged for r in range(300, 310)) >= 5
    assert sum(tests[r].flagged for r in range(300)) <= 2
