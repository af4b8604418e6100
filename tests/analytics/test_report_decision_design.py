"""The report's stopping section reads the study's own decision (docs/decisions.md#group-sequential-looks): with
planned looks, the live plan's stored decision (``selection/hooks.py``, ``group_sequential.standing``) -- not the
continuous betting sequence, which can settle otherwise on the same items -- and it says which design decided."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from analytics.populations import Population
from analytics.report.assembly import compute
from analytics.report.stopping import pair_call
from selection.core import decisions, designs, group_sequential
from selection.models import PairDecision
from tests.selection.test_planned_looks import ALPHA, ITEMS, looked, rate_everything  # noqa: F401 (a fixture)

KEYS = {  # the stopping keys report --json had before the design was named: kept
    "system_a",
    "system_b",
    "leader",
    "decision",
    "win_rate_low",
    "win_rate_high",
    "decision_items",
    "decision_alpha",
    "decision_alpha_pair",
    "error_control",
    "decision_margin",
    "wins_a",
    "wins_b",
    "ties",
    "k",
    "n",
    "pool",
    "risk",
    "risk_beyond_pool",
    "threshold",
    "decided",
    "ties_count_in_n",
    "items",
}


@pytest.mark.slow(seconds=8)
def test_with_planned_looks_the_report_shows_the_live_plans_decision(looked):  # noqa: F811
    rate_everything(looked)
    report = compute(looked)
    stored = {
        (d.comparison.system_a.name, d.comparison.system_b.name): d
        for d in PairDecision.objects.filter(comparison__study=looked).select_related(
            "comparison__system_a", "comparison__system_b"
        )
    }
    assert len(report.stopping) == len(stored) == 3
    differs = 0
    for s in report.stopping:
        live = stored[(s.system_a, s.system_b)]
        assert (s.decision, s.win_rate_low, s.win_rate_high, s.decision_items, s.decision_futile) == (
            live.decision,
            live.low,
            live.high,
            live.items,
            live.stopped,
        )
        assert s.decision_live and s.decision_looks == 5 and "5 planned looks" in s.decision_design
        # the live decision is standing's on the plan's scores; the betting sequence's interval on the same items
        # (what the report showed before) is another one
        look = group_sequential.standing(live.scores, 5, ALPHA, 0.0, pool=ITEMS, futility=0.1)
        assert (look.decision, look.n) == (s.decision, s.decision_items)
        betting = decisions.pair_decision(np.array(live.scores), ALPHA, 0.0)
        differs += (betting.low, betting.high) != (s.win_rate_low, s.win_rate_high)
    assert differs == 3
    # another population (judges, none here) is not the plan's: its decision is computed, never the stored one
    judges = compute(looked, Population(kind="all"))
    assert not any(s.decision_live for s in judges.stopping)
    out = StringIO()
    call_command("report", "--study", looked.name, "--json", stdout=out)
    for s in json.loads(out.getvalue())["stopping"]:
        assert KEYS <= s.keys() and s["decision_looks"] == 5 and s["decision_live"]


def test_without_the_plans_decision_the_looks_are_read_over_the_scores_and_the_betting_sequence_without_looks():
    settings = type("S", (), {"decision_alpha_pair": 0.05, "decision_margin": 0.05})()
    rng = np.random.default_rng([42, 7])
    scores = rng.choice([0.0, 0.5, 1.0], p=[0.2, 0.2, 0.6], size=40)
    planned = pair_call(scores, settings, 4, 0.0, 80)  # type: ignore[arg-type]
    look = group_sequential.standing(scores, 4, 0.05, 0.05, pool=80)
    assert (planned.decision, planned.low, planned.high, planned.n, planned.live) == (
        look.decision,
        look.low,
        look.high,
        look.n,
        False,
    )
    assert look.n == 40 and "4 planned looks at 80 items" in planned.design  # two of the four looks so far
    betting = pair_call(scores, settings, 0, 0.0, 80)  # type: ignore[arg-type]
    assert (betting.decision, betting.n, betting.design) == (
        decisions.pair_decision(scores, 0.05, 0.05).decision,
        40,
        "continuous: anytime-valid confidence sequence",
    )


def test_before_the_plan_looks_one_rater_first_reads_phase_1s_share_of_the_rate_as_the_plan_does():
    """The report's own reading before the live plan has looked: with one rater first the plan's first phase spends
    ``designs.first_share(looks)`` of the pair's rate (selection/hooks.py ``_observe_looks``), so the report does
    too, over the pool it is given (the pair's tasks), and its design says it is the report's reading."""
    settings = type("S", (), {"decision_alpha_pair": 0.05, "decision_margin": 0.0})()
    rng = np.random.default_rng([42, 8])
    scores = rng.choice([0.0, 0.5, 1.0], p=[0.25, 0.15, 0.6], size=48)
    split = pair_call(scores, settings, 4, 0.0, 96, one_first=True)  # type: ignore[arg-type]
    look = group_sequential.standing(scores, 4, 0.05 * designs.first_share(4), 0.0, pool=96)
    assert (split.decision, split.low, split.high, split.n) == (look.decision, look.low, look.high, look.n)
    whole = pair_call(scores, settings, 4, 0.0, 96)  # type: ignore[arg-type]
    assert split.low < whole.low and split.high > whole.high  # a smaller rate: a wider interval at the same look
    assert "4 planned looks at 96 items (the report's reading, phase 1's share" in split.design
    assert "phase 1" not in whole.design


def test_with_no_margin_the_help_and_the_lead_leave_out_equivalence(looked):  # noqa: F811
    from analytics.presentation import sections
    from analytics.sentences import leads
    from annotation.studies import lifecycle

    assert looked.selection_settings.decision_margin == 0.0
    for margin, said in ((0.0, False), (0.05, True)):
        lifecycle.do_update_settings(looked, {"decision_margin": margin}, None)
        report = compute(looked)
        note = next(s.note for s in sections(report) if s.name == "stopping")
        lead = leads(report)["stopping"]
        assert ("'equivalent' within 0.05 of a half, else 'undecided'" in note) is said
        assert ("equivalent' within" in note) is said and ("equivalent within the margin" in lead) is said
        assert "'Decision rule'" in note and lead.startswith("0 of 3 system pairs have a winner")
        assert lead.endswith("and 3 are undecided: only undecided pairs need more judgments.")
