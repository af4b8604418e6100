"""The assignment builder's pure part: units per schedule, sampled pairs, display orders."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from annotation.plan import scheduling
from selection.strategies import SelectionContext, get_strategy


def test_random_schedule_gives_each_item_one_system_pair():
    units = scheduling.candidate_units(200, 3, scheduling.RANDOM, random.Random(1))
    assert [u.item for u in units] == list(range(200))
    counts = Counter(u.comparison for u in units)
    assert set(counts) == {0, 1, 2}
    assert all(40 < c < 95 for c in counts.values())  # each ~200/3; binomial sd ~6.7


@pytest.mark.parametrize("name", [scheduling.NO_REPEAT, scheduling.SYMMETRIC])
def test_full_schedules_give_each_item_every_system_pair_once(name):
    units = scheduling.candidate_units(4, 3, name, random.Random(1))
    assert sorted((u.item, u.comparison) for u in units) == [(i, c) for i in range(4) for c in range(3)]


def test_unknown_schedule_is_an_error():
    with pytest.raises(ValueError, match="unknown scheduling"):
        scheduling.candidate_units(1, 1, "sideways", random.Random(0))


def test_one_to_one_pairing_shows_every_sample_once_when_k_equals_n():
    # The paper's protocol (§3.1): P_AB = {(y_A^j, y_B^j)}, j = 1..N — each sample in exactly one pair
    for seed in range(50):
        pairs = scheduling.sample_pairs(5, 5, 5, random.Random(seed))
        assert sorted(a for a, _ in pairs) == list(range(5)) and sorted(b for _, b in pairs) == list(range(5))


def test_one_to_one_pairing_is_a_uniform_random_matching():
    rng = random.Random(3)
    counts = Counter(frozenset(scheduling.sample_pairs(3, 3, 3, rng)) for _ in range(6000))
    assert len(counts) == 6 and all(850 < c < 1150 for c in counts.values())  # 3! matchings, 1000 each, sd ~29


def test_one_to_one_pairing_gives_min_of_n_and_k_pairs():
    pairs = scheduling.sample_pairs(5, 3, 5, random.Random(0))
    assert len(pairs) == 3 and len({a for a, _ in pairs}) == 3 and len({b for _, b in pairs}) == 3
    assert len(scheduling.sample_pairs(5, 5, 2, random.Random(0))) == 2
    assert scheduling.sample_pairs(1, 1, 5, random.Random(0)) == ((0, 0),)
    with pytest.raises(ValueError, match="unknown pairing"):
        scheduling.sample_pairs(2, 2, 2, random.Random(0), "diagonal")


def test_the_grid_shows_fewer_samples_than_the_paper_which_is_why_it_is_not_the_default():
    # Drawing 5 of the 25 grid cells, the expected number of distinct A samples is 5 (1 - C(20,5) / C(25,5))
    expected = 5 * (1 - math.comb(20, 5) / math.comb(25, 5))
    rng = random.Random(1)
    seen = [len({a for a, _ in scheduling.sample_pairs(5, 5, 5, rng, scheduling.GRID)}) for _ in range(4000)]
    assert sum(seen) / len(seen) == pytest.approx(expected, abs=0.03)  # ~3.54 of 5
    assert expected < 3.6


def test_grid_pairs_are_distinct_cells_of_the_k_by_k_grid():
    pairs = scheduling.sample_pairs(3, 3, 5, random.Random(2), scheduling.GRID)
    assert len(pairs) == 5 == len(set(pairs))
    assert all(0 <= a < 3 and 0 <= b < 3 for a, b in pairs)


def test_grid_pairs_are_capped_by_the_grid():
    assert scheduling.sample_pairs(1, 2, 5, random.Random(0), scheduling.GRID) in {((0, 0), (0, 1)), ((0, 1), (0, 0))}
    assert scheduling.sample_pairs(1, 1, 1, random.Random(0), scheduling.GRID) == ((0, 0),)


def test_grid_pairs_are_uniform_over_the_grid():
    rng = random.Random(3)
    counts = Counter(p for _ in range(9000) for p in scheduling.sample_pairs(3, 3, 1, rng, scheduling.GRID))
    assert len(counts) == 9 and all(850 < c < 1150 for c in counts.values())  # expected 1000, sd ~30


def test_symmetric_orders_mirror_between_consecutive_slots():
    base = [True, False, True, True, False]
    slot0 = scheduling.display_orders(base, 0, scheduling.SYMMETRIC, random.Random(0))
    slot1 = scheduling.display_orders(base, 1, scheduling.SYMMETRIC, random.Random(0))
    assert slot0 == base
    assert slot1 == [not b for b in base]


def test_random_orders_are_independent_fair_coins():
    rng = random.Random(4)
    orders = [o for _ in range(2000) for o in scheduling.display_orders([True] * 5, 0, scheduling.RANDOM, rng)]
    assert 4700 < sum(orders) < 5300  # 10000 flips, sd 50


def test_interleave_alternates_system_pairs():
    units = {0: [scheduling.Unit(i, 0) for i in range(3)], 1: [scheduling.Unit(i, 1) for i in range(1)]}
    assert [(u.item, u.comparison) for u in scheduling.interleave(units)] == [(0, 0), (0, 1), (1, 0), (2, 0)]


def test_plans_are_reproducible_from_the_seed():
    def plan(seed):
        rng = random.Random(seed)
        return [scheduling.plan_task(u, 3, 3, 5, rng) for u in scheduling.candidate_units(5, 2, "random", rng)]

    assert plan(7) == plan(7)
    assert plan(7) != plan(8)


def test_random_selection_respects_the_budget_and_is_seeded():
    strategy = get_strategy("random")
    context = SelectionContext(10)
    chosen = strategy.select(context, 4, np.random.default_rng(5))
    assert len(chosen) == 4 == len(set(chosen)) and set(chosen) <= set(range(10))
    assert chosen == strategy.select(context, 4, np.random.default_rng(5))
    assert sorted(strategy.select(context, None, np.random.default_rng(5))) == list(range(10))
    with pytest.raises(ValueError, match="unknown selection method"):
        get_strategy("oracle")
