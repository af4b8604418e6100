"""The hypergeometric stopping rule (docs/diffuse.md#hypergeometric-stopping-rule, DiffUse Appendix A.2)."""

from __future__ import annotations

import pytest

from selection.core import decisions
from selection.core.stopping import hypergeometric_risk, stopping_status


def test_the_spec_worked_example():
    # sf(7, 500, 250, 10): P(X >= 8) for 10 draws from 500 items of which 250 favour the leader
    assert hypergeometric_risk(500, 10, 8) == pytest.approx(0.0529, abs=5e-5)


def test_risk_matches_the_hypergeometric_tail_computed_by_hand():
    from math import comb

    n_pool, n, k = 40, 6, 5
    tail = sum(comb(20, j) * comb(20, n - j) for j in range(k, n + 1)) / comb(n_pool, n)
    assert hypergeometric_risk(n_pool, n, k) == pytest.approx(tail)


def test_risk_falls_as_the_lead_grows():
    risks = [hypergeometric_risk(500, 10, k) for k in range(5, 11)]
    assert risks == sorted(risks, reverse=True) and risks[-1] < 0.001


def test_nothing_decided_means_full_risk():
    assert hypergeometric_risk(100, 0, 0) == 1.0
    with pytest.raises(ValueError):
        hypergeometric_risk(10, 3, 4)


def test_ties_count_in_n_but_not_in_k_by_default():
    status = stopping_status(wins_a=7, wins_b=1, ties=2, n_pool=500, threshold=0.1)
    assert (status.leader, status.k, status.n) == ("a", 7, 10)
    assert status.risk == pytest.approx(hypergeometric_risk(500, 10, 7))
    lenient = stopping_status(7, 1, 2, 500, 0.1, ties_count_in_n=False)
    assert lenient.n == 8 and lenient.risk < status.risk


def test_a_level_score_is_never_decided():
    status = stopping_status(3, 3, 0, 500, 0.99)
    assert status.leader is None and not decisions.from_hypergeometric(status).decided
