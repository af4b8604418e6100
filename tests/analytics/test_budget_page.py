"""The budget planner on the settings page and the API: a plan is queued, the worker computes it, and
the page and the API show judgments, assignments and money at the study's pay per assignment -- the numbers the
planner's formula gives."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from analytics import budgeting
from analytics.models import BudgetPlan
from annotation.jobs import run_job
from annotation.models import Job
from annotation.studies import creation
from selection.core import budget
from tests.analytics.test_plan_budget import imported
from tests.conftest import study_jsonl


@pytest.fixture
def pilot(researcher):
    study = creation.do_create_study(researcher, "pilot", study_jsonl(30), "p.jsonl")
    imported(study, "human", ("h1", "h22"))
    study.crowd_settings.pay_per_assignment = Decimal("1.20")
    study.crowd_settings.save()
    return study


def run_budget_jobs() -> int:
    queued = list(Job.objects.filter(kind="budget", status=Job.Status.QUEUED).values_list("pk", flat=True))
    for pk in queued:
        run_job.call(pk)
    return len(queued)


def expected(study, margin: float, raters: int) -> tuple[int, int, Decimal]:
    """Items, assignments and cost from the planner's formula on the pilot's outcomes (each rater's outcome per
    item: a win for the first system unless (n + len(rater)) is a multiple of 3)."""
    outcomes = [[1.0 if (n + len(r)) % 3 else 0.0 for r in ("h1", "h22")] for n in range(30)]
    items = budget.items_needed(
        margin, budget.pilot_of(outcomes).item_variance(raters), 0.05, 0.8, 2000, 200, study.seed
    )
    assert items is not None, "the pilot's margin needs more than 2000 items"
    assignments = math.ceil(items * raters * study.pairs_per_assignment / study.judgments_per_assignment)
    return items, assignments, Decimal("1.20") * assignments


def test_the_settings_page_plans_in_the_background_and_shows_money(client, researcher, pilot):
    client.force_login(researcher)
    url = reverse("study_settings", args=[pilot.pk])
    page = client.get(url).content.decode()
    assert "What a margin costs" in page and 'data-testid="budget-form"' in page
    assert 'data-testid="budget-totals"' not in page  # no plan yet

    bad = client.post(reverse("budget_start", args=[pilot.pk]), {"margins": "0.7", "raters": "1"}, follow=True)
    assert "Budget planner, margins: each margin is a win rate above a half" in bad.content.decode()
    assert not Job.objects.filter(kind="budget").exists()  # a refused request queues nothing

    client.post(reverse("budget_start", args=[pilot.pk]), {"margins": "0.2,0.3", "raters": "1", "power": "0.8"})
    assert run_budget_jobs() == 1
    page = client.get(url).content.decode()
    totals = page.split('data-testid="budget-totals"')[1].split("</table>")[0]
    for margin, win in ((0.2, "70 %"), (0.3, "80 %")):
        items, assignments, cost = expected(pilot, margin, 1)
        row = totals.split(f"<td>{win}</td>")[1].split("</tr>")[0]
        judgments = items * pilot.pairs_per_assignment
        assert f"<td>{judgments:,}</td>" in row and f"<td>{assignments:,}</td>" in row and f"<td>{cost}</td>" in row
    assert "1.20 per assignment" in page and "<svg" in page.split('id="budget"')[1]


def test_the_api_queues_a_plan_and_serves_the_latest(researcher, other_researcher, pilot):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    url = reverse("budget_api", args=[pilot.pk])
    nothing = api.get(url)
    assert nothing.status_code == 200 and nothing.json()["rows"] == [] and nothing.json()["created"] is None
    refused = api.post(url, {"raters": "0"}, format="json")
    assert refused.status_code == 400 and "raters" in refused.json()
    missing = api.post(url, {"pair": ["sys-a", "nobody"]}, format="json")
    assert missing.status_code == 404 and missing.json() == {"pair": ["the study does not compare sys-a with nobody"]}
    queued = api.post(url, {"margins": "0.3", "raters": "1,2"}, format="json")
    assert queued.status_code == 202 and queued.json()["job"]["status"] == "queued"
    assert run_budget_jobs() == 1
    served = api.get(url).json()
    assert served["pay_per_assignment"] == "1.20" and served["job"]["status"] == "done"
    assert [(r["margin"], r["raters"]) for r in served["rows"]] == [(0.3, 1), (0.3, 2)]
    for r in served["rows"]:
        items, assignments, cost = expected(pilot, 0.3, r["raters"])
        assert (r["items"], r["assignments"], Decimal(r["cost"])) == (items, assignments, cost)

    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=other_researcher).key}")
    assert stranger.get(url).status_code == 404 and stranger.post(url, {}, format="json").status_code == 404


def test_the_api_refuses_what_is_not_a_plan_and_queues_nothing(researcher, pilot):
    """A JSON list, an unknown field or a negative seed were once queued (the last crashed the job);
    the GET's lists did not go back in."""
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    url = reverse("budget_api", args=[pilot.pk])
    assert api.post(url, [1, 2], format="json").status_code == 400
    assert api.post(url, {"margin": "0.9"}, format="json").json() == {
        "margin": [
            "not a field of a budget plan; the fields are margins, raters, alpha, power, max_items, rounds, seed, pair"
        ]
    }
    assert api.post(url, {"seed": -1}, format="json").json() == {"seed": ["a whole number from 0 to 4,294,967,295"]}
    assert api.post(url, {"rounds": 2.5}, format="json").json() == {"rounds": ["expected a whole number, not 2.5"]}
    # a NUL in a name (the schema fuzzer's, on PostgreSQL: a 500) is a pair the study does not compare
    assert api.post(url, {"pair": ["sys-a\x00", "sys-b"]}, format="json").status_code == 404
    assert not Job.objects.filter(kind="budget").exists()
    assert (
        api.post(url, {"margins": [0.3], "raters": [1], "pair": ["sys-a", "sys-b"]}, format="json").status_code == 202
    )


def test_the_page_speaks_in_items_and_shows_rho_and_the_advice(client, researcher):
    """60 items with one output per system (N = 5 pairs per assignment, the default), two raters on 30: the
    page shows the items to label, judgments = items x raters (one pair an item), the raters' rho by the one-way
    ANOVA formula and the advice -- one rater per item, new items first. A plan stored before the advice existed
    still renders."""
    study = creation.do_create_study(researcher, "pilot", study_jsonl(60, k=1), "p.jsonl")
    imported(study, "human", ("h1", "h22"))  # a pilot on 30 of the 60 items
    request = budgeting.read_request(study, {"margins": "0.3", "raters": "1,2", "rounds": "20", "max_items": "200"})
    result = budgeting.plan(study, request)
    BudgetPlan.objects.create(study=study, result=result)
    client.force_login(researcher)
    page = client.get(reverse("study_settings", args=[study.pk])).content.decode()
    outcomes = [[1.0 if (n + len(r)) % 3 else 0.0 for r in ("h1", "h22")] for n in range(30)]
    pilot = budget.pilot_of(outcomes)
    assert pilot.rho_items == 30
    advice = page.split('data-testid="budget-advice">')[1].split("</p>")[0]
    assert f"intra-item correlation ρ = {pilot.rho:.2f}" in advice
    assert f"buys {(1 - pilot.rho) / (1 + pilot.rho):.2f} of what a new item buys" in advice
    assert "new items come first: one rater per item" in advice
    one = next(r for r in result["rows"] if r["raters"] == 1)
    assert one["judgments"] == one["items"] * 1 * 1 and one["recommended"] and one["advice"] == budget.NEW_ITEMS
    advised = page.split('data-testid="budget-advised"')[1].split("</table>")[0]
    row = advised.split("<td>80 %</td>")[1].split("</tr>")[0]
    assert f"<td>{one['items']}</td><td>1</td><td>{one['judgments']}</td>" in row
    rows = page.split('data-testid="budget-rows"')[1].split("</table>")[0]
    assert f"{pilot.rho:.2f} (design effect {1 + pilot.rho:.2f})" in rows and "advised: new items" in rows
    # a plan stored before rho and the advice: the page leaves them out
    for r in result["rows"]:
        for key in ("pairs_per_item", "rho_seen", "rho_items", "design_effect", "second_rater_share"):
            r.pop(key)
        r.pop("advice"), r.pop("recommended")
    BudgetPlan.objects.create(study=study, result=result)
    page = client.get(reverse("study_settings", args=[study.pk])).content.decode()
    assert 'data-testid="budget-totals"' in page and 'data-testid="budget-advice"' not in page
