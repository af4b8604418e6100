"""Every verdict on an item's page, the review queue of disagreements, rulings kept apart from the judgments, and
every judge reply readable (as Label Studio's data manager does; judge transparency)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from analytics import review
from analytics.models import Adjudication
from analytics.report.assembly import study_report
from analytics.report.data import load_rows
from annotation.judges import runner
from annotation.models import Item, JudgeCall, Judgment, Pair
from annotation.rating import imports
from selection.core import winners
from tests.annotation.test_judge_runner import make_judge, study_with
from tests.judge_server import JudgeServer


@pytest.fixture
def server():
    server = JudgeServer().start()
    yield server
    server.shutdown()
    server.server_close()


def human(item: str, rater: str, choice: str, first: str = "sys-a", comment: str | None = None) -> dict:
    return {
        "id": f"{rater}-{item}",
        "item": item,
        "system_a": "sys-a",
        "sample_a": 0,
        "system_b": "sys-b",
        "sample_b": 0,
        "shown_first": first,
        "rater": rater,
        "rater_kind": "human",
        "choice": choice,
        "comment": comment,
    }


@pytest.fixture
def judged(researcher, server):
    """Four items. The local judge prefers the longer output (sys-b on items 0 and 3, sys-a on item 2; on item 1 the
    outputs are as long and it picks whichever is shown first). People: item 0 both sys-a (against the judge),
    item 2 one each (split), item 3 both sys-b (all agree), item 1 nobody."""
    study = study_with(researcher, [f"Question {i}?" for i in range(4)])
    judge = make_judge(study, server)
    assert runner.JudgeRun(judge).do_run().recorded == 8
    lines = [
        human("item-0", "h1", "sys-a"),
        human("item-0", "h2", "sys-a", first="sys-b"),
        human("item-2", "h1", "sys-a"),
        human("item-2", "h2", "sys-b", comment="<b>B</b> is clearer"),
        human("item-3", "h1", "sys-b"),
        human("item-3", "h2", "sys-b"),
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "people.jsonl")
    return study, judge


def item(study, external_id: str) -> Item:
    return study.items.get(external_id=external_id)


def test_the_item_page_lists_every_verdict_with_the_judges_replies(researcher_client, judged):
    study, judge = judged
    page = researcher_client.get(reverse("item_detail", args=[study.pk, item(study, "item-2").pk])).content.decode()
    assert page.count('data-testid="human-verdict"') == 2 and page.count('data-testid="judge-verdict"') == 2
    assert "sys-a is better" in page and "sys-b is better" in page
    assert "&lt;b&gt;B&lt;/b&gt; is clearer" in page and "<b>B</b>" not in page  # a rater's comment is untrusted
    assert "The people are split (2 raters)" in page
    assert "Disagreement: raters disagree; a judge disagrees with the people (local-judge)" in page
    replies = JudgeCall.objects.filter(judge=judge, pair__item__external_id="item-2")
    for call in replies:  # the replies as received, every one (not only the unparseable)
        assert call.status == "judged" and call.reply.strip() and call.reply in page
    agreed = researcher_client.get(reverse("item_detail", args=[study.pk, item(study, "item-3").pk])).content
    assert b"The people prefer sys-b (2 of 2 raters)" in agreed and b'data-testid="disagreement"' not in agreed
    empty = researcher_client.get(reverse("item_detail", args=[study.pk, item(study, "item-1").pk])).content
    assert b"No counted human judgment yet" in empty and b'data-testid="disagreement"' not in empty


def test_the_queue_holds_the_pairs_where_raters_or_a_judge_disagree(researcher_client, judged):
    study, _ = judged
    pairs, counts = review.review_queue(study)
    # item 0: the judge (sys-b both orders) against both people (sys-a); item 2: the people split, the judge not
    # split (a tie against a preference is a disagreement); items 1 and 3: nothing to review
    assert [p.item for p in pairs] == ["item-2", "item-0"]  # both kinds of disagreement first
    assert counts == {"flagged": 2, "raters": 1, "judge": 2, "requested": 0, "ruled": 0}
    assert [p.people_winner for p in pairs] == ["tie", "a"]
    assert review.review_queue(study, why="raters")[0][0].item == "item-2"
    page = researcher_client.get(reverse("review_queue", args=[study.pk])).content.decode()
    assert "2 pairs with a disagreement" in page and page.count('data-testid="pair-review"') == 2
    # the people's winner is the report's item-winner rule over the same judgments
    rows = [r for r in load_rows(study) if r.kind == "human" and r.pair_id == pairs[1].pair_id]
    sets = [[r.rating] for r in rows]
    assert winners.item_winner(sets) == pairs[1].people_winner


def test_a_ruling_is_kept_apart_from_the_judgments_and_can_be_changed_and_withdrawn(
    researcher_client, researcher, judged
):
    study, _ = judged
    pair = Pair.objects.get(item__study=study, item__external_id="item-2")
    before = list(Judgment.objects.filter(study=study).order_by("id").values())
    report_before = study_report(study).bradley_terry
    queue = reverse("review_queue", args=[study.pk])
    url = reverse("adjudicate", args=[study.pk, pair.pk])
    done = researcher_client.post(url, {"ruling": "b", "note": "B answers the question.", "next": queue}, follow=True)
    assert "Ruling saved" in done.content.decode()
    ruling = Adjudication.objects.get()
    assert (ruling.pair_id, ruling.ruling, ruling.note, ruling.decided_by) == (
        pair.pk,
        "b",
        "B answers the question.",
        researcher,
    )
    assert list(Judgment.objects.filter(study=study).order_by("id").values()) == before
    assert study_report(study).bradley_terry == report_before  # the analysis is what raters said
    # ruled pairs leave the default view and show under "ruled on"
    assert [p.item for p in review.review_queue(study)[0]] == ["item-0"]
    ruled = researcher_client.get(queue + "?show=ruled").content.decode()
    assert "Ruled: sys-b is better." in ruled and "B answers the question." in ruled
    researcher_client.post(url, {"ruling": "unclear", "note": "", "next": queue})
    assert Adjudication.objects.get().ruling == "unclear"  # changed, never a second ruling
    exported = researcher_client.get(reverse("adjudications_csv", args=[study.pk])).content.decode()
    rows = list(csv.DictReader(io.StringIO(exported)))
    assert [(r["item_id"], r["system_a"], r["system_b"], r["ruling"]) for r in rows] == [
        ("item-2", "sys-a", "sys-b", "unclear")
    ]
    researcher_client.post(url, {"clear": "1", "next": queue})
    assert not Adjudication.objects.exists()
    assert list(Judgment.objects.filter(study=study).order_by("id").values()) == before


def test_rulings_are_refused_precisely_and_only_for_the_owner(researcher_client, client, other_researcher, judged):
    study, _ = judged
    pair = Pair.objects.get(item__study=study, item__external_id="item-2")
    url = reverse("adjudicate", args=[study.pk, pair.pk])
    bad = researcher_client.post(url, {"ruling": "maybe"}, follow=True)
    assert "Choose a ruling." in bad.content.decode() and not Adjudication.objects.exists()
    elsewhere = study_with(study.owner, ["Another?"], name="other")  # the same owner's other study's pair
    foreign = Pair.objects.get(item__study=elsewhere)
    none = researcher_client.post(reverse("adjudicate", args=[study.pk, foreign.pk]), {"ruling": "a"}, follow=True)
    assert "has no verdicts in this study" in none.content.decode() and not Adjudication.objects.exists()
    # an outside "next" is not followed
    away = researcher_client.post(url, {"ruling": "a", "next": "https://evil.example/"})
    assert away.status_code == 302 and away["Location"] == reverse("review_queue", args=[study.pk])
    client.force_login(other_researcher)
    assert client.post(url, {"ruling": "b"}).status_code == 404
    assert client.get(reverse("review_queue", args=[study.pk])).status_code == 404
    assert Adjudication.objects.get().ruling == "a"


def test_the_judge_page_shows_every_reply_with_what_it_was_read_as(researcher_client, judged):
    study, judge = judged
    url = reverse("judge_detail", args=[study.pk, judge.pk])
    page = researcher_client.get(url).content.decode()
    calls = list(JudgeCall.objects.filter(judge=judge))
    assert len(calls) == 8 and page.count('data-testid="reply-row"') == 8
    for call in calls:
        assert call.reply in page
    # items 0 and 3: the judge preferred sys-b whichever side it was shown on; item 2 sys-a
    assert page.count("sys-b is better") == 5 and page.count("sys-a is better") == 3  # item 1: the first shown
    only_unreadable = researcher_client.get(url + "?status=unparseable").content.decode()
    assert 'data-testid="reply-row"' not in only_unreadable and "No reply of this kind." in only_unreadable


def test_an_empty_study_has_a_helpful_empty_queue(researcher_client, study):
    page = researcher_client.get(reverse("review_queue", args=[study.pk])).content.decode()
    assert "No disagreements yet." in page
    assert (
        "No one has judged this item yet."
        in researcher_client.get(reverse("item_detail", args=[study.pk, study.items.first().pk])).content.decode()
    )


def test_superseded_judgments_and_agreeing_ties_raise_no_flag_as_the_report_counts_them(researcher_client, judged):
    """The review reads the people as the report does: a judgment a live loop superseded is listed, not counted."""
    study, _ = judged
    Judgment.objects.filter(rater__external_id="h2", pair__item__external_id="item-2").update(superseded=True)
    pairs, counts = review.review_queue(study)
    split = next(p for p in review.item_review(item(study, "item-2")) if p.item == "item-2")
    assert not split.raters_disagree and split.people_winner == "a"
    assert split.people_words == "the people prefer sys-a (1 of 1 rater)"
    rows = [r for r in load_rows(study) if r.kind == "human" and r.pair_id == split.pair_id and not r.superseded]
    assert winners.item_winner([[r.rating] for r in rows]) == split.people_winner
    page = researcher_client.get(reverse("item_detail", args=[study.pk, item(study, "item-2").pk])).content.decode()
    assert "superseded, not counted" in page
    # two people with no preference: no difference, not a split
    lines = [human("item-1", "h1", "tie"), human("item-1", "h2", "tie")]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "ties.jsonl")
    level = review.item_review(item(study, "item-1"))[0]
    assert level.people_words == "the people see no difference (2 raters)" and not level.raters_disagree


def test_a_ruling_made_on_an_unflagged_pair_is_listed_under_ruled_on(researcher_client, judged):
    study, _ = judged
    agreed = Pair.objects.get(item__study=study, item__external_id="item-3")
    researcher_client.post(reverse("adjudicate", args=[study.pk, agreed.pk]), {"ruling": "b", "note": "checked"})
    pairs, counts = review.review_queue(study, show="ruled")
    assert [p.item for p in pairs] == ["item-3"] and counts["ruled"] == 1 and counts["flagged"] == 2
    assert [p.item for p in review.review_queue(study)[0]] == ["item-2", "item-0"]  # still both open


def test_the_review_pages_run_a_fixed_number_of_queries(researcher_client, judged, django_assert_num_queries):
    """However many pairs, verdicts, replies and rulings: the queue reads the session, the user, the study, the
    judgments and the rulings; the item page also the item, the judges' replies and the generations; the judge
    page its state and one page of replies."""
    study, judge = judged
    for p in Pair.objects.filter(item__study=study)[:2]:
        researcher_client.post(reverse("adjudicate", args=[study.pk, p.pk]), {"ruling": "tie"})
    researcher_client.get(reverse("review_queue", args=[study.pk]))  # the messages of the rulings are read once
    page = reverse("item_detail", args=[study.pk, item(study, "item-2").pk])
    with django_assert_num_queries(5):
        researcher_client.get(reverse("review_queue", args=[study.pk]) + "?show=all")
    with django_assert_num_queries(8):
        researcher_client.get(page)
    for name in ("h3", "h4", "h5"):  # more raters on the item: the same queries
        imports.do_import_judgments(study, (json.dumps(human("item-2", name, "sys-b")) + "\n").encode(), "j.jsonl")
    with django_assert_num_queries(8):
        researcher_client.get(page)
    with django_assert_num_queries(5):
        researcher_client.get(reverse("review_queue", args=[study.pk]) + "?show=all")


def test_only_the_judge_verdict_that_goes_against_the_people_is_marked(researcher_client, judged):
    """On item 1 the outputs are as long, so the local judge picks whichever is shown first: one verdict for each
    system. The people prefer sys-a: the pair is flagged (the judge's two orders cancel out to no preference) and only
    its sys-b verdict is marked (both once were)."""
    study, _ = judged
    lines = [human("item-1", "h1", "sys-a"), human("item-1", "h2", "sys-a")]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "h.jsonl")
    pair = review.item_review(item(study, "item-1"))[0]
    assert pair.judges_disagree == ["local-judge"]
    assert sorted((v.words, v.disagrees) for v in pair.judges) == [
        ("sys-a is better", False),
        ("sys-b is better", True),
    ]
    page = researcher_client.get(reverse("item_detail", args=[study.pk, item(study, "item-1").pk])).content.decode()
    assert page.count("(against the people)") == 1


def test_the_judge_page_reloads_once_its_run_is_over_so_the_replies_show(researcher_client, judged):
    study, judge = judged
    url = reverse("judge_progress", args=[study.pk, judge.pk])
    polled = researcher_client.get(url, HTTP_HX_REQUEST="true")
    assert polled["HX-Refresh"] == "true" and 'hx-trigger="every 1s"' not in polled.content.decode()
    assert "HX-Refresh" not in researcher_client.get(url)  # a plain request is not a poll
