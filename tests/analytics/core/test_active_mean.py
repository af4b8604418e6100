"""The inverse-probability-weighted mean from people and judges (active statistical inference with power tuning):
a case worked by hand, the identities with the uniform estimators, and its promises checked by simulation
(unbiased under a judge-disagreement design, intervals near 95 %, narrower than a uniform sample where the judges'
disagreement marks the items they get wrong)."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.core.ppi import active_mean, classical_mean, ppi_mean
from selection.core.sampling import active_inclusion, judge_disagreement, systematic_pps


def test_a_case_worked_by_hand():
    y = np.array([1.0, 0.0, np.nan, np.nan])
    f, pi, sampled = np.array([1.0, 0.0, 1.0, 0.0]), np.full(4, 0.5), np.array([True, True, False, False])
    # w = (2, 2, 0, 0); A = w y = (2, 0, 0, 0); B = f (1 - w) = (-1, 0, 1, 0); C = 1 - w = (-1, -1, 1, 1)
    # least squares of -(A - 1/2) = (-1.5, .5, .5, .5) on B and C: B.B = 2, B.C = 2, C.C = 4, B.(-A) = 2, C.(-A) = 2
    # -> lam + mu = 1 and lam + 2 mu = 1: lam = 1, mu = 0; z = A + B = (1, 0, 1, 0): mean 1/2, sd sqrt(1/3)
    est = active_mean(y, f, pi, sampled)
    assert est.lam == pytest.approx(1.0) and est.estimate == pytest.approx(0.5)
    assert est.se == pytest.approx(np.sqrt(1 / 3) / 2)
    assert (est.n_labelled, est.n_unlabelled) == (2, 2)
    # lam = 0: mu = -Cov(A, C) / Var(C) = (2/3) / (4/3) = 1/2; z = A + C/2 = (1.5, -.5, .5, .5): mean 1/2 (the
    # labelled mean), sd sqrt(2/3)
    people = active_mean(y, f, pi, sampled, lam=0.0)
    assert people.estimate == pytest.approx(0.5) and people.se == pytest.approx(np.sqrt(2 / 3) / 2)


def test_labels_that_all_agree_give_exactly_that_value_whatever_the_chances():
    # y = 1 wherever labelled: A = w, C = 1 - A, so mu = Var(A) / Var(A) = 1 and z = 1 on every item
    rng = np.random.default_rng(2)
    pi = rng.uniform(0.1, 0.9, 50)
    sampled = rng.random(50) < pi
    est = active_mean(np.where(sampled, 1.0, np.nan), rng.random(50), pi, sampled, lam=0.0)
    assert est.estimate == pytest.approx(1.0) and est.se == pytest.approx(0.0, abs=1e-12)


def test_with_equal_chances_it_is_the_uniform_estimators():
    rng = np.random.default_rng(3)
    n_items, n = 120, 30
    y_all, f = rng.integers(0, 3, n_items) / 2, rng.random(n_items)
    sampled = np.zeros(n_items, dtype=bool)
    sampled[rng.choice(n_items, n, replace=False)] = True
    pi = np.full(n_items, n / n_items)
    y = np.where(sampled, y_all, np.nan)
    # lambda = 0: (1/N) sum (N/n) y = the labelled mean
    assert active_mean(y, f, pi, sampled, lam=0.0).estimate == pytest.approx(classical_mean(y_all[sampled]).estimate)
    # its interval is the plain mean's too, up to the degrees of freedom (sd over N items of z vs over n of y)
    people, plain = active_mean(y, f, pi, sampled, lam=0.0), classical_mean(y_all[sampled])
    assert people.se == pytest.approx(plain.se, rel=0.05)
    # lambda fixed: the constant absorbs the level, so the estimate is lam mean(f) + mean over the labelled of
    # (y - lam f), the prediction-powered mean with the judge's mean over every item
    lam = 0.4
    expected = lam * f.mean() + np.mean(y_all[sampled] - lam * f[sampled])
    assert active_mean(y, f, pi, sampled, lam=lam).estimate == pytest.approx(expected)


def _population(rng, n_items=300, hard_share=0.4, verdicts=4):
    """Items the judges find hard (their verdicts a coin, the people's label a coin) and easy ones (each verdict
    right 9 times in 10, the people agreeing with the truth)."""
    hard = rng.random(n_items) < hard_share
    truth = rng.integers(0, 2, n_items).astype(float)
    right = rng.random((n_items, verdicts)) < 0.9
    scores = np.where(hard[:, None], rng.integers(0, 2, (n_items, verdicts)),
                      np.where(right, truth[:, None], 1 - truth[:, None])).astype(float)
    y = np.where(hard, rng.integers(0, 2, n_items), truth).astype(float)
    return y, scores


def test_under_a_judge_disagreement_design_it_is_unbiased_covers_and_beats_a_uniform_sample():
    rng = np.random.default_rng(11)
    y, scores = _population(rng)
    f, n_items, n, rounds = scores.mean(axis=1), len(y), 30, 1500
    truth = y.mean()
    pi = active_inclusion(judge_disagreement(scores), n)
    weighted, uniform, covered = [], [], 0
    for _ in range(rounds):
        sampled = np.zeros(n_items, dtype=bool)
        sampled[systematic_pps(pi, rng)] = True
        est = active_mean(np.where(sampled, y, np.nan), f, pi, sampled)
        weighted.append((est.estimate, est.width))
        covered += est.low <= truth <= est.high
        chosen = rng.choice(n_items, n, replace=False)
        rest = np.setdiff1d(np.arange(n_items), chosen)
        uniform.append(ppi_mean(y[chosen], f[chosen], f[rest]).width)
    estimates = np.array(weighted)
    # unbiased: the mean of the estimates within 4 standard errors of the population's mean
    assert abs(estimates[:, 0].mean() - truth) < 4 * estimates[:, 0].std() / np.sqrt(rounds)
    # near the nominal 95 % (binomial sd at 1500 rounds ~ 0.6 points; the interval is a little conservative)
    assert 0.92 <= covered / rounds <= 0.985
    # people sent where the judges disagree: a narrower interval than a uniform sample of the same size
    assert estimates[:, 1].mean() < 0.95 * np.mean(uniform)


def test_bad_input_is_refused():
    f, pi = np.full(4, 0.5), np.full(4, 0.5)
    with pytest.raises(ValueError, match="at least two labelled items"):
        active_mean(np.array([1.0, np.nan, np.nan, np.nan]), f, pi, np.array([True, False, False, False]))
    with pytest.raises(ValueError, match="inclusion probability in"):
        active_mean(np.array([1.0, 0.0, np.nan, np.nan]), f, np.array([0.0, 0.5, 0.5, 0.5]),
                    np.array([True, True, False, False]))
    with pytest.raises(ValueError, match="same items"):
        active_mean(np.ones(3), f, pi, np.ones(4, dtype=bool))
