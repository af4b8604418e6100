"""What kind of sample a system pair's judged items are (selection.services.SampleDesign) and what the report
estimates from it: the run behind the plan (not a preview), runs stored before their chances were kept, the live
loop, stratified samples judged part-way, and the target of the estimates."""

from __future__ import annotations

import re

import numpy as np
import pytest

from analytics.core import ppi
from analytics.report.assembly import study_report
from annotation.studies import lifecycle
from selection import services
from selection.models import SelectionRun
from selection.strategies import PURPOSIVE, STRATIFIED, UNIFORM, WEIGHTED
from tests.selection.test_judge_selection import _human_votes, judged  # noqa: F401 -- the fixture

pytestmark = pytest.mark.django_db


def _design(study):
    [design] = services.sample_designs(study).values()
    return design


def _entry(study):
    [entry] = study_report(study).win_rate_estimates
    return entry


def test_a_select_run_without_apply_does_not_change_the_pairs_design(judged):  # noqa: F811
    lifecycle.do_update_settings(judged, {"selection_method": "judge-disagreement", "budget": 10}, None)
    comparison = judged.comparisons.get()
    services.do_run_selection(judged, comparison, "diffuse", 5, seed=1)  # a preview: nobody is sent these items
    services.do_run_selection(judged, comparison, "random", 10, seed=99)
    design = _design(judged)
    assert (design.kind, design.method, len(design.chosen), len(design.frame)) == (
        WEIGHTED,
        "judge-disagreement",
        10,
        30,
    )
    assert services.selection_pools(judged) == {comparison.pk: 30}


def test_a_weighted_run_stored_without_its_chances_is_a_census_when_it_chose_everything(judged):  # noqa: F811
    lifecycle.do_update_settings(judged, {"selection_method": "judge-disagreement", "budget": None}, None)
    run = SelectionRun.objects.filter(study=judged).latest("id")
    run.details = {}  # as stored before the chances were kept
    run.save()
    assert _design(judged).kind == UNIFORM  # every candidate chosen: a census, whatever the method
    _human_votes(judged, [f"q{i}" for i in range(12)], lambda item: "x")
    entry = _entry(judged)
    assert entry.design == "uniform" and entry.estimates[0].label == "People alone"


def test_a_sample_stored_without_what_it_was_drawn_from_gets_no_estimate(judged):  # noqa: F811
    lifecycle.do_update_settings(judged, {"selection_method": "judge-disagreement", "budget": 10}, None)
    run = SelectionRun.objects.filter(study=judged).latest("id")
    run.details = {}
    run.save()
    _human_votes(judged, run.items[:6], lambda item: "x")
    entry = _entry(judged)
    assert entry.design == "unrecorded" and entry.estimates == []
    assert "does not record what its items were drawn from" in entry.reason


def test_the_live_loop_is_a_purposive_sample_while_the_study_runs_it(judged):  # noqa: F811
    lifecycle.do_update_settings(judged, {"selection_method": "diffuse-iterative", "budget": 12, "min_n": 4}, None)
    design = _design(judged)
    released = list(judged.tasks.order_by("position").values_list("item_id", flat=True))
    assert (design.kind, design.method, design.candidates) == (PURPOSIVE, "diffuse-iterative", 30)
    assert design.chosen == released and len(design.frame) == 30
    names = dict(judged.items.values_list("id", "external_id"))
    _human_votes(judged, [names[i] for i in released], lambda item: "x")
    entry = _entry(judged)
    assert entry.estimates == [] and entry.labelled == len(released) and entry.description == 1.0
    assert "released cluster representatives" in entry.reason
    # switching the study to random sampling: the pair's items are now a uniform sample, the old loop ignored
    lifecycle.do_update_settings(judged, {"selection_method": "random", "budget": 10}, None)
    assert (_design(judged).kind, _design(judged).method) == (UNIFORM, "random")


def test_a_stratified_sample_is_estimated_by_band_and_weighted_while_a_band_is_short(judged) -> None:  # noqa: F811
    lifecycle.do_update_settings(judged, {"selection_method": "judge-stratified", "budget": 12}, None)
    design = _design(judged)
    assert design.kind == STRATIFIED and len(design.strata) == 30 and len(design.inclusion) == 12
    items = dict(judged.items.values_list("id", "external_id"))
    by_band: dict[int, list[int]] = {}
    for item in design.chosen:
        by_band.setdefault(design.strata[item], []).append(item)
    assert len(by_band) >= 2 and all(len(v) >= 2 for v in by_band.values())

    def winner(item):
        return "x" if int(item[1:]) % 3 else "y"

    # one band judged once only: the band's share cannot be estimated alone, so the report weights by chance
    first, *others = sorted(by_band)
    part = [by_band[first][0]] + [i for h in others for i in by_band[h]]
    _human_votes(judged, [items[i] for i in part], winner)
    [people] = _entry(judged).estimates
    frame = design.frame
    y = np.array([1.0 if winner(items[i]) == "x" else 0.0 for i in frame])
    sampled = np.array([i in part for i in frame])
    pi = np.array([design.inclusion.get(i, 1.0) * len(part) / 12 for i in frame])
    expected = ppi.active_mean(np.where(sampled, y, np.nan), np.full(30, 0.5), pi, sampled, lam=0.0)
    assert people.label.startswith("People alone, weighted (a band has fewer than two")
    assert (people.estimate, people.low, people.high) == pytest.approx((expected.estimate, expected.low, expected.high))
    # every drawn item judged: the stratified mean over the stored bands
    _human_votes(judged, [items[i] for i in by_band[first][1:]], winner)
    [people] = _entry(judged).estimates
    sampled = np.array([i in design.chosen for i in frame])
    strata = np.array([design.strata[i] for i in frame])
    expected = ppi.stratified_mean(np.where(sampled, y, np.nan), strata, sampled)
    assert people.label == f"People alone, band by band ({len(set(design.strata.values()))} bands)"
    assert people.lam is None  # nothing fitted: no judge's weight to show
    entry = _entry(judged)
    assert "The judges chose this sample" in entry.note and entry.drawn == 12
    assert (people.estimate, people.low, people.high) == pytest.approx((expected.estimate, expected.low, expected.high))


def test_the_target_setting_names_these_items_and_their_worth_in_labels(judged):  # noqa: F811
    lifecycle.do_update_settings(
        judged, {"selection_method": "random", "budget": 20, "estimate_target": "these_items"}, None
    )
    chosen = SelectionRun.objects.filter(study=judged).latest("id").items
    _human_votes(judged, chosen[:15], lambda item: "x" if int(item[1:]) % 4 else "y")
    entry = _entry(judged)
    assert entry.target == ppi.THESE_ITEMS and entry.frame == 30
    people, *with_judges = entry.estimates
    assert people.target == ppi.THESE_ITEMS and people.labels_worth == pytest.approx(15)
    assert {row.judge for row in with_judges} == {"judge-x", "judge-y", "all judges"}
    for row in with_judges:
        # for these 30 items a bigger sample also shrinks the finite-population correction: the n' with
        # 1/n' - 1/30 = (1/15 - 1/30) / efficiency
        n_prime = 1 / ((1 / 15 - 1 / 30) / row.efficiency + 1 / 30)
        assert row.labels_worth == pytest.approx(n_prime) and row.target == ppi.THESE_ITEMS
    page = study_report(judged)
    assert page.win_rate_estimates[0].target == "these items"


def test_the_selection_page_shows_each_items_band_for_a_stratified_draw(client, researcher, judged):  # noqa: F811
    from django.urls import reverse

    lifecycle.do_update_settings(judged, {"selection_method": "judge-stratified", "budget": 10}, None)
    design = _design(judged)
    client.force_login(researcher)
    page = client.get(reverse("live_selection", args=[judged.pk])).content.decode()
    assert "<th>Band</th>" in page and "a fixed number was drawn from each band of the LLM judges' mean verdict" in page
    names = dict(judged.items.values_list("id", "external_id"))
    for item in design.chosen:
        assert re.search(rf">{names[item]}</a></td>\s*<td>{design.strata[item] + 1}</td>", page)
