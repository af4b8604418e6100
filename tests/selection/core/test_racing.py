"""Racing across pairs (selection/core/racing.py): the items a pair needs, from the formulas worked by hand, and
which pairs are behind."""

import math

import numpy as np
import pytest

from selection.core.racing import RaceState, behind, items_to_decide, race_state

Z = 1.959963984540054  # Phi^{-1}(0.975)


def test_items_to_decide_direction_from_the_formula():
    # mean 0.7, sd 0.3: (1.96 * 0.3 / 0.2)^2 = 8.64; no margin reachable (gap 0.2 > 0.05)
    assert items_to_decide(0.7, 0.3, 0.05, 0.05) == pytest.approx((Z * 0.3 / 0.2) ** 2)
    assert items_to_decide(0.3, 0.3, 0.05, 0.05) == pytest.approx(8.6436, abs=1e-3)


def test_items_to_decide_equivalence_when_nearer():
    # mean 0.51, sd 0.1, margin 0.05: direction (1.96 * 0.1 / 0.01)^2 = 384.1, equivalence (1.96 * 0.1 / 0.04)^2 = 24.0
    assert items_to_decide(0.51, 0.1, 0.05, 0.05) == pytest.approx((Z * 0.1 / 0.04) ** 2)
    assert items_to_decide(0.51, 0.1, 0.05, 0.0) == pytest.approx((Z * 0.1 / 0.01) ** 2)


def test_items_to_decide_bhatia_davis_spread_and_the_undecidable():
    # no spread given: sqrt(0.8 * 0.2) = 0.4; (1.96 * 0.4 / 0.3)^2 = 27.3
    assert items_to_decide(0.8, None, 0.05, 0.0) == pytest.approx((Z * 0.4 / 0.3) ** 2)
    assert items_to_decide(0.5, 0.2, 0.05, 0.0) == math.inf
    with pytest.raises(ValueError):
        items_to_decide(0.6, 0.2, 0.0, 0.05)


def test_behind_keeps_the_closer_half_and_drops_what_the_pool_cannot_decide():
    states = {
        "clear": RaceState(n=20, mean=0.8, pool=80, sd=0.3),  # needs (1.96*.3/.3)^2 = 3.8: ahead
        "near": RaceState(n=20, mean=0.65, pool=80, sd=0.3),  # needs 15.4: ahead
        "far": RaceState(n=20, mean=0.58, pool=80, sd=0.3),  # needs 54.0: the farther half
        "farther": RaceState(n=20, mean=0.57, pool=80, sd=0.3),  # needs 70.6: the farther half
        "hopeless": RaceState(n=20, mean=0.52, pool=80, sd=0.3),  # needs 864 > 80 (margin 0): behind
        "new": RaceState(n=4, mean=0.5, pool=80, sd=0.3),  # not yet raced
    }
    assert behind(states, 0.05, 0.0) == {"far", "farther", "hopeless"}


def test_behind_odd_count_keeps_the_middle_ahead_and_breaks_ties_by_key():
    states = {k: RaceState(n=10, mean=0.7, pool=50, sd=0.3) for k in (3, 1, 2)}
    assert behind(states, 0.05, 0.0) == {3}  # two of three ahead (ceil), ties in key order


def test_behind_is_empty_when_every_pair_would_be():
    states = {k: RaceState(n=30, mean=0.51, pool=40, sd=0.4) for k in ("x", "y")}
    assert behind(states, 0.05, 0.0) == set()
    assert behind({}, 0.05, 0.0) == set()


class _Stream:
    """A pair's replay as ``race_state`` reads it (``racing.Stream``)."""

    def __init__(self, scores, looks):
        self.open, self.steps, self.pool, self.looks = True, len(scores), 50, looks
        self.scores = np.asarray(scores, dtype=np.float64)


def test_race_state_reads_the_spread_where_the_bound_does_not_hold():
    # prediction-powered observations in [-1, 2] (pi = 1/2): mean 0.8, spread sqrt(((1.8^2) * 2 + (1.2^2) * 3) / 4)
    ppi = race_state(_Stream([-1.0, 2.0, 2.0, -1.0, 2.0], looks=False))
    assert (ppi.n, ppi.pool) == (5, 50) and ppi.mean == pytest.approx(0.8)
    assert ppi.sd == pytest.approx(math.sqrt(2.7))
    # scores in [0, 1] without looks: the betting sequence reads no spread, the Bhatia-Davis bound stands in
    assert race_state(_Stream([1.0, 0.5, 1.0, 0.0], looks=False)).sd is None
    # with looks the phase's own spread: sd of (1, .5, 1, 0) = sqrt((.375^2*2 + .125^2 + .625^2) / 3)
    assert race_state(_Stream([1.0, 0.5, 1.0, 0.0], looks=True)).sd == pytest.approx(math.sqrt(0.6875 / 3))
