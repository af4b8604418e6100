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


def _elo_by_hand(ratings_row, a, b, score, k, order):
    """The ELO update of docs/ratings.md#online-elo written out, for the compiled loops to be checked against."""
    r = list(ratings_row)
    for t in order:
        expected = 1 / (1 + 10 ** ((r[b[t]] - r[a[t]]) / 400))
        update = (k[t] if len(k) > 1 else k[0]) * (score[t] - expected)
        r[a[t]] += update
        r[b[t]] -= update
    return r


def test_each_bootstrap_round_is_elo_over_its_own_draws_in_the_order_drawn():
    from analytics.core import elo_loops

    rng = np.random.default_rng(3)
    n, systems, rounds = 200, 6, 4
    a = rng.integers(0, systems, n)
    b = (a + rng.integers(1, systems, n)) % systems
    score = rng.choice([0.0, 0.5, 1.0], n)
    index = rng.integers(0, n, size=(rounds, 300)).astype(np.int32)
    codes = ratings.battle_codes(a, b, score)
    for k in (np.array([4.0]), ratings.separability_k(rng.uniform(0, 1, n))):
        got = np.full((rounds, systems), 1000.0)
        battles = codes[:, None] if len(k) == 1 else np.column_stack([codes, k.view(np.uint64)])
        elo_loops.resampled_rounds(got, battles, float(k[0]), index, np.log(10) / 400)
        for r in range(rounds):
            np.testing.assert_allclose(
                got[r], _elo_by_hand([1000.0] * systems, a, b, score, k, index[r]), rtol=0, atol=1e-9
            )


def test_the_bootstrap_rounds_are_different_zero_sum_resamples():
    rng = np.random.default_rng(5)
    n = 1000
    a = rng.integers(0, 4, n)
    b = (a + 1 + rng.integers(0, 3, n)) % 4
    score = rng.choice([0.0, 0.5, 1.0], n)
    whole = ratings.bootstrap_elo(a, b, score, 4, rounds=8, seed=2)
    assert whole.shape == (8, 4) and np.allclose(whole.sum(axis=1), 4000)  # every round is zero-sum
    assert len({tuple(np.round(r, 6)) for r in whole}) == 8  # the rounds are different resamples
    # a battle that always ends the same way moves the ratings the same way in every round
    one_sided = ratings.bootstrap_elo(np.zeros(50, int), np.ones(50, int), np.ones(50), 2, rounds=5, seed=0)
    np.testing.assert_allclose(
        one_sided, np.tile(ratings.online_elo(np.zeros(50, int), np.ones(50, int), np.ones(50), 2), (5, 1))
    )
    assert ratings.bootstrap_elo(a, b, score, 4, rounds=0).shape == (0, 4)


def test_battle_codes_refuse_scores_that_are_not_halves():
    with pytest.raises(ValueError, match="0, 0.5 or 1"):
        ratings.battle_codes(np.array([0]), np.array([1]), np.array([0.3]))


def test_bradley_terry_on_distinct_outcomes_is_the_fit_on_every_battle():
    from scipy.optimize import minimize
    from scipy.special import expit

    rng = np.random.default_rng(11)
    n, systems = 3000, 5
    strength = np.array([0.0, 0.3, -0.2, 0.8, 0.1])
    a = rng.integers(0, systems, n)
    b = (a + rng.integers(1, systems, n)) % systems
    p = expit(np.log(10) * (strength[a] - strength[b]))
    u = rng.random(n)
    score = np.where(u < 0.1, 0.5, (u < 0.1 + 0.9 * p).astype(float))
    ua, ub, us, counts = ratings.distinct_outcomes(a, b, score, systems)
    assert counts.sum() == n and len(ua) <= systems * (systems - 1) * 3
    rows = {(x, y, s): c for x, y, s, c in zip(ua, ub, us, counts, strict=True)}
    for x, y, s in {(x, y, s) for x, y, s in zip(a, b, score, strict=True)}:
        assert rows[(x, y, s)] == np.sum((a == x) & (b == y) & (score == s))

    def loss(r):  # the likelihood over every battle, minimised directly
        q = np.clip(expit(np.log(10) * (r[a] - r[b])), 1e-15, 1 - 1e-15)
        return -np.sum(score * np.log(q) + (1 - score) * np.log(1 - q))

    direct = minimize(loss, np.zeros(systems), method="BFGS", options={"gtol": 1e-8}).x
    np.testing.assert_allclose(
        ratings.bradley_terry(a, b, score, systems), 1000 + 400 * (direct - direct.mean()), atol=0.05
    )


@pytest.mark.parametrize("per_battle_k", [False, True])
def test_the_compiled_and_the_numpy_loops_give_the_same_ratings(monkeypatch, per_battle_k):
    rng = np.random.default_rng(8)
    n = 3000
    a = rng.integers(0, 7, n)
    b = (a + rng.integers(1, 7, n)) % 7
    score = rng.choice([0.0, 0.5, 1.0], n)
    k = ratings.separability_k(rng.uniform(0, 1, n)) if per_battle_k else 4.0
    results = {}
    for compiled_from in (0, n + 1):
        monkeypatch.setattr(ratings, "COMPILED_FROM", compiled_from)
        results[compiled_from] = (
            ratings.online_elo(a, b, score, 7, k),
            ratings.bootstrap_elo(a, b, score, 7, k, rounds=12, seed=4),
        )
    for compiled, plain in zip(results[0], results[n + 1], strict=True):
        np.testing.assert_allclose(compiled, plain, rtol=0, atol=1e-8)
