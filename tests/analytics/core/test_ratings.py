"""ELO, sep-ELO and Bradley-Terry: conformance with FastChat's outputs on real votes, and properties."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.core import ratings


def test_online_elo_matches_fastchat_to_a_hundredth(prd_battles):
    a, b, score, systems, reference = prd_battles
    elo = ratings.online_elo(a, b, score, len(systems), k=4.0)
    for name, expected in reference["compute_elo_online_K4"].items():
        assert elo[systems.index(name)] == pytest.approx(expected, abs=0.01), name


def test_bradley_terry_matches_fastchat_to_half_a_point(prd_battles):
    a, b, score, systems, reference = prd_battles
    bt = ratings.bradley_terry(a, b, score, len(systems))
    for name, expected in reference["compute_bt"].items():
        assert bt[systems.index(name)] == pytest.approx(expected, abs=0.5), name


def test_bootstrap_bt_lands_near_fastchats_bootstrap(prd_battles):
    """FastChat seeds its own generator, so only the neighbourhood is reproducible."""
    a, b, score, systems, reference = prd_battles
    samples = ratings.bootstrap_bradley_terry(a, b, score, len(systems), rounds=100, seed=0)
    median = np.median(samples, axis=0)
    for name, expected in reference["bootstrap_bt_100_seed0_median"].items():
        assert median[systems.index(name)] == pytest.approx(expected, abs=5.0), name


def test_the_sep_elo_weight():
    k = ratings.separability_k(np.array([0.0, 0.4, 1.0]), k=4.0, threshold=0.4, alpha=2.0, beta=6.0)
    np.testing.assert_allclose(k, [0.66538, 4.0, 7.78722], atol=5e-6)


def test_sep_elo_with_constant_weight_k_is_elo():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 5, 300), rng.integers(0, 5, 300)
    keep = a != b
    a, b, score = a[keep], b[keep], rng.choice([0.0, 0.5, 1.0], keep.sum())
    plain = ratings.online_elo(a, b, score, 5, k=4.0)
    weighted = ratings.online_elo(a, b, score, 5, k=ratings.separability_k(np.full(keep.sum(), 0.4)))
    np.testing.assert_allclose(plain, weighted)
    assert plain.sum() == pytest.approx(5 * 1000.0)  # ELO is zero-sum


def test_bootstrap_is_seeded_and_its_interval_contains_the_estimate(prd_battles):
    a, b, score, systems, _ = prd_battles
    first = ratings.bootstrap_elo(a, b, score, len(systems), rounds=20, seed=7)
    again = ratings.bootstrap_elo(a, b, score, len(systems), rounds=20, seed=7)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, ratings.bootstrap_elo(a, b, score, len(systems), rounds=20, seed=8))
    bt_point = ratings.bradley_terry(a, b, score, len(systems))
    interval = ratings.summarize(bt_point, ratings.bootstrap_bradley_terry(a, b, score, len(systems), 100, seed=1))
    assert np.all(interval.low <= bt_point) and np.all(bt_point <= interval.high)


def test_ci_ranks():
    low, high = np.array([10.0, 5.0, 0.0]), np.array([12.0, 11.0, 4.0])
    # system 0 and 1 overlap; both are above system 2
    np.testing.assert_array_equal(ratings.ci_ranks(low, high), [1, 1, 3])


def test_win_rates_and_win_ratio():
    a, b, score = np.array([0, 0, 1]), np.array([1, 1, 2]), np.array([1.0, 0.5, 0.0])
    wins, battles = ratings.win_rate_matrix(a, b, score, 3)
    assert wins[0, 1] == 1.5 and wins[1, 0] == 0.5 and battles[0, 1] == 2
    assert wins[2, 1] == 1.0 and battles[1, 2] == 1
    np.testing.assert_allclose(ratings.win_ratio_ranking(a, b, score, 3), [0.75, 0.5 / 3, 1.0])


def test_every_judgment_is_a_battle_by_default():
    index, score = ratings.aggregate_battles(np.array([0, 0, 1]), np.array([1.0, 0.0, 0.5]))
    assert index.tolist() == [0, 1, 2] and score.tolist() == [1.0, 0.0, 0.5]


def test_the_majority_of_a_pair_is_one_battle():
    group = np.array([7, 3, 7, 7, 3, 5])
    score = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.5])
    index, out = ratings.aggregate_battles(group, score, "majority")
    # groups in order of first appearance: 7 (win, win, loss -> win), 3 (loss, win -> level), 5 (tie -> level)
    assert index.tolist() == [0, 1, 5] and out.tolist() == [1.0, 0.5, 0.5]


def test_one_sampled_judgment_per_input_is_seeded_and_uniform():
    group = np.repeat(np.arange(3), 4)
    score = np.tile([1.0, 0.0, 0.0, 0.5], 3)
    index, out = ratings.aggregate_battles(group, score, "one_sampled", seed=4)
    assert [i // 4 for i in index] == [0, 1, 2] and out.tolist() == score[index].tolist()
    assert index.tolist() == ratings.aggregate_battles(group, score, "one_sampled", seed=4)[0].tolist()
    picks = [ratings.aggregate_battles(group, score, "one_sampled", seed=s)[0][0] for s in range(4000)]
    counts = np.bincount(picks, minlength=4)
    assert all(900 < c < 1100 for c in counts)  # 1000 each, sd ~27
    with pytest.raises(ValueError, match="unknown aggregation"):
        ratings.aggregate_battles(group, score, "median")
