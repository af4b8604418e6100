"""Eq. 4 and Eq. 7 on the cases the paper describes, and the bins of Fig. 6 and Fig. 8."""

from __future__ import annotations

import math

import numpy as np

from analytics.core.consistency import (
    equal_count_bins,
    equal_width_bins,
    preference_strength,
    rating_set_consistency,
    summarize_bins,
)


def test_the_cases_of_eq_4():
    assert rating_set_consistency([-1, 1, -1, -1, -1]) == 0.0  # mixed signs
    assert rating_set_consistency([0, 0, 0, 0, 0]) == 0.0  # all ties
    assert rating_set_consistency([1, 1, 1, 1, 1]) == 1.0  # all one side
    assert rating_set_consistency([-1, -1, -1, -1, -1]) == 1.0
    assert rating_set_consistency([1, 1, 0, 1, 0]) == 0.6  # ties dilute
    assert math.isnan(rating_set_consistency([]))
    # one rating cannot be consistent or inconsistent with anything: Eq. 4 is undefined for n = 1
    assert math.isnan(rating_set_consistency([1])) and math.isnan(rating_set_consistency([0]))


def test_preference_strength_is_the_signed_mean():
    assert preference_strength([1, 1, 0, -1, 1]) == 0.4
    assert preference_strength([-1, -1, 0, 0, 0]) == -0.4


def test_equal_width_bins_cover_the_observed_range():
    index, edges = equal_width_bins(np.array([0.0, 0.1, 0.5, 0.74, 0.76, 1.0, np.nan]), 4)
    assert index.tolist() == [0, 0, 2, 2, 3, 3, -1]
    np.testing.assert_allclose(edges, [0, 0.25, 0.5, 0.75, 1.0])


def test_equal_count_bins_split_evenly():
    values = np.arange(10, dtype=float)[::-1]
    index = equal_count_bins(values, 5)
    assert np.bincount(index).tolist() == [2, 2, 2, 2, 2]
    assert index[values == 0][0] == 0 and index[values == 9][0] == 4


def test_bin_summaries_have_means_and_standard_errors():
    x = np.array([0.1, 0.2, 0.8, 0.9])
    y = np.array([0.0, 0.4, 1.0, 0.6])
    [low, high] = summarize_bins(x, y, np.array([0, 0, 1, 1]), 2)
    assert (low.count, low.mean, high.mean) == (2, 0.2, 0.8)
    assert low.se == np.std([0.0, 0.4], ddof=1) / np.sqrt(2)
    assert low.histogram == {0.0: 1, 0.4: 1}
