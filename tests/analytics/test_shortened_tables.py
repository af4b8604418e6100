"""Two tables from a visual check of the pages that said nothing useful: the budget planner's advised plan when no
pair's pool holds enough items (a row of dashes per margin, now a sentence saying what to change), and the report's
positional bias with hundreds of one-vote raters (the page now lists a rater on their own from ten non-tie choices
and says how many it left out; the CSV and the JSON keep every rater)."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.urls import reverse

from analytics import budgeting, stored
from analytics.models import BudgetPlan
from analytics.populations import Population
from analytics.presentation import MIN_RATER_VOTES
from annotation.rating import imports
from annotation.studies import creation
from tests.analytics.test_plan_budget import imported
from tests.conftest import study_jsonl


def advised_panel(client, study) -> str:
    page = client.get(reverse("study_settings", args=[study.pk])).content.decode()
    return page.split('id="budget"')[1].split("</section>")[0]


def test_no_plan_that_fits_says_what_to_change_instead_of_dashes(client, researcher):
    """30 items, a pilot of two people on all of them. At a margin of 0.02 (a 52 % win rate) no plan of at most 10
    items can tell the systems apart, so every row of the plan needs more items than it looked at: the page says so
    and names the ways out. With a margin of 0.45 (95 %) planned too, that margin has a plan and the 52 % row says in
    words why it has none."""
    study = creation.do_create_study(researcher, "tight", study_jsonl(30), "t.jsonl")
    imported(study, "human", ("h1", "h22"))
    request = budgeting.read_request(study, {"margins": "0.02", "raters": "1,3", "rounds": "20", "max_items": "10"})
    result = budgeting.plan(study, request)
    assert {r["items"] for r in result["rows"]} == {None} and {r["advice"] for r in result["rows"]} == {"more items"}
    BudgetPlan.objects.create(study=study, result=result)
    client.force_login(researcher)
    panel = advised_panel(client, study)
    assert 'data-testid="budget-advised"' not in panel  # no table of dashes
    words = panel.split('data-testid="budget-no-plan">')[1].split("</p>")[0]
    pool = result["rows"][0]["items_in_pool"]
    assert (
        "No plan fits: at the win rate planned (52 %), the system pair needs more items than its pool holds with "
        f"1 or 3 raters per item (a pool of {pool} items; each needs more than 10)."
    ) in words
    assert "add items to the study and the budget to rate them, plan for a wider margin" in words
    assert "fewer system pairs" not in words  # the study compares one pair

    wider = budgeting.read_request(study, {"margins": "0.02,0.45", "raters": "1", "rounds": "20", "max_items": "30"})
    result = budgeting.plan(study, wider)
    fits = [r for r in result["rows"] if r["margin"] == 0.45]
    assert fits[0]["recommended"] and fits[0]["items"] <= 30  # a 95 % win rate is told apart within the pool
    BudgetPlan.objects.create(study=study, result=result)
    panel = advised_panel(client, study)
    assert 'data-testid="budget-no-plan"' not in panel
    table = panel.split('data-testid="budget-advised"')[1].split("</table>")[0]
    row = table.split("<td>52 %</td>")[1].split("</tr>")[0]
    assert "—" not in row
    assert (
        'colspan="7"' in row
        and (
            "No plan fits at this win rate: the system pair needs more items than its pool holds. To get a plan, add "
            "items to the study and the budget to rate them, plan for a wider margin (a win rate further from a half "
            "needs fewer items)."
        )
        in row
    )
    assert budgeting.no_plan_at_win_rate_words(1, False) in row  # one home for the words (budgeting)
    assert f"<td>95 %</td><td>{fits[0]['items']}</td><td>1</td>" in table


def test_no_plan_words_for_several_pairs_name_fewer_pairs_and_the_split_error():
    rows = [
        {"pair": p, "margin": m, "raters": r, "items": items, "items_in_pool": pool}
        for p, pool in (("a vs b", 8), ("a vs c", 4))
        for m, items in ((0.1, 40), (0.3, None))
        for r in (1, 2)
    ]
    words = budgeting.no_plan_words(rows, max_items=300, split=True)
    assert words.startswith(
        "No plan fits: at every win rate planned (60 % and 80 %), each of the 2 system pairs needs more items than its "
        "pool holds with 1 or 2 raters per item (pools of 4 to 8 items; the smallest plan needs 40 items)."
    )
    assert words.endswith(
        "or compare fewer system pairs (the study-wide error rate is then split fewer ways, so each pair needs "
        "fewer items)."
    )
    assert "split fewer ways" not in budgeting.no_plan_words(rows, max_items=300, split=False)


def vote(item: int, rater: str, first: bool) -> dict:
    return {
        "id": f"{rater}-{item}",
        "item": f"item-{item}",
        "system_a": "sys-a",
        "sample_a": 0,
        "system_b": "sys-b",
        "sample_b": 0,
        "shown_first": "sys-a",
        "rater": rater,
        "rater_kind": "human",
        "choice": "sys-a" if first else "sys-b",
    }


@pytest.mark.slow(seconds=8)
def test_the_positional_bias_page_lists_raters_with_ten_votes_and_the_csv_and_json_keep_everyone(
    researcher_client, researcher
):
    """Two raters with 12 and exactly 10 non-tie choices, seven with one each: the page lists the people's row and
    the two, and says the seven were left out; the CSV and the stored JSON hold all nine."""
    assert MIN_RATER_VOTES == 10
    study = creation.do_create_study(researcher, "crowd", study_jsonl(12), "c.jsonl")
    lines = [vote(i, "steady", i % 3 != 0) for i in range(12)]
    lines += [vote(i, "boundary", i % 2 == 0) for i in range(10)]
    lines += [vote(i, f"passer-{i}", True) for i in range(7)]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "votes.jsonl")
    stored.do_refresh(study, Population())
    page = researcher_client.get(reverse("report", args=[study.pk])).content.decode()
    section = page.split('data-testid="section-positional-bias"')[1].split("</details>")[0]
    table = section.split("<table")[1].split("</table>")[0]
    names = [re.findall(r"<td[^>]*>([^<]*)</td>", row)[0] for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]]
    assert names == ["all humans", "boundary", "steady"]
    left_out = section.split('data-testid="left-out-positional-bias">')[1].split("</p>")[0]
    assert left_out == (
        "Raters are listed one by one when they made at least 10 non-tie choices: 7 raters with fewer are left out "
        "here (their choices still count in the ‘all humans’ row); the CSV lists every rater."
    )
    assert section.index("left-out-positional-bias") < section.index("<table")  # said above the table
    assert "Showing 3 of" not in section  # the left-out line says it: no second footer
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert "Lower 95\u00a0%" in headers and "Upper 95\u00a0%" in headers  # "%" never wraps onto a line alone
    lead = section.split('<p class="lead">')[1].split("</p>")[0]
    assert re.search(r"interval \d+–\u2060\d+\u00a0%", lead), lead  # nor the upper bound

    download = researcher_client.get(reverse("report_table", args=[study.pk, "positional-bias"]))
    listed = [row["rater"] for row in csv.DictReader(io.StringIO(download.content.decode()))]
    assert sorted(listed) == sorted(["steady", "boundary", *(f"passer-{i}" for i in range(7)), "all humans"])
    report = stored.do_serve(study, Population()).report
    assert sorted(r["rater"] for r in report["positional_bias"]["raters"]) == sorted(listed[:-1])
    assert report["positional_bias"]["populations"]["human"]["n"] == 12 + 10 + 7
