"""The study-wide error (docs/decisions.md#study-wide-error): a study of several systems holds its decision error
rate across all its pairs (Bonferroni's split, ``selection/core/multiplicity.py``) unless asked to hold it per pair;
the setting goes through the settings form, the live decisions, the budget planner's default and the report."""

from __future__ import annotations

import json
import math
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from analytics import budgeting, presentation
from analytics.populations import Population
from analytics.report.assembly import study_report
from analytics.report.data import admitted, load_rows
from analytics.report.stopping import item_scores, pair_rating_sets
from annotation import setting_ranges
from annotation.errors import ServiceError
from annotation.models import Study
from annotation.studies import creation, lifecycle
from selection.core import decisions, multiplicity
from selection.models import SelectionSettings, error_words
from tests.analytics.conftest import PRD
from tests.annotation.test_views import settings_form
from tests.conftest import shared_rows

ALPHA = 0.05


def three_systems(researcher, name: str = "three") -> Study:
    lines = [
        {"id": f"item-{i}", "input": f"Question {i}?", "outputs": {s: [f"{s} says {i}."] for s in ("x", "y", "z")}}
        for i in range(6)
    ]
    return creation.do_create_study(researcher, name, "".join(json.dumps(x) + "\n" for x in lines).encode(), "t.jsonl")


# --------------------------------------------------------------------------------------------------------------
# PRD, every pair made null: the study-wide chance of any wrong call


def load_prd_humans(folder: Path) -> Study:
    """PRD's 80 questions, its five systems and the human votes only."""
    get_user_model().objects.create_user("prd-owner")
    call_command("load_prd", "--data", str(folder), "--owner", "prd-owner", stdout=StringIO())
    return Study.objects.get(name="prd-vicuna80")


@pytest.fixture(scope="module")
def prd_rows(django_db_setup, django_db_blocker, tmp_path_factory):
    if not (PRD / "generations").is_dir():
        pytest.skip(f"{PRD} is missing: the real data lives in ../shared/data (see its README)")
    folder = tmp_path_factory.mktemp("prd-humans")
    for name in ("generations", "prompts"):
        (folder / name).symlink_to(PRD / name)
    for path in PRD.glob("*-human-reviewer*.jsonl"):
        (folder / path.name).symlink_to(path)
    yield from shared_rows(django_db_blocker, lambda: load_prd_humans(folder))


def first_call(x: np.ndarray, alpha: float, margin: float) -> str:
    """What a plan that stops at the first decision settles on ``x`` -- ``decisions.first_decision``'s rule, the
    sequence on a grid of 500 candidates (the ends reach outwards to the nearest rejected one: coarser is wider)."""
    lower, upper = decisions.betting_confidence_sequence(x, alpha, grid=500)
    for low, high in zip(lower.tolist(), upper.tolist(), strict=True):
        call = decisions.decide(low, high, margin)
        if call != decisions.UNDECIDED:
            return call
    return decisions.UNDECIDED


@pytest.mark.slow(seconds=12)
def test_on_prd_made_null_the_study_wide_control_holds_alpha_where_per_pair_does_not(db, prd_rows):
    """PRD's five systems and 80 items, every pair made null by mirroring each item's score (x -> 1 - x, the item's
    votes together) with chance 1/2, items in a random order, the decision checked after every item and the pair
    stopped at its first: any direction decided is a wrong call. Held study-wide (each pair at 0.05 / 10) the chance
    that any of the ten pairs is called wrongly stays within alpha (two binomial standard errors of the replication
    count); held per pair it exceeds alpha -- beyond two standard errors over the ten pairs, and from five pairs on
    (the first k pairs of the study in name order, k = 5 .. 10)."""
    study = Study.objects.get(pk=prd_rows.pk)
    rows = admitted(load_rows(study), Population())  # the study's people, as the report and simulate read them
    comparisons = list(study.comparisons.select_related("system_a", "system_b"))
    scores = [item_scores(pair_rating_sets(rows, (c.system_a.name, c.system_b.name)))[0] for c in comparisons]
    assert len(scores) == multiplicity.pair_count(5) == 10 and all(len(s) == 80 for s in scores)
    settings = study.selection_settings
    assert settings.decision_alpha == ALPHA and settings.error_control == "auto"
    alphas = {}
    for control in ("per_pair", "study_wide"):
        settings.error_control = control
        alphas[control] = settings.pair_alpha()
    assert alphas == {"per_pair": ALPHA, "study_wide": ALPHA / 10}
    # studies replayed: per pair enough to see five pairs' chance (about 1 - (1 - 0.02)^5 = 0.1) above 0.05 by more
    # than its own SE (0.02); study-wide enough for alpha + 2 SE (0.094) to hold a chance near 10 x 0.002
    rounds = {"per_pair": 200, "study_wide": 100}
    rng = np.random.default_rng(42)
    wrong = {control: np.zeros((rounds[control], len(scores)), dtype=bool) for control in alphas}
    for control, alpha in alphas.items():
        for r in range(rounds[control]):
            for j, pair_scores in enumerate(scores):
                drawn = rng.permutation(pair_scores)
                null = np.where(rng.random(len(drawn)) < 0.5, drawn, 1 - drawn)
                wrong[control][r, j] = first_call(null, alpha, settings.decision_margin) in ("a", "b")

    def se(n: int) -> float:  # the binomial SE at alpha of n replications
        return math.sqrt(ALPHA * (1 - ALPHA) / n)

    assert wrong["study_wide"].any(axis=1).mean() <= ALPHA + 2 * se(rounds["study_wide"])
    per_pair = [wrong["per_pair"][:, :k].any(axis=1).mean() for k in range(1, 11)]  # the first k pairs
    assert per_pair[-1] > ALPHA + 2 * se(rounds["per_pair"])  # ten pairs: some pair is called wrongly far too often
    assert per_pair[4] > ALPHA  # already with five pairs (and so with more: the chance grows with the pairs)
    assert wrong["per_pair"].mean() <= ALPHA + 2 * se(wrong["per_pair"].size)  # while each pair alone holds alpha


# --------------------------------------------------------------------------------------------------------------
# The setting


def test_the_pair_alpha_follows_the_control_and_the_systems_compared(researcher, study):
    two = study.selection_settings
    assert two.error_control == "auto" and two.compared_pairs() == 1
    assert (two.control_in_force(), two.pair_alpha()) == ("per_pair", ALPHA)  # one pair: the same either way
    three = three_systems(researcher).selection_settings
    assert (three.control_in_force(), three.pair_alpha()) == ("study_wide", pytest.approx(ALPHA / 3))
    three.error_control = "per_pair"
    assert (three.control_in_force(), three.pair_alpha()) == ("per_pair", ALPHA)
    # split over the pairs the study decides, not every pair its systems could form (e.g. two against a baseline)
    three.study.comparisons.order_by("pk").first().delete()
    three.error_control = "auto"
    assert (three.compared_pairs(), three.control_in_force(), three.pair_alpha()) == (
        2,
        "study_wide",
        pytest.approx(ALPHA / 2),
    )
    assert error_words(ALPHA, ALPHA / 10, "study_wide") == "study-wide error 0.05 across 10 pairs, 0.005 a pair"
    assert error_words(ALPHA, ALPHA / 3, "study_wide") == "study-wide error 0.05 across 3 pairs, 0.0167 a pair"
    assert error_words(ALPHA, ALPHA, "per_pair") == "error 0.05 per pair"


def test_the_setting_round_trips_through_the_settings_form(researcher_client, study):
    url = reverse("study_settings", args=[study.pk])
    page = researcher_client.get(url).content.decode()
    assert "Error rate holds for" in page and 'name="error_control"' in page
    assert all(f'value="{control}"' in page for control in multiplicity.CONTROLS)
    for control in ("study_wide", "per_pair", "auto"):
        assert researcher_client.post(url, settings_form(error_control=control)).status_code == 302
        assert SelectionSettings.objects.get(study=study).error_control == control
    refused = researcher_client.post(url, settings_form(error_control="bonferroni", decision_alpha=0.6))
    assert refused.status_code == 200
    errors = refused.context["form"].errors
    assert sorted(errors) == ["decision_alpha", "error_control"]
    assert errors["error_control"] == ["Select a valid choice. bonferroni is not one of the available choices."]
    [alpha] = errors["decision_alpha"]
    assert setting_ranges.describe("decision_alpha") == "a number from 0.001 to 0.5"
    assert alpha.startswith("Must be a number from 0.001 to 0.5")
    assert SelectionSettings.objects.get(study=study).error_control == "auto"  # nothing of the refused form stored
    with pytest.raises(ServiceError) as wrong:
        lifecycle.do_update_settings(study, {"error_control": "bonferroni"}, None)
    assert "error_control" in str(wrong.value) and "bonferroni" in str(wrong.value)
    assert SelectionSettings.objects.get(study=study).error_control == "auto"


def test_the_setting_freezes_with_the_plan(study):
    from annotation import study_settings

    assert "error_control" in study_settings.frozen_after_start()


def test_the_budget_planner_plans_each_pair_at_its_share(researcher, study):
    assert budgeting.read_request(study, {}).alpha == ALPHA
    three = three_systems(researcher)
    assert budgeting.read_request(three, {}).alpha == pytest.approx(ALPHA / 3)
    assert budgeting.read_request(three, {"alpha": "0.01"}).alpha == 0.01  # asked for: as asked


# --------------------------------------------------------------------------------------------------------------
# The report and the study page say which control is in force


def test_the_report_decides_each_pair_at_its_share_and_says_so(researcher):
    three = three_systems(researcher)
    report = study_report(three)
    assert [(s.decision_alpha, s.error_control) for s in report.stopping] == [(ALPHA, "study_wide")] * 3
    assert all(s.decision_alpha_pair == pytest.approx(ALPHA / 3) for s in report.stopping)
    data = report.to_json()["stopping"][0]
    assert data["decision_alpha"] == ALPHA and data["error_control"] == "study_wide"
    assert data["decision_alpha_pair"] == pytest.approx(ALPHA / 3)
    note = next(s.note for s in presentation.sections(report) if s.name == "stopping")
    assert "study-wide error 0.05 across 3 pairs, 0.0167 a pair" in note
    lifecycle.do_update_settings(three, {"error_control": "per_pair"}, None)
    per_pair = study_report(Study.objects.get(pk=three.pk))
    assert {(s.decision_alpha_pair, s.error_control) for s in per_pair.stopping} == {(ALPHA, "per_pair")}
    assert "error 0.05 per pair" in next(s.note for s in presentation.sections(per_pair) if s.name == "stopping")


def test_the_study_page_names_the_error_its_decisions_hold(researcher, researcher_client):
    three = three_systems(researcher)
    lifecycle.do_update_settings(three, {"selection_method": "random", "stop_when_decided": True}, None)
    page = researcher_client.get(three.get_absolute_url()).content.decode()
    assert 'data-testid="decision-error">study-wide error 0.05 across 3 pairs, 0.0167 a pair</span>' in page
