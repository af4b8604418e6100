"""Positional bias, agreement and indeterminacy metrics on hand-computable cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analytics.core import agreement, bias, indeterminacy


def test_positional_bias_rate_test_and_interval():
    # one judgment per item (tests/analytics/core/test_bias_clustered.py has the clustered cases)
    result = bias.positional_bias(np.array([True] * 30 + [False] * 10), np.arange(40))
    assert (result.n, result.first_chosen, result.rate, result.items) == (40, 30, 0.75, 40)
    assert result.low < 0.75 < result.high and result.p_value < 0.01
    unbiased = bias.positional_bias(np.array([True, False] * 20), np.arange(40))
    assert unbiased.rate == 0.5 and unbiased.p_value == pytest.approx(1.0)


def test_the_debiasing_threshold_balances_first_and_second():
    p_first = np.array([0.9, 0.8, 0.7, 0.6, 0.55, 0.65, 0.75, 0.45])
    truth = np.array([True, True, True, False, False, False, True, False])  # the 4 largest are "first"
    result = bias.debiasing(p_first, truth)
    assert result.threshold == pytest.approx(0.675)
    assert result.first_rate_before == 7 / 8 and result.first_rate_after == 0.5
    # at 0.5 the judge says "first" 7 times (3 wrong); at tau it says so for the 4 largest (all right)
    assert result.accuracy_before == 5 / 8 and result.accuracy_after == 1.0
    assert result.tie_share == 0.0  # nothing sits at the threshold


def test_ties_at_the_median_are_decided_at_random_so_first_wins_half():
    # the case that needs it: tau = 0.9 (the median) and a plain "> tau" would never say "first"
    p_first = np.array([0.9, 0.9, 0.9, 0.9, 0.2, 0.1])
    truth = np.array([True, True, True, False, False, False])
    result = bias.debiasing(p_first, truth)
    assert result.threshold == 0.9 and result.tie_share == pytest.approx(3 / 4)
    assert result.first_rate_after == pytest.approx(0.5)
    # expected accuracy: at 0.9, "first" 3/4 of the time: right 3/4 on the three true firsts, 1/4 on the false
    # one; the two below are "second" and right
    assert result.accuracy_after == pytest.approx((3 * 0.75 + 0.25 + 2) / 6)
    assert bias.tie_share(np.array([0.5, 0.5]), 0.5) == pytest.approx(0.5)


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
        1 - 14 / 30
    )
    assert agreement.krippendorff_alpha_nominal([["a", "a"], ["b", "b"]]) == 1.0
    assert math.isnan(agreement.krippendorff_alpha_nominal([["a"]]))


def test_the_plurality_answer_and_the_three_rules_for_a_split():
    assert agreement.plurality(["a", "b", "a"]) == "a"
    assert agreement.plurality(["tie", "tie", "b"]) == "tie"
    assert agreement.plurality([None, "b"]) == "b"
    assert agreement.plurality([None]) is None and agreement.plurality([]) is None
    one_each = ["b", "tie", "a"]
    assert agreement.plurality(one_each) == "tie"
    assert agreement.plurality(one_each, split="first") == "b"
    assert agreement.plurality(one_each, split="left_out") is None
    # the first vote among the equally common answers, not the first vote of all
    assert agreement.plurality(["tie", "a", "b", "b", "a"], split="first") == "a"
    # no split, no rule: the single most common answer whatever the rule
    for rule in agreement.SPLIT_RULES:
        assert agreement.plurality(["a", "b", "b"], split=rule) == "b"
    with pytest.raises(ValueError, match="split must be one of tie, first, left_out"):
        agreement.plurality(one_each, split="coin")


def test_pairwise_kappas_need_enough_overlap():
    labels = {
        "r1": {u: "a" if u % 2 else "b" for u in range(12)},
        "r2": {u: "a" if u % 2 else "b" for u in range(12)},
        "r3": {0: "a"},
    }
    [pair] = agreement.pairwise_kappas(labels, min_overlap=10)
    assert (pair["rater_1"], pair["rater_2"], pair["overlap"], pair["kappa"]) == ("r1", "r2", 12, 1.0)


def test_the_multilabel_vector_need_not_sum_to_one():
    sets = [("a",), ("a", "b"), ("a",), ("a", "b"), ("a", "b"), ("a",), ("a",), ("a",), ("b",), ("a", "b")]
    omega = indeterminacy.multilabel_vector(sets)
    np.testing.assert_allclose(omega, [0.9, 0.5])  # 9 of 10 contain a, 5 of 10 contain b


def test_omega_from_forced_choice_follows_the_definition():
    o = indeterminacy.forced_choice_distribution(["a", "a", "a", "b", "tie"])
    np.testing.assert_allclose(o, [0.6, 0.2, 0.2])  # over (a, b, tie)
    omega = indeterminacy.omega_from_forced_choice(o, beta=0.4)
    # Omega_a = O_a + O_tie + beta O_b, Omega_b = O_b + O_tie + beta O_a
    np.testing.assert_allclose(omega, [0.6 + 0.2 + 0.4 * 0.2, 0.2 + 0.2 + 0.4 * 0.6])


def test_a_tie_counts_as_both_options_reasonable():
    # The blog's first tip: with a tie option, forced choices map one-to-one onto response sets, tie = {a, b}.
    # An item rated [a, tie, tie]: a is in all three sets, b in the two ties.
    omega = indeterminacy.omega([None, None, None], ["a", "tie", "tie"], beta=0.0)
    np.testing.assert_allclose(omega, [1.0, 2 / 3])
    np.testing.assert_allclose(omega, indeterminacy.multilabel_vector([("a",), ("a", "b"), ("a", "b")]))
    # the same ratings given as response sets or forced choices give the same Omega, hence the same MSE and C^tau
    judge = np.array([[1.0, 0.0]])
    assert indeterminacy.mse(omega[None, :], judge) == pytest.approx((2 / 3) ** 2)
    sweep = indeterminacy.threshold_sweep(omega[None, :], judge, option=1, taus=np.array([0.5]))
    assert sweep.consistency[0] == 0.0 and sweep.bias[0] == -1.0  # humans find b reasonable, the judge does not


def test_a_response_set_is_taken_as_given_and_beta_fills_in_for_forced_choices_only():
    omega = indeterminacy.omega([("a", "b"), None], ["a", "b"], beta=0.3)
    # the first judgment's set {a, b}; the second is a forced b: [beta, 1]
    np.testing.assert_allclose(omega, [(1 + 0.3) / 2, (1 + 1) / 2])
    assert np.isnan(indeterminacy.omega([None], [None], 0.0)).all()


def swap(label):
    return {"a": "b", "b": "a"}.get(label, label)


def test_omega_and_its_metrics_do_not_depend_on_which_system_is_called_a():
    rng = np.random.default_rng(3)
    units = [[str(c) for c in rng.choice(["a", "b", "tie"], size=3, p=[0.5, 0.3, 0.2])] for _ in range(40)]
    judge = [str(rng.choice(["a", "b", "tie"])) for _ in range(40)]
    for beta in (0.0, 0.25, 0.6):
        h = np.array([indeterminacy.omega([None] * 3, u, beta) for u in units])
        h_swapped = np.array([indeterminacy.omega([None] * 3, [swap(c) for c in u], beta) for u in units])
        np.testing.assert_allclose(h_swapped, h[:, ::-1])  # relabelling only swaps the entries
        j = np.array([indeterminacy.omega([None], [c], 0.0) for c in judge])
        j_swapped = np.array([indeterminacy.omega([None], [swap(c)], 0.0) for c in judge])
        assert indeterminacy.mse(h, j) == pytest.approx(indeterminacy.mse(h_swapped, j_swapped))
        assert indeterminacy.coverage(h, judge) == indeterminacy.coverage(h_swapped, [swap(c) for c in judge])


def test_beta_hat_and_the_translation_matrix():
    forced = ["b", "b", "b", "a", "a", "tie"]
    sets = [("b",), ("a", "b"), ("a", "b"), ("a",), ("a", "b"), ("a", "b")]
    # P(the other option in the set | forced a or b): b -> 0, 1, 1; a -> 0, 1 => 3 of 5
    assert indeterminacy.beta_hat(forced, sets) == pytest.approx(3 / 5)
    swapped = indeterminacy.beta_hat([swap(f) for f in forced], [tuple(swap(o) for o in s) for s in sets])
    assert swapped == pytest.approx(3 / 5)
    f = indeterminacy.translation_matrix(forced, sets)
    np.testing.assert_allclose(f[:, 0], [1, 0, 0])  # {a}: always forced a
    np.testing.assert_allclose(f[:, 1], [0, 1, 0])  # {b}
    np.testing.assert_allclose(f[:, 2], [0.25, 0.5, 0.25])  # {a, b}: a once, b twice, tie once


def test_agreement_metrics_between_humans_and_a_judge():
    h = np.array([[0.8, 0.5], [0.2, 1.0]])
    j = np.array([[1.0, 0.0], [0.2, 0.8]])
    assert indeterminacy.mse(h, j) == pytest.approx(((0.04 + 0.25) + (0 + 0.04)) / 2)
    p, q = np.array([[0.5, 0.5, 0.0]]), np.array([[0.9, 0.1, 0.0]])
    assert indeterminacy.kl_divergence(p, q) == pytest.approx(
        0.5 * np.log(0.5 / 0.9) + 0.5 * np.log(0.5 / 0.1), rel=1e-4
    )
    assert indeterminacy.js_divergence(p, p) == 0.0
    assert 0 < indeterminacy.js_divergence(p, q) < np.log(2)


def test_coverage_and_hit_rate_are_different_metrics():
    # Coverage (COV_h_hrs): is the judge's choice among the options most humans find reasonable?
    # Hit rate (HR_h_h): does the judge's choice equal the human forced-choice majority?
    h = np.array([[0.8, 0.5], [0.2, 1.0], [1.0, 0.6]])
    human_majority = ["a", "b", "a"]
    judge = ["b", "a", "tie"]
    # unit 1: b has 0.5 >= 0.5, covered; unit 2: a has 0.2, not; unit 3: tie = {a, b}, both >= 0.5, covered
    assert indeterminacy.coverage(h, judge) == pytest.approx(2 / 3)
    assert indeterminacy.hit_rate(human_majority, judge) == 0.0
    assert indeterminacy.hit_rate(["a", "tie", None], ["a", "b", "a"]) == 0.5  # missing units left out


def test_the_tau_grid_prints_as_written():
    assert [str(t) for t in indeterminacy.TAUS[:2]] == ["0.05", "0.1"]
    assert 0.5 in indeterminacy.TAUS.tolist() and str(indeterminacy.TAUS[9]) == "0.5"


def test_decision_consistency_and_estimation_bias():
    h = np.array([[0.8, 0.5], [0.3, 0.9], [0.6, 0.6]])
    j = np.array([[0.9, 0.1], [0.6, 0.5], [0.4, 0.7]])
    sweep = indeterminacy.threshold_sweep(h, j, option=0, taus=np.array([0.5]))
    # tau .5: humans [1, 0, 1], judge [1, 1, 0] -> consistency 1/3, bias 2/3 - 2/3 = 0
    assert sweep.consistency[0] == pytest.approx(1 / 3) and sweep.bias[0] == pytest.approx(0.0)
