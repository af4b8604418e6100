"""Workers from crowdsourcing sites: every branch of the entry point, completion per platform,
framing, expiry, limits, gold checks and the blocklist."""

from __future__ import annotations

import re
import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.crowd import sites
from annotation.elicitation import Answer
from annotation.errors import ServiceError
from annotation.models import (
    Assignment,
    AssignmentTask,
    BlockedWorker,
    ExternalLink,
    GoldAnswer,
    GoldPair,
    Judgment,
    Rater,
    WorkerSession,
)
from annotation.rating import allocation, recording
from annotation.studies import creation, enrolment, lifecycle
from tests.conftest import study_jsonl

SUBMIT_HOST = "https://workersandbox.mturk.com"


@pytest.fixture
def mturk(study):
    return ExternalLink.objects.create(study=study, platform="mturk")


def visit(client, link, **params):
    return client.get(link.path(), params)


def accept(client, link, worker="W1", assignment="A1", hit="H1"):
    return visit(client, link, assignmentId=assignment, hitId=hit, workerId=worker, turkSubmitTo=SUBMIT_HOST)


def answer_everything(client, response, choice="first"):
    """Follow the redirect to the rating page and answer every pair; returns the final page."""
    import re

    url = response["Location"]
    page = client.get(url)
    while b'name="key"' in page.content:
        html = page.content.decode()
        fields = {n: re.search(rf'name="{n}" value="([^"]*)"', html).group(1) for n in ("pair", "key")}
        client.post(url.rstrip("/") + "/submit/", {**fields, "choice": choice})
        page = client.get(url)
    return page


def test_a_preview_shows_instructions_and_a_sample_and_stores_nothing(client, mturk):
    before = (Rater.objects.count(), WorkerSession.objects.count(), Assignment.objects.count())
    page = visit(client, mturk, assignmentId=sites.PREVIEW_ASSIGNMENT, hitId="H1")
    content = page.content.decode()
    assert page.status_code == 200 and "Accept the task to start" in content
    assert mturk.study.instructions in content and "What a pair looks like" in content
    assert (Rater.objects.count(), WorkerSession.objects.count(), Assignment.objects.count()) == before


def test_when_every_place_is_taken_the_preview_says_so_and_the_crowd_page_too(client, researcher_client, mturk):
    """With every place taken the preview once still offered "10 pairs"; accepting gave "Nothing left to
    rate... Please return the task". The preview now says there is no work, and the crowd page that the links ran
    out."""
    from django.db.models import F

    from annotation.models import Task

    study = mturk.study
    crowd_page = reverse("external_links", args=[study.pk])
    assert allocation.open_places(study) == sum(t.raters_required for t in Task.objects.filter(study=study))
    assert 'data-testid="open-places"' in researcher_client.get(crowd_page).content.decode()
    Task.objects.filter(study=study).update(taken=F("raters_required"))  # every place held
    assert allocation.open_places(study) == 0
    page = visit(client, mturk, assignmentId=sites.PREVIEW_ASSIGNMENT, hitId="H1").content.decode()
    assert 'data-testid="run-out"' in page and "please do not accept it" in page
    assert "Accept the task to start" not in page and "What a pair looks like" not in page
    assert 'data-testid="links-run-out"' in researcher_client.get(crowd_page).content.decode()


def test_the_preview_shows_the_first_pair_in_the_orders_workers_will_see_it(client, mturk):
    """The preview once re-implemented the first pair and always showed output A first, whatever the plan's
    display order, and then always showed the plan's base order. It now shows the sides of a random
    worker's place, drawn as the rating page's are: both orders across previews."""
    from html import escape

    from annotation.models import TaskPair

    first = TaskPair.objects.filter(task__study=mturk.study).order_by("task__position", "position").first()
    a, b = escape(first.pair.generation_a.text), escape(first.pair.generation_b.text)
    orders = set()
    for seed in range(12):
        content = visit(client, mturk, assignmentId=sites.PREVIEW_ASSIGNMENT, hitId="H1", seed=seed).content.decode()
        shown = content.split("What a pair looks like")[1]
        assert a != b and a in shown and b in shown
        orders.add(shown.index(a) < shown.index(b))
    assert orders == {True, False}


def test_accepting_starts_an_assignment_and_reloading_resumes_it(client, mturk):
    first = accept(client, mturk)
    assert first.status_code == 302
    session = WorkerSession.objects.get()
    assert (session.worker_id, session.session_key, session.hit_id) == ("W1", "A1", "H1")
    assert first["Location"] == reverse("rate", args=[session.rater.token(), session.assignment_id])
    again = accept(client, mturk)
    assert again["Location"] == first["Location"]
    assert WorkerSession.objects.count() == 1 and Assignment.objects.count() == 1


def test_a_second_hit_while_the_first_is_open_is_refused(client, mturk):
    accept(client, mturk, assignment="A1")
    page = accept(client, mturk, assignment="A2")
    assert b"already working on this study in another task" in page.content
    assert Assignment.objects.count() == 1


def test_the_mturk_completion_posts_to_turk_submit_to(client, mturk):
    page = accept(client, mturk)
    rating = client.get(page["Location"])
    assert b"/mturk/externalSubmit" not in rating.content  # no submit button before the work is done
    done = answer_everything(client, page).content.decode()
    session = WorkerSession.objects.get()
    assert f'action="{SUBMIT_HOST}/mturk/externalSubmit"' in done
    assert 'name="assignmentId" value="A1"' in done
    assert f'name="completion_code" value="{session.assignment.completion_code}"' in done
    # a new HIT after finishing gets a new item
    second = accept(client, mturk, assignment="A2")
    items = [set(w.assignment.places.values_list("item_id", flat=True)) for w in WorkerSession.objects.order_by("id")]
    assert len(items) == 2 and not items[0] & items[1]
    assert second.status_code == 302


def test_a_worker_known_from_imported_judgments_still_gets_the_completion(client, mturk):
    known = Rater.objects.create(study=mturk.study, external_id="mturk:W1", source=Rater.Source.IMPORT)
    done = answer_everything(client, accept(client, mturk)).content.decode()
    session = WorkerSession.objects.get()
    assert session.rater_id == known.pk and Rater.objects.get(pk=known.pk).source == Rater.Source.EXTERNAL
    assert f'name="completion_code" value="{session.assignment.completion_code}"' in done


def test_turk_submit_to_must_be_an_allowed_host(client, mturk):
    page = visit(client, mturk, assignmentId="A1", hitId="H1", workerId="W1", turkSubmitTo="https://evil.example")
    assert page.status_code == 400 and b"not a site this study submits to" in page.content
    assert not WorkerSession.objects.exists()


def test_missing_parameters_are_explained(client, study):
    prolific = ExternalLink.objects.create(study=study, platform="prolific")
    page = visit(client, prolific, PROLIFIC_PID="P1")
    assert page.status_code == 400 and b"missing PROLIFIC_PID or SESSION_ID" in page.content
    generic = ExternalLink.objects.create(study=study, platform="generic")
    assert b"missing worker_id" in visit(client, generic).content


def test_a_link_opened_as_pasted_is_refused_not_shared(client, study):
    """The generic link's own placeholder was once accepted, so two people landed in one assignment as the
    rater generic:WORKER_ID. Every site's placeholders (and template brackets) are refused with what went wrong,
    and nothing is created."""
    generic = ExternalLink.objects.create(study=study, platform="generic")
    for value in ("WORKER_ID", "worker_id", "{{WORKER_ID}}", "%WORKER_ID%", "${workerId}", "[WORKER_ID]", "  "):
        page = visit(client, generic, worker_id=value)
        assert page.status_code == 400, value
        text = page.content.decode()
        assert ("still holds the placeholder" in text) or ("missing worker_id" in text and not value.strip())
    prolific = ExternalLink.objects.create(study=study, platform="prolific")
    page = visit(
        client, prolific, PROLIFIC_PID="{{%PROLIFIC_PID%}}", STUDY_ID="{{%STUDY_ID%}}", SESSION_ID="{{%SESSION_ID%}}"
    )
    assert page.status_code == 400 and "still holds the placeholder" in page.content.decode()
    mturk = ExternalLink.objects.create(study=study, platform="mturk")
    page = visit(client, mturk, workerId="WORKER_ID", assignmentId="A1", hitId="H1")
    assert page.status_code == 400 and "your workerId" in page.content.decode()
    assert not Rater.objects.filter(kind="human").exclude(source="link").exists()
    assert not WorkerSession.objects.exists()
    assert sites.placeholder("PROLIFIC_PID") and not sites.placeholder("A2X9K3LMQ7") and not sites.placeholder("G1")
    ok = visit(client, generic, worker_id="G-17")  # a real id still goes straight in
    assert ok.status_code == 302 and WorkerSession.objects.get().worker_id == "G-17"


def test_prolific_sends_the_worker_back_with_the_code(client, study):
    link = ExternalLink.objects.create(study=study, platform="prolific")
    page = visit(client, link, PROLIFIC_PID="P1", STUDY_ID="S1", SESSION_ID="X1")
    done = answer_everything(client, page).content.decode()
    code = WorkerSession.objects.get().assignment.completion_code
    assert f"https://app.prolific.com/submissions/complete?cc={code}" in done


def test_generic_links_show_the_code(client, study):
    link = ExternalLink.objects.create(study=study, platform="generic")
    done = answer_everything(client, visit(client, link, worker_id="G1")).content.decode()
    assert WorkerSession.objects.get().assignment.completion_code in done
    assert "Copy the code into the site that sent you here" in done


def test_rater_pages_can_be_framed_by_the_sites_only(client, mturk, researcher_client, study):
    page = client.get(accept(client, mturk)["Location"])
    assert "X-Frame-Options" not in page
    assert "frame-ancestors 'self' https://worker.mturk.com" in page["Content-Security-Policy"]
    researcher_page = researcher_client.get(study.get_absolute_url())
    assert researcher_page["X-Frame-Options"] == "DENY"
    assert researcher_page["Content-Security-Policy"].endswith("frame-ancestors 'none'")


def test_rater_posts_need_no_cookies(mturk):
    strict = Client(enforce_csrf_checks=True)
    page = accept(strict, mturk)
    strict.cookies.clear()
    answer_everything(strict, page)
    assert Judgment.objects.count() == 5


def test_blocked_workers_get_nothing(client, mturk, researcher):
    BlockedWorker.objects.create(owner=researcher, platform="mturk", worker_id="W1")
    page = accept(client, mturk)
    assert b"not available to your account" in page.content
    assert not WorkerSession.objects.exists() and not Rater.objects.filter(source="external").exists()


def test_the_researcher_blocks_and_unblocks_from_the_page(researcher_client, client, mturk, study):
    accept(client, mturk)
    page = researcher_client.get(reverse("external_links", args=[study.pk])).content.decode()
    assert "mturk:W1" in page
    researcher_client.post(reverse("block_worker", args=[study.pk]), {"platform": "mturk", "worker_id": "W1"})
    block = BlockedWorker.objects.get()
    researcher_client.post(reverse("unblock_worker", args=[study.pk, block.pk]))
    assert not BlockedWorker.objects.exists()


def test_the_per_rater_limit(client, mturk, study):
    study.crowd_settings.max_assignments_per_rater = 1
    study.crowd_settings.save()
    answer_everything(client, accept(client, mturk, assignment="A1"))
    page = accept(client, mturk, assignment="A2")
    assert b"maximum of 1 assignment for this study" in page.content  # one assignment: singular, not "1 assignments"


def test_abandoned_assignments_expire_and_their_place_returns(client, study):
    lifecycle.do_update_settings(study, {"raters_per_item": 1, "budget": 1}, None)
    first = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "slow"))
    other = enrolment.do_create_rater_link(study, "next")
    assert allocation.do_start_assignment(other) is None  # the only place is taken
    Assignment.objects.filter(pk=first.pk).update(last_activity=timezone.now() - timedelta(minutes=61))
    taken = allocation.do_start_assignment(other)
    first.refresh_from_db()
    assert taken is not None and taken.places.get().task_id == first.places.get().task_id
    assert (first.status, first.places.get().slot) == ("expired", None)
    page = client.get(reverse("rate", args=[first.rater.token(), first.pk]))
    assert b"This assignment expired" in page.content
    with pytest.raises(ServiceError, match="expired"):
        recording.do_record_judgment(first.pairs.first(), idempotency_key="late", answer=Answer(choice="first"))


@pytest.fixture
def gold_study(study):
    GoldPair.objects.create(
        study=study, input="Translate 'bonjour'.", good_output="Hello.", bad_output="asdf qwer zxcv"
    )
    study.crowd_settings.gold_rate = 0.2
    study.crowd_settings.screen_min_gold = 1
    study.crowd_settings.save()
    return study


def test_gold_pairs_are_added_scored_and_never_judgments(gold_study):
    rater = enrolment.do_create_rater_link(gold_study, "g")
    assignment = allocation.do_start_assignment(rater)
    pairs = list(assignment.pairs.all())
    golds = [p for p in pairs if p.gold_id]
    assert len(pairs) == 6 and len(golds) == 1
    good = "first" if golds[0].a_shown_first else "second"
    allocation.do_mark_shown(golds[0])  # as the rating page does before an answer
    result = recording.do_record_judgment(golds[0], idempotency_key="g1", answer=Answer(choice=good))
    assert result.judgment is None and result.gold_answer.correct
    assert not Judgment.objects.exists() and recording.gold_accuracy(rater) == (1, 1)


def test_an_attention_check_left_after_gold_is_switched_off_is_still_shown_and_scored(client, gold_study):
    rater = enrolment.do_create_rater_link(gold_study, "late-off")
    assignment = allocation.do_start_assignment(rater)
    gold = assignment.pairs.get(gold__isnull=False)
    gold_study.crowd_settings.gold_rate = 0  # the rating page no longer joins attention checks; this one loads lazily
    gold_study.crowd_settings.save()
    url = reverse("rate", args=[rater.token(), assignment.pk])
    for p in assignment.pairs.order_by("position"):
        page = client.get(url).content.decode()
        if p.pk == gold.pk:
            assert "Translate &#x27;bonjour&#x27;." in page and "asdf qwer zxcv" in page
        key = re.search(r'name="key" value="([^"]*)"', page).group(1)
        assert client.post(url + "submit/", {"pair": p.pk, "key": key, "choice": "first"}).status_code == 302
    assert GoldAnswer.objects.filter(assignment_pair=gold).count() == 1
    assert Judgment.objects.filter(assignment=assignment).count() == assignment.pairs.count() - 1
    assert b'data-testid="completion-code"' in client.get(url).content


def test_failing_gold_screens_the_worker_out_with_a_distinct_code(client, gold_study):
    link = ExternalLink.objects.create(study=gold_study, platform="generic")
    page = visit(client, link, worker_id="bad")
    session = WorkerSession.objects.get()
    gold = session.assignment.pairs.get(gold__isnull=False)
    wrong = "second" if gold.a_shown_first else "first"
    for p in session.assignment.pairs.all():
        allocation.do_mark_shown(p)  # as the rating page does before an answer
        recording.do_record_judgment(
            p, idempotency_key=f"k{p.pk}", answer=Answer(choice=wrong if p.gold_id else "first")
        )
    assert Rater.objects.get(pk=session.rater_id).screened_out and GoldAnswer.objects.get().correct is False
    done = client.get(page["Location"]).content.decode()
    assert link.screened_code in done and "did not pass" in done
    again = visit(client, link, worker_id="bad", session_id="second-visit")
    assert b"no more work for you here" in again.content


def test_answers_faster_than_the_minimum_time_are_refused(study):
    study.crowd_settings.min_seconds_per_pair = 30
    study.crowd_settings.save()
    pair = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "fast")).pairs.first()
    allocation.do_mark_shown(pair)
    with pytest.raises(ServiceError, match="at least 30 seconds per pair"):
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key="k", answer=Answer(choice="first"))
    assert not Judgment.objects.exists()


def test_external_question_xml_escapes_and_requires_https():
    xml = sites.external_question_xml("https://x.example/x/t/?a=1&b=2")
    assert "<ExternalURL>https://x.example/x/t/?a=1&amp;b=2</ExternalURL>" in xml
    assert "<FrameHeight>0</FrameHeight>" in xml
    with pytest.raises(ServiceError, match="https address"):
        sites.external_question_xml("http://x.example/")


def test_the_external_link_page_and_command(researcher_client, study, settings):
    settings.SITE_URL = "https://seplab.example.org"
    researcher_client.post(reverse("external_links", args=[study.pk]), {"platform": "mturk"})
    page = researcher_client.get(reverse("external_links", args=[study.pk])).content.decode()
    link = ExternalLink.objects.get()
    assert f"https://seplab.example.org{link.path()}" in page and "ExternalQuestion" in page
    out = StringIO()
    call_command(
        "external_link", "--study", "small", "--platform", "prolific", "--base-url", "https://s.example", stdout=out
    )
    assert "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}" in out.getvalue()
    with pytest.raises(CommandError, match="needs an https address.*--base-url"):
        call_command(
            "external_link",
            "--study",
            "small",
            "--platform",
            "mturk",
            "--base-url",
            "http://s.example",
            stdout=StringIO(),
        )


@pytest.mark.django_db(transaction=True)
def test_concurrent_arrivals_get_distinct_places(researcher):
    study = creation.do_create_study(researcher, "rush", study_jsonl(2), "r.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 2, "judgments_per_assignment": 5}, None)  # one item each
    link = ExternalLink.objects.create(study=study, platform="generic")
    barrier = threading.Barrier(6)
    errors = []

    def arrive(n: int) -> None:
        try:
            barrier.wait()
            Client(REMOTE_ADDR=f"198.51.100.{n}").get(link.path(), {"worker_id": f"w{n}"})
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=arrive, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    places = list(AssignmentTask.objects.values_list("task_id", "slot"))
    assert len(places) == 4 == len(set(places))  # 2 items x 2 raters; the other two workers get no work
    assert WorkerSession.objects.filter(assignment__isnull=True).count() == 2


def test_attention_checks_are_generated_or_written_on_the_page(researcher_client, study):
    researcher_client.post(reverse("gold_pairs", args=[study.pk]), {"generate": "1", "count": 3})
    golds = list(GoldPair.objects.filter(study=study))
    assert len(golds) == 3
    for g in golds:
        assert sorted(g.bad_output.split()) == sorted(g.good_output.split()) and g.bad_output != g.good_output
    researcher_client.post(
        reverse("gold_pairs", args=[study.pk]), {"input": "2 + 2?", "good_output": "4", "bad_output": "banana"}
    )
    assert GoldPair.objects.filter(study=study).count() == 4
    page = researcher_client.get(reverse("external_links", args=[study.pk])).content.decode()
    assert "4 gold pairs" in page


def test_workers_below_the_bar_are_flagged_before_they_are_screened(researcher_client, client, gold_study):
    gold_study.crowd_settings.screen_min_gold = 5
    gold_study.crowd_settings.save()
    link = ExternalLink.objects.create(study=gold_study, platform="generic")
    visit(client, link, worker_id="shaky")
    session = WorkerSession.objects.get()
    gold = session.assignment.pairs.get(gold__isnull=False)
    allocation.do_mark_shown(gold)  # as the rating page does before an answer
    recording.do_record_judgment(
        gold, idempotency_key="g", answer=Answer(choice="second" if gold.a_shown_first else "first")
    )
    page = researcher_client.get(reverse("external_links", args=[gold_study.pk])).content.decode()
    assert "flagged: below the accuracy bar" in page and "0 / 1" in page
    assert not Rater.objects.get(pk=session.rater_id).screened_out
