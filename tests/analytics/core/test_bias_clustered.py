"""Positional bias clustered by item (analytics/core/bias.py; docs/comparative-assessment.md#positional-bias): the
sign-flip test over items and the Korn-Graubard interval on cases small enough to enumerate by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta, binomtest, t

from analytics.core import bias


def votes(per_item: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(first shown chosen, item) per judgment from (first-shown wins, second-shown wins) per item."""
    first = [c for f, s in per_item for c in [True] * f + [False] * s]
    items = [i for i, (f, s) in enumerate(per_item) for _ in range(f + s)]
    return np.array(first, dtype=bool), np.array(items)


def test_the_sign_flip_p_value_by_enumeration():
    # three items whose two raters both chose the first shown (d = 2 each), one item with one rater for it (d = 1)
    # and one split item (d = 0): S = 7; of the 2^4 flips of the non-zero items only all + and all - reach |S| >= 7
    result = bias.positional_bias(*votes([(2, 0), (2, 0), (2, 0), (1, 0), (1, 1)]))
    assert (result.n, result.first_chosen, result.items) == (9, 8, 5)
    assert result.p_value == pytest.approx(2 / 16)
    # the votes taken as independent: 8 of 9 has two-sided binomial p = 2 (C(9,8) + C(9,9)) / 2^9 = 20 / 512 < 0.05
    assert binomtest(8, 9).pvalue == pytest.approx(20 / 512)
    # d = (3, 3, -1): S = 5; |S*| >= 5 for (+,+,-), (+,+,+) and their negatives: 4 of 8
    assert bias.sign_flip_p([3, 3, -1]) == pytest.approx(4 / 8)
    assert bias.sign_flip_p([0, 0]) == 1.0 and bias.sign_flip_p([2, -2]) == 1.0


@pytest.mark.parametrize(("k", "n"), [(13, 16), (9, 16), (0, 5), (30, 40), (20, 40)])
def test_one_judgment_per_item_is_the_exact_binomial_test(k, n):
    result = bias.positional_bias(np.arange(n) < k, np.arange(n))
    assert result.p_value == pytest.approx(binomtest(k, n, 0.5).pvalue)


def test_raters_who_agree_count_as_one():
    # every item's four raters agree: the same p-value as one rater per item, not the far smaller one of 4 x the votes
    first = np.arange(12) < 9
    single = bias.positional_bias(first, np.arange(12))
    four = bias.positional_bias(np.repeat(first, 4), np.repeat(np.arange(12), 4))
    assert four.p_value == pytest.approx(single.p_value) == pytest.approx(binomtest(9, 12).pvalue)
    assert binomtest(36, 48).pvalue < single.p_value / 10
    assert four.high - four.low >= single.high - single.low


def test_a_judge_in_both_orders():
    # a judge that prefers the same output in both orders picks the first shown once per item: no bias at all
    consistent = bias.positional_bias(*votes([(1, 1)] * 10))
    assert consistent.rate == 0.5 and consistent.p_value == 1.0
    # one that always picks the first shown, on 6 items in both orders: d = 2 six times, p = 2 / 2^6
    biased = bias.positional_bias(*votes([(2, 0)] * 6))
    assert biased.p_value == pytest.approx(2 / 64)


def test_the_korn_graubard_interval_by_hand():
    # one judgment per item, r = k / m: V = m / (m - 1) * m r (1 - r) / m^2, so n* = r (1 - r) / V = m - 1 (below m),
    # the degrees-of-freedom factor (t_{m-1} / t_{m-1})^2 = 1, and Clopper-Pearson at r (m - 1) of m - 1
    m, k = 40, 30
    result = bias.positional_bias(np.arange(m) < k, np.arange(m))
    x, n_star = 0.75 * (m - 1), m - 1
    assert result.low == pytest.approx(beta.ppf(0.025, x, n_star - x + 1))
    assert result.high == pytest.approx(beta.ppf(0.975, x + 1, n_star - x))
    # the same items each judged alike by 3 raters: V is unchanged, so n* = m - 1 again (not 3 m), shrunk by
    # (t_{3m-1} / t_{m-1})^2 for the m - 1 degrees of freedom
    tripled = bias.positional_bias(np.repeat(np.arange(m) < k, 3), np.repeat(np.arange(m), 3))
    n_star = (m - 1) * (t.ppf(0.975, 3 * m - 1) / t.ppf(0.975, m - 1)) ** 2
    x = 0.75 * n_star
    assert tripled.low == pytest.approx(beta.ppf(0.025, x, n_star - x + 1))
    assert tripled.high == pytest.approx(beta.ppf(0.975, x + 1, n_star - x))
    # every judgment for the first shown: V = 0, n* = the votes, and Clopper-Pearson's (alpha / 2)^(1 / n) below 1
    all_first = bias.positional_bias(np.ones(10, dtype=bool), np.arange(10))
    assert all_first.high == 1.0 and all_first.low == pytest.approx(0.025 ** (1 / 10))


def test_one_item_or_none():
    one = bias.positional_bias(np.array([True, True, False]), np.array([7, 7, 7]))
    assert (one.low, one.high, one.items) == (0.0, 1.0, 1)  # one item says nothing of how items vary
    empty = bias.positional_bias(np.array([], dtype=bool), np.array([], dtype=int))
    assert empty.n == 0 and math.isnan(empty.p_value)
    with pytest.raises(ValueError, match="one item per judgment"):
        bias.positional_bias(np.array([True, False]), np.array([1]))
