"""Positional bias, agreement and indeterminacy metrics on hand-computable cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analytics.core import agreement, bias, indeterminacy


def test_positional_bias_rate_test_and_interval():
    result = bias.positional_bias(np.array([True] * 30 + [False] * 10))
    assert (result.n, result.first_chosen, result.rate) == (40, 30, 0.75)
    assert result.low < 0.75 < result.high and result.p_value < 0.01
    unbiased = bias.positional_bias(np.array([True, False] * 20))
    assert unbiased.rate == 0.5 and unbiased.p_value == pytest.approx(1.0)


def test_the_debiasing_threshold_balances_first_and_second():
    p_first = np.array([0.9, 0.8, 0.7, 0.6, 0.55, 0.65, 0.75, 0.45])
    truth = np.array([True, True, True, False, False, False, True, False])  # the 4 largest are "first"
    result = bias.debiasing(p_first, truth)
    assert result.threshold == pytest.approx(0.675)
    assert result.first_rate_before == 7 / 8 and result.first_rate_after == 0.5
    # at 0.5 the judge says "first" 7 times (3 wrong); at tau it says so for the 4 largest (all right)
    assert result.accuracy_before == 5 / 8 and result.accuracy_after == 1.0


def test_cohen_kappa_by_hand():
    x = ["a", "a", "b", "b", "a", "b"]
    y = ["a", "b", "b", "b", "a", "a"]
    # observed 4/6; expected (3*3 + 3*3) / 36 = 0.5 -> kappa = (2/3 - 1/2) / (1/2) = 1/3
    assert agreement.cohen_kappa(x, y) == pytest.approx(1 / 3)
    assert agreement.cohen_kappa(["a", "b"], ["a", "b"]) == 1.0


def test_krippendorff_alpha_by_hand():
    # two coders, four units: a/a, a/b, b/b, b/b. Coincidences: o_aa=2, o_ab=o_ba=1, o_bb=4; n=8
    # D_o = 2 / 8 ... alpha = 1 - (n - 1) * (o_ab + o_ba) / (n^2 - sum n_c^2) = 1 - 7 * 2 / (64 - 34)
    assert agreement.krippendorff_alpha_nominal([["a", "a"], ["a", "b"], ["b", "b"], ["b", "b"]]) == pytest.approx(
        1 - 14 / 30)
    assert agreement.krippendorff_alpha_nominal([["a", "a"], ["b", "b"]]) == 1.0
    assert math.isnan(agreement.krippendorff_alpha_nominal([["a"]]))


def test_pairwise_kappas_need_enough_overlap():
    labels = {"r1": {u: "a" if u % 2 else "b" for u in range(12)}, "r2": {u: "a" if u % 2 else "b" for u in range(12)},
              "r3": {0: "a"}}
    [pair] = agreement.pairwise_kappas(labels, min_overlap=10)
    assert (pair["rater_1"], pair["rater_2"], pair["overlap"], pair["kappa"]) == ("r1", "r2", 12, 1.0)


def test_the_multilabel_vector_need_not_sum_to_one():
    sets = [("a",), ("a", "b"), ("a",), ("a", "b"), ("a", "b"), ("a",), ("a",), ("a",), ("b",), ("a", "b")]
    omega = indeterminacy.multilabel_vector(sets)
    np.testing.assert_allclose(omega, [0.9, 0.5])  # 9 of 10 contain a, 5 of 10 contain b


def test_omega_from_forced_choice_follows_the_definition():
    o = indeterminacy.forced_choice_distribution(["a", "a", "a", "b", "tie"])
    np.testing.assert_allclose(o, [0.75, 0.25])
    omega = indeterminacy.omega_from_forced_choice(o, beta=0.4)
    np.testing.assert_allclose(omega, [0.75 + 0.4 * 0.25, 0.25])
    assert omega.sum() == pytest.approx(1 + 0.4 * 0.25)


def test_beta_hat_and_the_translation_matrix():
    forced = ["b", "b", "b", "a", "a", "tie"]
    sets = [("b",), ("a", "b"), ("a", "b"), ("a",), ("a", "b"), ("a", "b")]
    assert indeterminacy.beta_hat(forced, sets, positive="a", negative="b") == pytest.approx(2 / 3)
    f = indeterminacy.translation_matrix(forced, sets)
    np.testing.assert_allclose(f[:, 0], [1, 0, 0])  # {a}: always forced a
    np.testing.assert_allclose(f[:, 1], [0, 1, 0])  # {b}
    np.testing.assert_allclose(f[:, 2], [0.25, 0.5, 0.25])  # {a, b}: a once, b twice, tie once


def test_agreement_metrics_between_humans_and_a_judge():
    h = np.array([[0.8, 0.5], [0.2, 1.0]])
    j = np.array([[1.0, 0.0], [0.2, 0.8]])
    assert indeterminacy.mse(h, j) == pytest.approx(((0.04 + 0.25) + (0 + 0.04)) / 2)
    assert indeterminacy.hit_rate(h, ["a", "a"]) == 0.5
    p, q = np.array([[0.5, 0.5]]), np.array([[0.9, 0.1]])
    assert indeterminacy.kl_divergence(p, q) == pytest.approx(0.5 * np.log(0.5 / 0.9) + 0.5 * np.log(0.5 / 0.1),
                                                              rel=1e-4)
    assert indeterminacy.js_divergence(p, p) == 0.0
    assert 0 < indeterminacy.js_divergence(p, q) < np.log(2)


def test_decision_consistency_and_estimation_bias():
    h = np.array([[0.8, 0.5], [0.3, 0.9], [0.6, 0.6]])
    j = np.array([[0.9, 0.1], [0.6, 0.5], [0.4, 0.7]])
    sweep = indeterminacy.threshold_sweep(h, j, option=0, taus=np.array([0.5]))
    # tau .5: humans [1, 0, 1], judge [1, 1, 0] -> consistency 1/3, bias 2/3 - 2/3 = 0
    assert sweep.consistency[0] == pytest.approx(1 / 3) and sweep.bias[0] == pytest.approx(0.0)
