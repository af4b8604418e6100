"""The data manager: every item searched and filtered by its verdicts, and the bulk actions -- send to review, exclude,
re-open -- with an exclusion honoured by every reader of judgments (the report, the review queue, rating sets, the
judges' scores, the preference records, the export, the plan's hand-out and its decisions), audited, by role."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from analytics import curation, preferences, presentation, review
from analytics.models import Adjudication
from analytics.populations import Population
from analytics.report.assembly import study_report
from analytics.report.data import load_rows
from analytics.stored import data_version
from annotation.errors import FieldErrors
from annotation.exchange import exports
from annotation.models import AssignmentTask, AuditEntry, Item, Judgment
from annotation.rating import allocation, imports
from annotation.studies import creation, team
from selection import rating_sets, services
from selection.core import decisions
from selection.models import PairDecision
from tests.analytics.test_review import human, judged, server  # noqa: F401 (fixtures)
from tests.annotation.test_team import client_for
from tests.selection.test_decided_pairs import ITEMS, rate_everything, three  # noqa: F401 (fixture)


def ids(study, *external: str) -> list[int]:
    return [Item.objects.get(study=study, external_id=e).pk for e in external]


def shown(study, **given) -> list[str]:
    systems = list(study.systems.values_list("name", flat=True))
    rows, _ = curation.data_manager(study, curation.Filters.check(given, systems))
    return [r.external_id for r in rows]


# The fixture (tests/analytics/test_review.py): four items; people -- item 0 both sys-a, item 2 one each, item 3 both
# sys-b, item 1 nobody; the judge prefers sys-b on items 0 and 3, sys-a on item 2, and on item 1 whichever is shown
# first. One rater comment, on item 2: "<b>B</b> is clearer".


def test_every_filter_finds_the_items_its_definition_names(judged):  # noqa: F811
    study, _ = judged
    assert shown(study) == ["item-0", "item-1", "item-2", "item-3"]
    assert shown(study, winner="sys-a") == ["item-0"]
    assert shown(study, winner="sys-b") == ["item-3"]
    assert shown(study, winner="tie") == ["item-2"]
    assert shown(study, winner="none") == ["item-1"]  # judged by the judge alone
    assert shown(study, agreement="all") == ["item-0", "item-3"]
    assert shown(study, agreement="some") == ["item-2"]
    assert shown(study, agreement="none") == ["item-1"]
    assert shown(study, agreement="one") == []
    # item 0: the judge against both people; item 2: the judge prefers sys-a, the people are split; item 3 agrees;
    # item 1 has no people's winner to hold the judge to
    assert shown(study, judges="disagree") == ["item-0", "item-2"]
    assert shown(study, judges="agree") == ["item-3"]
    assert shown(study, judges="none") == []
    assert shown(study, flagged="yes") == ["item-0", "item-2"]
    assert shown(study, flagged="no") == ["item-1", "item-3"]
    assert shown(study, comment="CLEARER") == ["item-2"]
    assert shown(study, q="question 3") == ["item-3"]
    assert shown(study, system="sys-a") == ["item-0", "item-1", "item-2", "item-3"]
    assert shown(study, winner="sys-b", agreement="all", flagged="no") == ["item-3"]  # on one pair together
    assert shown(study, winner="sys-b", flagged="yes") == []
    _, counts = curation.data_manager(study, curation.Filters())
    assert counts == curation.Counts(items=4, flagged=2, excluded=0, requested=0, ruled=0)


def test_a_filter_not_among_its_choices_is_refused_by_name(judged):  # noqa: F811
    study, _ = judged
    with pytest.raises(FieldErrors) as refused:
        curation.Filters.check({"winner": "nobody", "agreement": "most", "q": "x" * 201}, ["sys-a", "sys-b"])
    assert set(refused.value.errors) == {"winner", "agreement", "q"}


def test_an_excluded_item_is_left_out_of_every_analysis_kept_in_the_export_and_audited(judged, researcher):  # noqa: F811
    study, _ = judged
    before = data_version(study)
    item0 = ids(study, "item-0")
    assert curation.do_curate(study, "exclude", item0, researcher) == 1
    # the report reads none of its judgments, and says how many it left out: two people's and the judge's two
    rows = load_rows(study)
    assert rows and "item-0" not in {r.item for r in rows}
    report = study_report(study)
    assert report.judgments.excluded_items == 1 and report.judgments.excluded == 4
    assert report.judgments.study_total == Judgment.objects.filter(study=study).count() - 4
    assert data_version(study) != before  # the stored report is stale
    # the review queue: item 0's disagreement is gone with it
    pairs, counts = review.review_queue(study)
    assert [p.item for p in pairs] == ["item-2"] and counts["flagged"] == 1
    # rating sets, the judges' scores and the preference records
    comparison = study.comparisons.get()
    assert item0[0] not in rating_sets.ratings_by_item(comparison, rating_sets.pair_judgments(comparison))[0]
    scores = services.judge_scores(comparison, list(study.items.order_by("position")))
    assert scores.shape[0] == 4 and all(s != s for s in scores[0])  # item 0's row: no verdict read (NaN)
    assert "item-0" not in {r["item_id"] for r in preferences.records(study)}
    # the export keeps every judgment and marks the excluded ones; a file read back keeps them uncounted
    lines = list(exports.judgment_lines(study))
    assert len(lines) == Judgment.objects.filter(study=study).count()
    assert {line["item"] for line in lines if line["excluded"]} == {"item-0"}
    copy = creation.do_create_study(
        researcher,
        "copy",
        b"".join(
            json.dumps(
                {
                    "id": i.external_id,
                    "input": i.input,
                    "outputs": {g.system.name: [g.text] for g in i.generations.select_related("system")},
                }
            ).encode()
            + b"\n"
            for i in study.items.order_by("position")
        ),
        "copy.jsonl",
    )
    imports.do_import_judgments(copy, "".join(json.dumps(line) + "\n" for line in lines).encode(), "back.jsonl")
    assert set(
        Judgment.objects.filter(study=copy, superseded=True).values_list("pair__item__external_id", flat=True)
    ) == {"item-0"}
    # the audit trail names who and which items
    entry = AuditEntry.objects.filter(study=study, action="items_exclude").get()
    assert entry.user == researcher and entry.detail["items"] == ["item-0"] and "excluded" in entry.summary
    # excluding again changes nothing and writes no second line
    assert curation.do_curate(study, "exclude", item0, researcher) == 0
    assert AuditEntry.objects.filter(study=study, action="items_exclude").count() == 1
    # re-opened: analysed again, the same fingerprint as before
    assert curation.do_curate(study, "reopen", item0, researcher) == 1
    assert "item-0" in {r.item for r in load_rows(study)} and data_version(study) == before
    assert study_report(study).judgments.excluded_items == 0


def test_sending_to_review_puts_an_agreed_item_in_the_queue_and_reopening_withdraws_its_ruling(judged, researcher):  # noqa: F811
    study, _ = judged
    item3 = ids(study, "item-3")
    assert curation.do_curate(study, "review", item3, researcher) == 1
    pairs, counts = review.review_queue(study)
    assert "item-3" in [p.item for p in pairs] and counts["requested"] == 1 and counts["flagged"] == 2
    assert [p.item for p in review.review_queue(study, why="requested")[0]] == ["item-3"]
    pair = next(p for p in pairs if p.item == "item-3")
    review.do_adjudicate(study, pair.pair_id, "b", "sys-b is right", researcher)
    assert "item-3" not in [p.item for p in review.review_queue(study)[0]]  # ruled: out of the open queue
    assert shown(study, state="ruled") == ["item-3"] and shown(study, state="requested") == ["item-3"]
    assert curation.do_curate(study, "reopen", item3, researcher) == 1
    assert not Adjudication.objects.filter(pair_id=pair.pair_id).exists()
    withdrawn = AuditEntry.objects.get(study=study, action="items_reopen").detail["rulings_withdrawn"]
    assert [(w["pair_id"], w["ruling"], w["note"]) for w in withdrawn] == [(pair.pair_id, "b", "sys-b is right")]
    assert not Item.objects.get(pk=item3[0]).review_requested
    assert "item-3" not in [p.item for p in review.review_queue(study)[0]]  # agreed again, nobody sent it


def test_an_action_naming_a_bad_item_changes_nothing(judged, researcher, other_researcher):  # noqa: F811
    study, _ = judged
    elsewhere = creation.do_create_study(
        other_researcher, "other", b'{"id": "x", "input": "q", "outputs": {"s": ["o"], "t": ["p"]}}\n', "o.jsonl"
    )
    foreign = elsewhere.items.get().pk
    for action, given, field in (
        ("exclude", [*ids(study, "item-0"), foreign], "items"),
        ("exclude", [], "items"),
        ("exclude", ["one"], "items"),
        ("delete", ids(study, "item-0"), "action"),
    ):
        with pytest.raises(FieldErrors) as refused:
            curation.do_curate(study, action, given, researcher)
        assert field in refused.value.errors
    curation.do_curate(study, "exclude", ids(study, "item-1"), researcher)
    with pytest.raises(FieldErrors) as refused:  # an excluded item cannot be sent to review: all or none
        curation.do_curate(study, "review", ids(study, "item-0", "item-1"), researcher)
    assert "item-1" in refused.value.errors["items"][0]
    assert list(Item.objects.filter(study=study, excluded=True).values_list("external_id", flat=True)) == ["item-1"]
    assert not Item.objects.filter(study=study, review_requested=True).exists()
    assert AuditEntry.objects.filter(study=study, action__startswith="items_").count() == 1


def test_an_excluded_item_is_no_longer_handed_out_and_the_decisions_are_made_again_without_it(three, researcher):  # noqa: F811
    # before any rating: every item has one place on each of the three pairs
    assert allocation.open_places(three) == 3 * ITEMS
    left_out = ids(three, *(f"item-{i}" for i in range(5)))
    curation.do_curate(three, "exclude", left_out, researcher)
    assert allocation.open_places(three) == 3 * (ITEMS - 5)
    curation.do_curate(three, "reopen", left_out, researcher)
    rate_everything(three)  # sys-a wins every item: its two pairs decided, the level pair bought whole
    won = three.comparisons.get(system_a__name="sys-a", system_b__name="sys-b")
    stored = PairDecision.objects.get(comparison=won)
    assert stored.decision == decisions.A_BETTER and won.closed
    rested_on = list(stored.counted)
    # exclude the items the decision rests on: decided again over what counts now -- nothing -- and bought again
    curation.do_curate(three, "exclude", rested_on, researcher)
    stored.refresh_from_db()
    won.refresh_from_db()
    assert stored.decision == decisions.UNDECIDED and stored.items == 0 and stored.counted == []
    assert not won.closed
    taken_before = set(AssignmentTask.objects.values_list("pk", flat=True))
    rate_everything(three, names="again-")
    new = AssignmentTask.objects.exclude(pk__in=taken_before)
    assert new.exists() and not new.filter(item_id__in=rested_on).exists()  # never an excluded item again
    stored.refresh_from_db()
    won.refresh_from_db()
    assert stored.decision == decisions.A_BETTER and won.closed and not set(stored.counted) & set(rested_on)
    # the same confidence sequence as over the items it rests on now, all won by sys-a (alpha split over 3 pairs)
    lower, _ = decisions.betting_confidence_sequence([1.0] * stored.items, alpha=0.05 / 3)
    assert lower[-1] > 0.5 and (stored.items == 1 or lower[-2] <= 0.5)
    # re-opened: decided again over every item, the excluded ones' judgments counted again
    curation.do_curate(three, "reopen", rested_on, researcher)
    stored.refresh_from_db()
    assert set(rested_on) <= set(stored.counted) and stored.decision == decisions.A_BETTER


# --- the page and the API, by role -------------------------------------------------------------------------------


@pytest.fixture
def roles(judged, researcher):  # noqa: F811
    study, _ = judged
    make = get_user_model().objects.create_user
    people = {role: make(f"{role}-person", password="pw") for role in ("viewer", "reviewer", "editor", "outsider")}
    for role in ("viewer", "reviewer", "editor"):
        team.do_add_member(study, people[role].username, role, researcher)
    return study, people


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_page_filters_and_acts_on_the_ticked_or_every_matching_item(roles):
    study, people = roles
    editor = browser(people["editor"])
    url = reverse("study_items", args=[study.pk])
    page = editor.get(url, {"winner": "tie"}).content.decode()
    assert page.count('data-testid="item-row"') == 1 and 'data-item="item-2"' in page
    assert "1 item matches" in page and 'data-testid="bulk-matching"' in page
    assert "&lt;b&gt;B&lt;/b&gt; is clearer" in page and "<b>B</b>" not in page  # a comment is untrusted
    refused = editor.get(url, {"winner": "nobody"}).content.decode()
    assert 'role="alert"' in refused and refused.count('data-testid="item-row"') == 4
    # every item a filter matches: flagged ones (items 0 and 2), then the ticked one
    back = url + "?flagged=yes"
    response = editor.post(
        reverse("curate_items", args=[study.pk]),
        {"action": "exclude", "scope": "matching", "flagged": "yes", "expected": "2", "next": back},
    )
    assert response.status_code == 302 and response["Location"] == back
    assert set(Item.objects.filter(study=study, excluded=True).values_list("external_id", flat=True)) == {
        "item-0",
        "item-2",
    }
    editor.post(reverse("curate_items", args=[study.pk]), {"action": "review", "items": ids(study, "item-3")})
    assert Item.objects.get(study=study, external_id="item-3").review_requested
    assert editor.get(url, {"state": "excluded"}).content.decode().count('data-testid="item-row"') == 2
    item_page = editor.get(reverse("item_detail", args=[study.pk, ids(study, "item-0")[0]])).content.decode()
    assert "Excluded from the analysis." in item_page and 'value="reopen"' in item_page


def test_each_role_may_do_what_its_action_needs_and_no_more(roles):
    study, people = roles
    url = reverse("curate_items", args=[study.pk])
    item3 = ids(study, "item-3")
    viewer = browser(people["viewer"])
    assert 'data-testid="bulk-ticked"' not in viewer.get(reverse("study_items", args=[study.pk])).content.decode()
    assert viewer.post(url, {"action": "review", "items": item3}).status_code == 403
    reviewer = browser(people["reviewer"])
    assert reviewer.post(url, {"action": "exclude", "items": item3}).status_code == 403
    assert not Item.objects.filter(study=study, excluded=True).exists()
    assert reviewer.post(url, {"action": "review", "items": item3}).status_code == 302
    assert Item.objects.get(pk=item3[0]).review_requested
    assert browser(people["outsider"]).post(url, {"action": "review", "items": item3}).status_code == 404
    assert AuditEntry.objects.filter(study=study, action="items_review").get().user == people["reviewer"]


def test_the_api_acts_on_items_by_their_file_ids_all_or_none(roles):
    study, people = roles
    url = f"/api/studies/{study.pk}/items/actions/"
    editor = client_for(people["editor"])
    response = editor.post(url, {"action": "exclude", "items": ["item-0", "item-1"]}, format="json")
    assert response.status_code == 200 and response.json() == {"action": "exclude", "changed": 2}
    response = editor.post(url, {"action": "reopen", "items": ["item-0", "nope"]}, format="json")
    assert response.status_code == 400 and "nope" in response.json()["items"][0]
    assert Item.objects.get(study=study, external_id="item-0").excluded  # nothing changed
    response = editor.post(url, {"action": "review", "items": ["item-1"]}, format="json")
    assert response.status_code == 400 and "re-open" in response.json()["items"][0]
    assert editor.post(url, {"action": ["exclude"], "items": ["item-2"]}, format="json").status_code == 400
    assert (
        client_for(people["viewer"]).post(url, {"action": "review", "items": ["item-3"]}, format="json").status_code
        == 403
    )
    assert (
        client_for(people["outsider"]).post(url, {"action": "review", "items": ["item-3"]}, format="json").status_code
        == 404
    )
    items = editor.get(f"/api/studies/{study.pk}/items/").json()["results"]
    assert {i["id"]: i["excluded"] for i in items} == {"item-0": True, "item-1": True, "item-2": False, "item-3": False}


def test_the_report_page_says_how_many_items_were_excluded(roles, researcher):
    study, _ = roles
    curation.do_curate(study, "exclude", ids(study, "item-0"), researcher)
    body = presentation.render_body(study, Population(), study_report(study))
    assert "1 item excluded in the" in body and "4 judgments kept, left out" in body


def test_the_api_finds_items_as_the_page_does_by_the_same_filter_names(roles):
    study, people = roles
    url = f"/api/studies/{study.pk}/data-manager/"
    viewer = client_for(people["viewer"])  # reading is a viewer's
    body = viewer.get(url, {"judges": "disagree"}).json()
    assert body["count"] == 2 and [i["id"] for i in body["results"]] == ["item-0", "item-2"]
    assert body["counts"] == {"items": 4, "flagged": 2, "excluded": 0, "requested": 0, "ruled": 0}
    (pair,) = body["results"][0]["pairs"]
    assert (pair["system_a"], pair["system_b"], pair["people_winner"], pair["agreement"]) == (
        "sys-a",
        "sys-b",
        "sys-a",
        "all",
    )
    assert pair["judges"] == "disagree" and pair["flagged"] and pair["ruling"] is None
    assert body["results"][1]["comments"] == ["<b>B</b> is clearer"]  # JSON carries the text as written
    refused = viewer.get(url, {"winner": "nobody", "flagged": "maybe"})
    assert refused.status_code == 400 and set(refused.json()) == {"winner", "flagged"}
    assert client_for(people["outsider"]).get(url).status_code == 404


def test_the_study_page_marks_a_pair_decided_again_and_rulings_wait_for_a_reopened_item(three, researcher, client):  # noqa: F811
    rate_everything(three)
    won = three.comparisons.get(system_a__name="sys-a", system_b__name="sys-b")
    curation.do_curate(three, "exclude", list(PairDecision.objects.get(comparison=won).counted)[:3], researcher)
    client.force_login(researcher)
    page = client.get(three.get_absolute_url()).content.decode()
    assert 'data-testid="recounted"' in page and page.count('data-testid="recounted-note"') == 1
    assert PairDecision.objects.get(comparison=won).recounted
    excluded = Item.objects.filter(study=three, excluded=True).first()
    pair = Judgment.objects.filter(pair__item=excluded).first().pair
    with pytest.raises(review.RulingError, match="re-open it"):
        review.do_adjudicate(three, pair.pk, "a", "", researcher)
    item_page = client.get(reverse("item_detail", args=[three.pk, excluded.pk])).content.decode()
    assert 'data-testid="no-ruling"' in item_page and 'data-testid="ruling-form"' not in item_page


def test_a_live_diffuse_study_refuses_exclusions_by_name(judged, researcher):  # noqa: F811
    study, _ = judged
    type(study.selection_settings).objects.filter(pk=study.selection_settings.pk).update(
        selection_method="diffuse-iterative"
    )
    study.refresh_from_db()
    with pytest.raises(FieldErrors) as refused:
        curation.do_curate(study, "exclude", ids(study, "item-0"), researcher)
    assert "live DiffUse loop" in refused.value.errors["action"][0]
    assert not Item.objects.filter(study=study, excluded=True).exists()


def test_acting_on_every_matching_item_refuses_when_the_matches_changed(roles):
    study, people = roles
    editor = browser(people["editor"])
    response = editor.post(
        reverse("curate_items", args=[study.pk]),
        {"action": "exclude", "scope": "matching", "flagged": "yes", "expected": "3"},
        follow=True,
    )
    assert "changed since the page was shown (3 then, 2 now)" in response.content.decode()
    assert not Item.objects.filter(study=study, excluded=True).exists()
    reviewer = client_for(people["reviewer"])  # an unknown action is a 400 naming it, for any member
    response = reviewer.post(
        f"/api/studies/{study.pk}/items/actions/", {"action": "burn", "items": ["item-0"]}, format="json"
    )
    assert response.status_code == 400 and "action" in response.json()


def test_the_rows_are_read_once_per_change_of_what_they_show(judged, researcher):  # noqa: F811
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotation.models import Rater

    study, _ = judged

    def verdict_reads() -> int:  # the reviews' one query over the judgments with their pairs' systems
        with CaptureQueriesContext(connection) as captured:
            curation.data_manager(study, curation.Filters())
        return sum('"annotation_judgment"' in q["sql"] and "sample_index" in q["sql"] for q in captured)

    assert verdict_reads() == 1
    assert verdict_reads() == 0 and shown(study, winner="tie") == ["item-2"]  # kept: filters read the same rows
    changes = [
        lambda: curation.do_curate(study, "exclude", ids(study, "item-1"), researcher),
        lambda: curation.do_curate(study, "review", ids(study, "item-3"), researcher),
        lambda: review.do_adjudicate(study, review.review_queue(study)[0][0].pair_id, "a", "", researcher),
        lambda: Rater.objects.filter(study=study, external_id="h2").update(screened_out=True),
        lambda: imports.do_import_judgments(
            study, (json.dumps(human("item-1", "h3", "sys-b", comment="late")) + "\n").encode(), "late.jsonl"
        ),
    ]
    for change in changes:
        change()
        assert verdict_reads() == 1 and verdict_reads() == 0
    rows, counts = curation.data_manager(study, curation.Filters())
    assert counts == curation.Counts(items=4, flagged=counts.flagged, excluded=1, requested=1, ruled=1)
    assert "late" in next(r for r in rows if r.external_id == "item-1").comments  # the new judgment's comment
    # h2 screened out: item 2's people are h1 alone now, so its raters no longer disagree
    assert next(r for r in rows if r.external_id == "item-2").pairs[0].agreement == "one"
