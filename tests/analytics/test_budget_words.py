"""The budget planner's words as a visual check read them: plurals that agree with their counts ("up to 1 pair",
"1 of 3 needs") and money with its thousands grouped."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.template.loader import render_to_string

from analytics.budgeting import DEFAULTS
from tests.selection.test_planned_looks import looked  # noqa: F401 (a fixture)


def panel(pay: str, per_assignment: int, more_items: list[str], cost: str) -> str:
    result = {
        "request": {"power": 0.8, "alpha": 0.05, "max_items": 2000},
        "seconds_per_judgment": 30,
        "pace_measured": False,
        "pay_per_assignment": pay,
        "judgments_per_assignment": per_assignment,
    }
    advised = {
        "win_percent": "55 %",
        "pairs": 3,
        "items": 1200,
        "raters": [1],
        "judgments": 1200,
        "assignments": 1200,
        "cost": Decimal(cost),
        "hours": 10.0,
        "more_items": more_items,
    }
    budget = {
        "plan": type("P", (), {"created": None})(),
        "result": result,
        "defaults": DEFAULTS,
        "advice": "Label new items.",
        "advised": [advised],
        "no_plan": "",
        "rows": [],
        "totals": [],
        "pairs": 3,
    }
    return render_to_string("analytics/_budget.html", {"budget": budget, "study": type("S", (), {"pk": 1})()})


@pytest.mark.django_db
def test_one_pair_per_assignment_and_one_pair_short_read_in_the_singular_and_money_is_grouped():
    html = panel("1200.50", 1, ["sys-a vs sys-b"], "1440600.00")
    assert "1,200.50 per assignment of up to 1 pair." in html
    assert "1 of 3 needs more items than the pool holds" in html
    assert "<td>1,440,600.00</td>" in html
    html = panel("1.20", 4, ["sys-a vs sys-b", "sys-a vs sys-c"], "1440.00")
    assert "1.20 per assignment of up to 4 pairs." in html
    assert "2 of 3 need more items than the pool holds" in html and "<td>1,440.00</td>" in html


@pytest.mark.django_db
def test_the_no_plan_words_name_the_split_error_from_the_control_in_force_not_from_the_requested_rate(looked):  # noqa: F811
    """Three pairs, no pair fitting: "compare fewer system pairs" always, and why it helps (the study-wide rate is
    split fewer ways) only when the control in force is study-wide -- a request at a rate below the study's own
    under per-pair control is not a split."""
    from analytics.hooks import budget_panel
    from analytics.models import BudgetPlan
    from annotation.studies import lifecycle

    rows = [
        {
            "pair": pair,
            "margin": 0.02,
            "raters": 1,
            "items": None,
            "items_in_pool": 60,
            "judgments": None,
            "assignments": None,
            "cost": None,
            "rater_hours": None,
            "advice": "more items",
            "recommended": False,
            "rho_seen": False,
            "pilot": "nothing",
        }
        for pair in ("sys-a vs sys-b", "sys-a vs sys-c", "sys-b vs sys-c")
    ]
    request = {"power": 0.8, "alpha": 0.001, "max_items": 100}  # below the study's 0.05 whatever the control
    BudgetPlan.objects.create(study=looked, result={"rows": rows, "request": request})
    for control, split in (("per_pair", False), ("study_wide", True)):
        lifecycle.do_update_settings(looked, {"error_control": control}, None)
        panel = budget_panel(looked)
        assert "compare fewer system pairs" in panel["no_plan"]
        assert ("split fewer ways" in panel["no_plan"]) is split
        assert ("split fewer ways" in panel["advised"][0]["no_plan"]) is split
