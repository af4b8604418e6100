"""Selection strategies: budgets, membership, determinism and the properties each promises."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from selection.core import sampling
from selection.core.diffuse import Dendrogram, ward_linkage


@pytest.fixture(scope="module")
def tree():
    x = np.random.default_rng(7).normal(size=(120, 5))
    return Dendrogram(x, ward_linkage(x))


def test_random_selection_is_seeded_and_without_replacement():
    a = sampling.random_selection(50, 10, np.random.default_rng(1))
    again = sampling.random_selection(50, 10, np.random.default_rng(1))
    assert len(set(a.tolist())) == 10 and a.tolist() == again.tolist()
    assert sorted(sampling.random_selection(5, 10, np.random.default_rng(1)).tolist()) == [0, 1, 2, 3, 4]


def test_proportional_allocation_sums_to_the_budget_and_respects_sizes():
    np.testing.assert_array_equal(sampling.proportional_allocation(np.array([50, 30, 20]), 10), [5, 3, 2])
    np.testing.assert_array_equal(sampling.proportional_allocation(np.array([1, 1, 98]), 3), [0, 0, 3])
    counts = sampling.proportional_allocation(np.array([2, 2, 2]), 10)
    np.testing.assert_array_equal(counts, [2, 2, 2])


def test_cluster_stratified_selection_follows_the_allocation(tree):
    chosen = sampling.cluster_stratified_selection(tree, 20, np.random.default_rng(3), n_strata=4)
    assert len(chosen) == 20 == len(set(chosen.tolist()))
    labels = tree.labels(4)
    sizes = np.array([np.sum(labels == k) for k in range(1, 5)])
    quota = 20 * sizes / sizes.sum()
    got = Counter(labels[chosen].tolist())
    # randomised rounding: each stratum gets the floor or the ceiling of its proportional quota
    assert all(np.floor(q) <= got.get(k, 0) <= np.ceil(q) for k, q in zip(range(1, 5), quota, strict=True))


def test_cluster_stratified_sampling_is_unbiased(tree):
    """Every item has (close to) the same chance of selection: budget / n."""
    counts = np.zeros(tree.n)
    for s in range(400):
        counts[sampling.cluster_stratified_selection(tree, 30, np.random.default_rng(s))] += 1
    assert abs(counts.mean() / 400 - 30 / 120) < 1e-9
    assert counts.min() / 400 > 0.10 and counts.max() / 400 < 0.45  # expected 0.25, proportional rounding


def test_separability_weight_matches_the_sep_elo_logistic():
    assert sampling.separability_weight(np.array([0.4]))[0] == pytest.approx(1.0)
    assert sampling.separability_weight(np.array([0.0]))[0] * 4 == pytest.approx(0.66538, abs=1e-5)
    assert sampling.separability_weight(np.array([1.0]))[0] * 4 == pytest.approx(7.78722, abs=1e-5)


def test_weighted_selection_prefers_heavy_items_and_skips_zero_weights():
    weights = np.array([0.0, 1.0, 1.0, 8.0])
    counts = Counter()
    for s in range(2000):
        counts.update(sampling.weighted_selection(weights, 1, np.random.default_rng(s)).tolist())
    assert 0 not in counts and counts[3] > 4 * counts[1]
    assert sorted(sampling.weighted_selection(weights, 10, np.random.default_rng(0)).tolist()) == [1, 2, 3]


def test_value_stratified_selection_takes_equal_counts_per_bin():
    values = np.concatenate([np.full(10, 0.05), np.full(10, 0.3), np.full(10, 0.6), np.full(10, 0.95)])
    chosen = sampling.value_stratified_selection(values, 8, np.random.default_rng(0), bins=4)
    assert Counter(np.round(values[chosen], 2).tolist()) == {0.05: 2, 0.3: 2, 0.6: 2, 0.95: 2}


def test_randomised_allocation_is_exact_in_expectation():
    sizes = np.array([50, 30, 13, 7, 1, 1, 1])
    rng = np.random.default_rng(0)
    draws = np.array([sampling.proportional_allocation(sizes, 10, rng) for _ in range(4000)])
    assert (draws.sum(axis=1) == 10).all() and (draws <= sizes).all()
    np.testing.assert_allclose(draws.mean(axis=0), 10 * sizes / sizes.sum(), atol=0.03)


# ---- stratified sampling over bands of the judges' score


def test_strata_keep_equal_scores_together_and_come_in_order():
    f = np.array([0.0, 0.0, 0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 1.0, 1.0, 0.25])
    strata = sampling.judge_strata(f, 3)
    for value in np.unique(f):
        assert len(set(strata[f == value])) == 1
    order = np.argsort(f, kind="stable")
    assert np.all(np.diff(strata[order]) >= 0) and strata.max() == 2
    assert set(sampling.judge_strata(np.full(5, 0.5), 4)) == {0}  # one score: one stratum
    assert [sampling.strata_count(n) for n in (4, 10, 20, 40, 200)] == [2, 2, 4, 5, 5]


def test_proportional_allocation_gives_each_stratum_its_share_and_at_least_two():
    from selection.core.sampling import stratified_allocation

    assert list(stratified_allocation(np.array([40, 40, 20]), 10)) == [4, 4, 2]
    # a small stratum keeps its minimum of two; the rest follows the sizes
    assert list(stratified_allocation(np.array([90, 5, 5]), 10)) == [6, 2, 2]
    # never more than a stratum holds, and the budget is spent
    counts = stratified_allocation(np.array([3, 50, 50]), 60)
    assert counts[0] <= 3 and counts.sum() == 60
    with pytest.raises(ValueError, match="need at least 6 draws"):
        stratified_allocation(np.array([10, 10, 10]), 5)


def test_neyman_allocation_follows_size_times_spread():
    from selection.core.sampling import stratified_allocation

    # N_h S_h = (50 * 0.1, 50 * 0.4) = (5, 20): 20 draws split 1 : 4
    assert list(stratified_allocation(np.array([50, 50]), 20, spread=np.array([0.1, 0.4]))) == [4, 16]
    # (5, 20, 0.5 floored to 0.05 * 50 = 2.5): shares (3.64, 14.55, 1.82) -> the third is raised to 2, the others
    # share the 18 left 1 : 4
    assert list(stratified_allocation(np.array([50, 50, 50]), 20, spread=np.array([0.1, 0.4, 0.0]))) == [4, 14, 2]


def test_a_stratified_draw_takes_each_item_with_its_stated_probability():
    from selection.core.sampling import stratified_draw

    strata = np.array([0] * 10 + [1] * 30)
    counts = np.array([3, 6])
    rng = np.random.default_rng(4)
    hits = np.zeros(40)
    for _ in range(4000):
        chosen, pi = stratified_draw(strata, counts, rng)
        assert len(chosen) == 9 and len(set(chosen.tolist())) == 9
        hits[chosen] += 1
    np.testing.assert_allclose(pi, np.where(strata == 0, 0.3, 0.2))
    np.testing.assert_allclose(hits / 4000, pi, atol=0.03)


def test_judge_stratified_selection_cuts_the_judges_scores_into_bands():
    from selection.core.sampling import judge_stratified_selection

    rng = np.random.default_rng(5)
    f = np.round(rng.random(64) * 4) / 4  # five distinct scores, as the mean of a few verdicts gives
    chosen, strata, pi = judge_stratified_selection(f, 20, rng)
    assert len(chosen) == 20 and strata.max() + 1 == 4  # about one band per five labels
    for h in range(4):  # bands are ranges of the score, each with its own share
        members = strata == h
        assert np.ptp(pi[members]) == 0 and np.sum(np.isin(chosen, np.flatnonzero(members))) >= 2
    assert pi.sum() == pytest.approx(20)
    # Neyman (defensive): more draws where the judges' verdicts are near 1/2
    _, strata_n, pi_n = judge_stratified_selection(f, 20, rng, neyman=True)
    middle, edge = np.abs(f - 0.5) <= 0.25, np.abs(f - 0.5) > 0.25
    assert pi_n[middle].mean() > pi_n[edge].mean()


def test_two_verdicts_an_item_give_every_item_the_same_chance_and_more_give_the_disagreement_design():
    # two verdicts only say agree (u = 0), a win against a tie (1/4) or a win against a loss (1)
    two = np.array([[1.0, 1.0], [1.0, 0.5], [1.0, 0.0], [0.0, 0.0], [0.5, 0.5], [1.0, np.nan]])
    assert sampling.too_few_verdicts(two)
    np.testing.assert_allclose(sampling.disagreement_inclusion(two, 3), np.full(6, 3 / 6))
    # a third verdict on most items: the design of active_inclusion, unequal chances
    three = np.column_stack([two, [1.0, 1.0, 0.0, 0.0, 0.0, np.nan]])
    assert not sampling.too_few_verdicts(three)
    np.testing.assert_allclose(
        sampling.disagreement_inclusion(three, 3), sampling.active_inclusion(sampling.judge_disagreement(three), 3)
    )
    assert np.ptp(sampling.disagreement_inclusion(three, 3)) > 0
