"""The selection simulation (analytics/core/simulation.py): pools drawn from an oracle, success against the pool's
winner, and the iterative reports with their stopping rule."""

from __future__ import annotations

import numpy as np

from analytics.core.simulation import (
    Pool,
    draw_pools,
    iterative_random_report,
    iterative_report,
    majority,
    success_rates,
)


def test_majority():
    assert majority(["a", "b", "a", "tie"]) == "a"
    assert majority(["a", "b", "tie"]) is None
    assert majority([]) is None


def test_simulation_counts_successes_against_the_pool_winner():
    x = np.random.default_rng(0).normal(size=(100, 4))
    oracle = np.array(["a"] * 70 + ["b"] * 30)
    pools = draw_pools(x, oracle, seeds=5)
    assert all(len(p.oracle) == 80 and p.winner == "a" for p in pools)
    everything = {
        "all": lambda pool, budget, rng: np.arange(len(pool.oracle)),
        "only_b": lambda pool, budget, rng: np.flatnonzero(pool.oracle == "b")[:budget],
    }
    rates = success_rates(pools, everything, [10])
    assert rates == {"all": {10: 1.0}, "only_b": {10: 0.0}}


def test_the_iterative_report_separates_success_error_and_inconclusive():
    x = np.random.default_rng(0).normal(size=(200, 4))
    clear = iterative_report(draw_pools(x, np.array(["a"] * 200), seeds=4), risk=0.1)
    assert (clear.success, clear.error, clear.inconclusive) == (1.0, 0.0, 0.0) and clear.mean_annotations < 15
    level = Pool(x, np.array(["a", "b"] * 100))
    coin = iterative_report([level], risk=0.01, budget=20)
    assert coin.inconclusive == 1.0 and coin.success == 0.0


def test_the_random_iterative_baseline_uses_the_same_stopping_rule():
    x = np.random.default_rng(0).normal(size=(200, 4))
    clear = iterative_random_report(draw_pools(x, np.array(["a"] * 200), seeds=3), risk=0.1, min_n=5)
    # all-"a" votes: sf(k-1, 160, 80, k) <= 0.1 first at k = 4, so the first 5 items decide
    assert (clear.success, clear.mean_annotations) == (1.0, 5.0)
    coin = iterative_random_report([Pool(x, np.array(["a", "b"] * 100))], risk=0.01, budget=20)
    # 5, 7, ..., 19 are below the budget of 20, so one more step of two is taken, as Algorithm 1 does
    assert coin.inconclusive == 1.0 and coin.mean_annotations == 21
