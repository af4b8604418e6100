"""Sampling where the LLM judges disagree, with known inclusion probabilities: the disagreement score, the capped
probabilities, and that systematic sampling draws each item with exactly its probability."""

from __future__ import annotations

import numpy as np
import pytest

from selection.core.sampling import active_inclusion, inclusion_probabilities, judge_disagreement, systematic_pps

NAN = np.nan


def test_disagreement_is_four_times_the_variance_of_the_verdicts():
    scores = np.array(
        [
            [1, 1, 1, 1],  # unanimous: 0
            [1, 0, NAN, NAN],  # one judge flips with the order: variance 1/4 -> 1
            [1, 0.5, NAN, NAN],  # a win and a tie: variance 1/16 -> 1/4
            [0.5, 0.5, 0.5, NAN],  # unanimous ties: 0
            [1, 1, 1, 0],  # one of four dissents: mean 3/4, variance 3/16 -> 3/4
            [1, NAN, NAN, NAN],  # one verdict says nothing about disagreement: 1
            [NAN, NAN, NAN, NAN],  # none: 1
        ]
    )
    assert judge_disagreement(scores) == pytest.approx([0, 1, 0.25, 0, 0.75, 1, 1])
    with pytest.raises(ValueError, match="2-D"):
        judge_disagreement(np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        judge_disagreement(np.array([[2.0, 0.0]]))


def test_inclusion_probabilities_are_proportional_capped_at_one_and_sum_to_the_budget():
    # item 0 would get 2 * 10/14 > 1: taken for certain, the other draw spread evenly over four items
    assert inclusion_probabilities(np.array([10.0, 1, 1, 1, 1]), 2) == pytest.approx([1, 0.25, 0.25, 0.25, 0.25])
    assert inclusion_probabilities(np.array([1.0, 3.0]), 1) == pytest.approx([0.25, 0.75])
    assert inclusion_probabilities(np.array([1.0, 2.0, 3.0]), 5) == pytest.approx([1, 1, 1])  # more than there is
    with pytest.raises(ValueError, match="positive"):
        inclusion_probabilities(np.array([1.0, 0.0]), 1)


def test_the_active_design_keeps_a_floor_for_every_item():
    u = np.array([0.0, 0.0, 1.0, 1.0, 0.5, 0.5, 0.0, 0.0])
    pi = active_inclusion(u, 4, uniform_share=0.5)
    # budget x [(1 - s) u / sum(u) + s / N] = 4 x [0.5 u / 3 + 0.5 / 8]
    assert pi == pytest.approx(4 * (0.5 * u / 3 + 0.5 / 8))
    assert pi.sum() == pytest.approx(4) and pi.min() == pytest.approx(0.5 * 4 / 8)
    assert active_inclusion(np.zeros(8), 4) == pytest.approx(np.full(8, 0.5))  # judges agree everywhere: uniform
    assert active_inclusion(u, 4, uniform_share=1.0) == pytest.approx(np.full(8, 0.5))
    with pytest.raises(ValueError, match="uniform share"):
        active_inclusion(u, 4, uniform_share=0.0)


def test_systematic_sampling_draws_each_item_with_its_probability():
    rng = np.random.default_rng(5)
    pi = inclusion_probabilities(np.array([8.0, 1, 1, 2, 2, 3, 3, 4, 0.5, 0.5]), 4)
    assert pi[0] == 1.0 and pi.sum() == pytest.approx(4)
    rounds = 20000
    counts = np.zeros(pi.size)
    for _ in range(rounds):
        chosen = systematic_pps(pi, rng)
        assert chosen.size == 4 and np.unique(chosen).size == 4  # a fixed size, no item twice
        counts[chosen] += 1
    sd = np.sqrt(pi * (1 - pi) / rounds)
    assert np.all(np.abs(counts / rounds - pi) <= 4 * sd + 1e-12)
    with pytest.raises(ValueError, match="whole number"):
        systematic_pps(np.array([0.5, 0.2]), rng)
