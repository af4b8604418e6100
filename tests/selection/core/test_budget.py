"""The budget planner (selection/core/budget.py): the pilot's variance and intra-item correlation by their formulas,
the design effect, and the promise that matters -- on real PRD votes, the planned number of items reaches the
stated power when the study is run with the decision rule the product uses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from selection.core import budget, decisions
from tests.selection.core.test_decisions import prd_votes


def test_the_pilot_s_variance_and_correlation_follow_one_way_anova():
    assert budget.pilot_of([[1, 1], [0, 0]]) == budget.Pilot(pytest.approx(1 / 3), 1.0)  # raters always agree
    assert budget.pilot_of([[1, 0], [1, 0]]).rho == 0.0  # never agree: clipped at 0
    # groups [1, 1, 0.5] and [0, 0.5, 0]: MSB = 3 * ((5/6 - 1/2)^2 + (1/6 - 1/2)^2) / 1 = 2/3, MSW = (1/6 + 1/6) / 4
    pilot = budget.pilot_of([[1, 1, 0.5], [0, 0.5, 0]])
    msb, msw = 2 / 3, (1 / 6 + 1 / 6) / 4
    assert pilot.rho == pytest.approx((msb - msw) / (msb + 2 * msw))
    assert pilot.outcome_variance == pytest.approx(np.var([1, 1, 0.5, 0, 0.5, 0], ddof=1))
    assert budget.pilot_of([[1], [0], [0.5]]).rho == 1.0  # one rater per item: unseen, taken at the safe end


def test_more_raters_per_item_help_less_the_more_they_agree():
    pilot = budget.Pilot(0.2, 0.4)
    assert pilot.item_variance(1) == 0.2
    assert pilot.item_variance(3) == pytest.approx(0.2 * (1 + 2 * 0.4) / 3)  # design effect 1.8 over 3 raters
    assert budget.Pilot(0.2, 1.0).item_variance(5) == 0.2  # identical raters: a second one adds nothing


def test_beta_scores_have_the_asked_mean_and_variance():
    drawn = budget.beta_scores(0.6, 0.04, 200_000, np.random.default_rng(3))
    assert drawn.mean() == pytest.approx(0.6, abs=0.002) and drawn.var() == pytest.approx(0.04, rel=0.02)


def test_bad_plans_are_refused():
    with pytest.raises(ValueError):
        budget.items_needed(0.0, 0.1)
    with pytest.raises(ValueError):
        budget.pilot_of([[], []])


@pytest.mark.parametrize("pair", [("gpt-4", "vicuna-13b"), ("gpt-3.5", "vicuna-13b")])
def test_the_planned_items_reach_the_stated_power_on_real_votes(pair):
    """The pilot is the pair's own 80 items (3 votes each); the planned n is then checked by running the product's
    decision on n items drawn from those real items, 300 times: it decides for the real winner in >= 80 %."""
    items = prd_votes()[pair]
    scores = np.array([np.mean(v) for v in items])
    if scores.mean() < 0.5:  # the planner speaks of the better system as the first
        scores, items = 1 - scores, [[1 - x for x in v] for v in items]
    pilot = budget.pilot_of(items)
    margin = float(scores.mean() - 0.5)
    n = budget.items_needed(margin, pilot.item_variance(3), power=0.8, max_items=800, rounds=200, seed=1)
    assert n is not None and n > 5
    rng = np.random.default_rng(11)
    runs = 300
    decided = sum(
        bool(decisions.betting_confidence_sequence(rng.choice(scores, n), grid=500)[0][-1] > 0.5) for _ in range(runs)
    )
    assert decided / runs >= 0.8 - 3 * math.sqrt(0.8 * 0.2 / runs)
