"""Crowd places are claimed as work is shown. A crowd worker or open-link visitor who has answered
nothing holds the task on their screen (one item's pairs) and no more; the rest of their assignment is claimed a
task at a time as they reach it; one network holds at most ``UNANSWERED_PER_CLIENT`` unanswered places; and one
client never fills a link's launch cap. A place is a task's rater slot (an item with its sampled pairs), the
smallest unit the plan gives out, so "the pair on the screen" is the item on the screen."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from annotation import models
from annotation.crowd import sites
from annotation.elicitation import Answer
from annotation.models import Assignment, AssignmentTask, ExternalLink, Judgment, Rater, Task
from annotation.rating import allocation, attention, recording
from annotation.studies import creation, enrolment, lifecycle
from tests.conftest import found, study_jsonl

PAIRS_PER_ITEM = 5  # conftest's studies: K = N = 5, so every task (item) shows five pairs


def _study(researcher, items: int, per_assignment: int, raters_per_item: int = 1):
    study = creation.do_create_study(researcher, "claims", study_jsonl(items), "c.jsonl")
    return lifecycle.do_update_settings(
        study, {"raters_per_item": raters_per_item, "judgments_per_assignment": per_assignment}, None
    )


def _held(assignment: Assignment) -> int:
    return AssignmentTask.objects.filter(assignment=assignment, slot__isnull=False).count()


def _answer_on_page(client: Client, url: str) -> str:
    """Answer the pair on the rating page (as a browser without JavaScript); returns the page shown next."""
    page = client.get(url).content.decode()
    fields = {n: found(rf'name="{n}" value="([^"]*)"', page).group(1) for n in ("pair", "key")}
    assert client.post(url + "submit/", {**fields, "choice": "first"}).status_code == 302
    return client.get(url).content.decode()


def test_a_worker_who_has_answered_nothing_holds_only_the_item_on_their_screen(researcher):
    study = _study(researcher, items=6, per_assignment=3 * PAIRS_PER_ITEM)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    worker = Client(REMOTE_ADDR="198.51.100.7")
    response = worker.get(link.path(), {"worker_id": "w1"})
    assert response.status_code == 302
    assignment = Assignment.objects.get()
    assert _held(assignment) == 1 and assignment.n_pairs == PAIRS_PER_ITEM
    assert assignment.unclaimed == 2 * PAIRS_PER_ITEM
    url = response["Location"]
    page = worker.get(url).content.decode()
    assert "Pair 1 of 15" in page  # the whole assignment's size, though only the first item is held
    for number in range(2, PAIRS_PER_ITEM + 1):
        page = _answer_on_page(worker, url)
        assert f"Pair {number} of 15" in page
    assert _held(assignment) == 1  # still the first item: its pairs are on the screen one after another
    page = _answer_on_page(worker, url)  # the first item's last pair: the next item is claimed now
    assignment.refresh_from_db()
    assert "Pair 6 of 15" in page and _held(assignment) == 2 and assignment.unclaimed == PAIRS_PER_ITEM
    for _ in range(2 * PAIRS_PER_ITEM):
        page = _answer_on_page(worker, url)
    assignment.refresh_from_db()
    assert assignment.status == "completed" and assignment.n_pairs == 15 and assignment.unclaimed == 0
    assert 'data-testid="completion-code"' in page
    assert Judgment.objects.filter(assignment=assignment).count() == 15
    assert set(Task.objects.values_list("taken", flat=True)) == {0, 1} and Task.objects.filter(taken=1).count() == 3


def test_an_assignment_promises_no_more_pairs_than_the_items_left_to_the_worker(researcher):
    """The newcomer's defect: 3 items and an assignment of 5 items' pairs said "Pair 1 of 25" and finished at 15
    while the preview said 15. The assignment's size is capped at the items still open to the worker."""
    study = _study(researcher, items=3, per_assignment=5 * PAIRS_PER_ITEM)
    assert allocation.assignment_size(study).pairs == 3 * PAIRS_PER_ITEM  # what the preview and welcome say
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    worker = Client(REMOTE_ADDR="198.51.100.7")
    url = worker.get(link.path(), {"worker_id": "w1"})["Location"]
    assignment = Assignment.objects.get()
    assert assignment.n_pairs == PAIRS_PER_ITEM and assignment.unclaimed == 2 * PAIRS_PER_ITEM
    page = worker.get(url).content.decode()
    assert "Pair 1 of 15" in page
    for number in range(2, 3 * PAIRS_PER_ITEM + 1):
        page = _answer_on_page(worker, url)
        if number <= 3 * PAIRS_PER_ITEM - 1:
            assert f"Pair {number} of 15" in page
    page = _answer_on_page(worker, url)
    assignment.refresh_from_db()
    assert assignment.status == "completed" and assignment.n_pairs == 15 and 'data-testid="completion-code"' in page
    assert 'data-testid="rate-more"' not in page  # a crowd worker submits the code; no more work is offered


def test_a_rater_with_nothing_left_is_not_offered_more(researcher):
    """The newcomer's dead end: a rater link's completed page offered "Rate 12 more pairs", and Enter led to
    "Nothing left to rate" with the completion code gone. Now it offers what is left, or says nothing is."""
    study = _study(researcher, items=3, per_assignment=2 * PAIRS_PER_ITEM)
    rater = enrolment.do_create_rater_link(study, "r1")
    client = Client()
    url = client.post(reverse("rater_start", args=[rater.token()]))["Location"]
    for _ in range(2 * PAIRS_PER_ITEM):
        page = _answer_on_page(client, url)
    assert 'data-testid="completion-code"' in page
    assert found(r'data-testid="rate-more">\s*Rate (\d+) more', page).group(1) == str(PAIRS_PER_ITEM)  # 1 item left
    url = client.post(reverse("rater_start", args=[rater.token()]))["Location"]
    for _ in range(PAIRS_PER_ITEM):
        page = _answer_on_page(client, url)
    assert 'data-testid="completion-code"' in page and 'data-testid="rate-more"' not in page
    assert 'data-testid="nothing-more"' in page


def test_a_worker_arriving_after_another_is_promised_the_items_no_one_holds(researcher):
    study = _study(researcher, items=3, per_assignment=5 * PAIRS_PER_ITEM)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    Client(REMOTE_ADDR="198.51.100.7").get(link.path(), {"worker_id": "w1"})
    second = Client(REMOTE_ADDR="198.51.100.8")
    url = second.get(link.path(), {"worker_id": "w2"})["Location"]
    # one item on each screen, one item left: the second worker is promised two items' pairs, not five
    assert Assignment.objects.get(rater__external_id="generic:w2").unclaimed == PAIRS_PER_ITEM
    assert "Pair 1 of 10" in second.get(url).content.decode()


def test_a_drain_from_one_client_leaves_work_for_a_real_worker_elsewhere(researcher):
    """The attack: invented worker ids from one client once took every place of a 10-item study (3 sessions of
    10 held for the first-answer window). Now a session holds one item until it answers, and one network holds at
    most UNANSWERED_PER_CLIENT unanswered sessions."""
    study = _study(researcher, items=10, per_assignment=10 * PAIRS_PER_ITEM)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    bot = Client(REMOTE_ADDR="203.0.113.66")
    codes = [bot.get(link.path(), {"worker_id": f"bot{n}"}).status_code for n in range(60)]
    cap = allocation.UNANSWERED_PER_CLIENT
    assert codes[:cap] == [302] * cap and set(codes[cap:]) == {429}
    assert AssignmentTask.objects.filter(slot__isnull=False).count() == cap  # 3 of the 10 items, not all of them
    real = Client(REMOTE_ADDR="198.51.100.5").get(link.path(), {"worker_id": "real"})
    assert real.status_code == 302
    mine = Assignment.objects.get(rater__external_id="generic:real")
    # its first item, and the rest capped at the 6 items no session holds (the bots' 3 are not promised)
    assert _held(mine) == 1 and mine.unclaimed == 6 * PAIRS_PER_ITEM
    # a refused bot session comes back later and is still refused while its network's three have not answered
    assert bot.get(link.path(), {"worker_id": "bot5"}).status_code == 429
    # once one of them answers, another person on that network may start
    first = Assignment.objects.filter(rater__external_id="generic:bot0").get()
    shown = first.pairs.order_by("position").first()
    allocation.do_mark_shown(shown)
    recording.do_record_judgment(shown, idempotency_key="bot0-1", answer=Answer(choice="first"))
    assert bot.get(link.path(), {"worker_id": "bot5"}).status_code == 302


def test_open_link_visitors_of_one_network_hold_at_most_three_unanswered_places(client, researcher):
    study = _study(researcher, items=10, per_assignment=2 * PAIRS_PER_ITEM)
    study.open_link_enabled = True
    study.save()
    url = study.open_link_path()
    codes = []
    for _ in range(5):
        visitor = Client(REMOTE_ADDR="2001:db8:7:7::9")  # a fresh browser each time, one /64
        codes.append(visitor.post(url).status_code)
    cap = allocation.UNANSWERED_PER_CLIENT
    assert codes == [302] * cap + [429] * (5 - cap)
    assert AssignmentTask.objects.filter(slot__isnull=False).count() == cap
    assert set(Rater.objects.values_list("client", flat=True)) == {"2001:db8:7:7::/64"}
    assert Client(REMOTE_ADDR="198.51.100.9").post(url).status_code == 302  # another network gets in


def test_an_assignment_that_runs_out_of_work_completes_with_what_it_had(researcher):
    """Claimed as shown, a worker's assignment can find the study full when they reach its next item: it then
    completes with the pairs they answered (and its completion code), never waits for places that do not come."""
    study = _study(researcher, items=2, per_assignment=2 * PAIRS_PER_ITEM)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    first = Client(REMOTE_ADDR="198.51.100.1")
    url = first.get(link.path(), {"worker_id": "one"})["Location"]
    assert Client(REMOTE_ADDR="198.51.100.2").get(link.path(), {"worker_id": "two"}).status_code == 302
    for _ in range(PAIRS_PER_ITEM):
        page = _answer_on_page(first, url)
    one = Assignment.objects.get(rater__external_id="generic:one")
    assert one.status == "completed" and one.n_pairs == PAIRS_PER_ITEM and one.unclaimed == 0
    assert 'data-testid="completion-code"' in page


def test_the_rating_page_claims_the_next_item_when_the_submit_could_not(client, researcher):
    """When the last held pair is answered while every open task is being claimed by other starts, the submit stores
    the answer and leaves the claim; the rating page makes it (nothing waits for ever)."""
    study = _study(researcher, items=4, per_assignment=2 * PAIRS_PER_ITEM)
    visitor = enrolment.do_join_open_link(study, "198.51.100.3")
    assignment = allocation.do_start_assignment(visitor)
    for shown in assignment.pairs.order_by("position"):
        allocation.do_mark_shown(shown)
        recording.do_record_judgment(shown, idempotency_key=f"k{shown.pk}", answer=Answer(choice="first"))
    assignment.refresh_from_db()
    assert assignment.n_pairs == 2 * PAIRS_PER_ITEM  # the submit claimed the next item
    # the state a busy moment leaves: every held pair answered, the next item not yet claimed
    last = AssignmentTask.objects.filter(assignment=assignment).order_by("-pk").first()
    assignment.pairs.filter(pair__item_id=last.item_id).delete()
    Task.objects.filter(pk=last.task_id).update(taken=0)
    last.delete()
    Assignment.objects.filter(pk=assignment.pk).update(n_pairs=PAIRS_PER_ITEM, unclaimed=PAIRS_PER_ITEM)
    page = client.get(reverse("rate", args=[visitor.token(), assignment.pk])).content.decode()
    assignment.refresh_from_db()
    assert assignment.n_pairs == 2 * PAIRS_PER_ITEM and _held(assignment) == 2
    assert f"Pair {PAIRS_PER_ITEM + 1} of {2 * PAIRS_PER_ITEM}" in page


def test_attention_checks_stay_at_the_rate_as_the_assignment_grows(researcher):
    study = _study(researcher, items=12, per_assignment=12 * PAIRS_PER_ITEM)
    study.crowd_settings.gold_rate = 0.1
    study.crowd_settings.save()
    for n in range(8):
        attention.do_add_gold_pair(study, f"Question {n}?", f"Right answer {n}.", "asdf qwer")
    visitor = enrolment.do_join_open_link(study, "198.51.100.4")
    assignment = allocation.do_start_assignment(visitor)
    position = 0
    while True:
        assignment.refresh_from_db()
        pairs = list(assignment.pairs.order_by("position"))
        if position >= len(pairs):
            break
        shown = pairs[position]
        allocation.do_mark_shown(shown)
        if shown.gold_id is not None:
            good = "first" if shown.a_shown_first else "second"
            recording.do_record_judgment(shown, idempotency_key=f"g{shown.pk}", answer=Answer(choice=good))
        else:
            recording.do_record_judgment(shown, idempotency_key=f"k{shown.pk}", answer=Answer(choice="first"))
        position += 1
        study_pairs = sum(1 for p in pairs[:position] if p.pair_id is not None)
        golds = sum(1 for p in pairs if p.gold_id is not None)  # every check the assignment holds so far
        assert golds <= 0.1 * (study_pairs + PAIRS_PER_ITEM) + 1  # never ahead of the rate by more than one
    assignment.refresh_from_db()
    pairs = list(assignment.pairs.all())
    golds = [p.gold_id for p in pairs if p.gold_id is not None]
    assert assignment.status == "completed" and len(pairs) - len(golds) == 12 * PAIRS_PER_ITEM
    assert abs(len(golds) - 0.1 * 12 * PAIRS_PER_ITEM) < 1 and len(set(golds)) == len(golds)  # six, all distinct


def test_one_client_never_fills_a_small_launch_cap(researcher):
    study = _study(researcher, items=20, per_assignment=PAIRS_PER_ITEM, raters_per_item=3)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    link.launch_per_minute = 4
    link.save()
    bot = Client(REMOTE_ADDR="203.0.113.9")
    codes = [bot.get(link.path(), {"worker_id": f"b{n}"}).status_code for n in range(6)]
    assert codes == [302, 302, 429, 429, 429, 429]  # half of the link's four
    assert Client(REMOTE_ADDR="198.51.100.11").get(link.path(), {"worker_id": "p1"}).status_code == 302


def test_whole_items_only_and_personal_links_keep_their_whole_assignment(researcher):
    """An assignment grows by whole items up to its size, as a start takes them (7 pairs a go with 5 per item: one
    item, never two); a rater with a personal link gets the whole assignment at the start and nothing later."""
    study = _study(researcher, items=6, per_assignment=PAIRS_PER_ITEM + 2)
    personal = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "person"))
    assert personal.n_pairs == PAIRS_PER_ITEM and personal.unclaimed == 0
    visitor = enrolment.do_join_open_link(study, "198.51.100.8")
    assignment = allocation.do_start_assignment(visitor)
    assert assignment.unclaimed == 0  # the 2 pairs left make no whole item: the page says "of 5", as it will be
    for shown in assignment.pairs.order_by("position"):
        allocation.do_mark_shown(shown)
        recording.do_record_judgment(shown, idempotency_key=f"k{shown.pk}", answer=Answer(choice="first"))
    assignment.refresh_from_db()
    assert assignment.status == "completed" and assignment.n_pairs == PAIRS_PER_ITEM and _held(assignment) == 1


def _answer_all_held(assignment: Assignment) -> None:
    for shown in assignment.pairs.filter(judgment__isnull=True).order_by("position"):
        allocation.do_mark_shown(shown)
        recording.do_record_judgment(shown, idempotency_key=f"k{shown.pk}", answer=Answer(choice="first"))


def test_an_open_assignment_never_shows_the_completion_code(client, researcher, monkeypatch):
    """When the next item cannot be claimed at the moment (every open item held by other starts), the page says it is
    finding the next one and goes on by itself; a paused study says paused. Never the code while work is owed."""
    study = _study(researcher, items=6, per_assignment=2 * PAIRS_PER_ITEM)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    url = Client(REMOTE_ADDR="198.51.100.21").get(link.path(), {"worker_id": "w"})["Location"]
    assignment = Assignment.objects.get()
    monkeypatch.setattr(allocation, "do_try_claim_next", lambda a, now: None)  # the busy moment, however long it lasts
    _answer_all_held(assignment)
    assignment.refresh_from_db()
    assert assignment.status == "active" and assignment.unclaimed == PAIRS_PER_ITEM
    response = client.get(url)
    page = response.content.decode()
    assert response.status_code == 503 and response["Retry-After"] == "2"
    assert 'data-testid="waiting"' in page and 'data-testid="completion-code"' not in page
    monkeypatch.undo()
    study.status = "paused"
    study.save()
    assert 'data-testid="paused"' in client.get(url).content.decode()
    study.status = "active"
    study.save()
    page = client.get(url).content.decode()  # the rating page claims it now
    assert f"Pair {PAIRS_PER_ITEM + 1} of {2 * PAIRS_PER_ITEM}" in page


def test_a_screened_out_worker_claims_nothing_more(researcher):
    study = _study(researcher, items=6, per_assignment=3 * PAIRS_PER_ITEM)
    visitor = enrolment.do_join_open_link(study, "198.51.100.22")
    assignment = allocation.do_start_assignment(visitor)
    Rater.objects.filter(pk=visitor.pk).update(screened_out=True)
    _answer_all_held(assignment)
    assignment.refresh_from_db()
    assert assignment.status == "completed" and _held(assignment) == 1


def test_an_open_assignment_counts_on_the_network_it_started_from(researcher):
    """Reopening the sessions of one network from another must not free the first network's count (the review's
    parking attack)."""
    study = _study(researcher, items=20, per_assignment=2 * PAIRS_PER_ITEM)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    first = Client(REMOTE_ADDR="203.0.113.70")
    for n in range(3):
        assert first.get(link.path(), {"worker_id": f"x{n}", "session_id": f"a{n}"}).status_code == 302
    other = Client(REMOTE_ADDR="203.0.113.71")
    for n in range(3):  # the same workers reopen from another network, in new sessions
        other.get(link.path(), {"worker_id": f"x{n}", "session_id": f"b{n}"})
    assert set(Rater.objects.values_list("client", flat=True)) == {"203.0.113.70"}
    assert first.get(link.path(), {"worker_id": "x9", "session_id": "a9"}).status_code == 429


def test_a_measured_pace_is_reused_briefly_and_a_thin_one_never(researcher):
    from django.core.cache import cache

    from annotation.models import Judgment

    study = _study(researcher, items=10, per_assignment=PAIRS_PER_ITEM, raters_per_item=3)
    rater = enrolment.do_create_rater_link(study, "timed")
    _answer_all_held(allocation.do_start_assignment(rater))
    Judgment.objects.update(time_on_task_ms=8000)  # 5 timed judgments: fewer than MIN_TIMED_JUDGMENTS
    assert allocation.seconds_per_pair(study) == (models.DEFAULT_SECONDS_PER_PAIR, False)
    assert cache.get(f"pace:{study.pk}") is None
    _answer_all_held(allocation.do_start_assignment(rater))
    Judgment.objects.update(time_on_task_ms=8000)
    assert allocation.seconds_per_pair(study) == (8.0, True)
    Judgment.objects.update(time_on_task_ms=20000)
    assert allocation.seconds_per_pair(study) == (8.0, True)  # reused for PACE_CACHE_SECONDS
    cache.delete(f"pace:{study.pk}")
    assert allocation.seconds_per_pair(study) == (20.0, True)


def test_a_flood_of_implausibly_fast_answers_is_read_once_per_pace_period(researcher, django_assert_num_queries):
    """Many timed judgments, none of them a plausible reading time (a script, or raters clicking through): the
    default is kept like a measured pace, so starts do not each read the study's latest 500 judgments."""
    from django.core.cache import cache

    from annotation.models import Judgment

    study = _study(researcher, items=10, per_assignment=PAIRS_PER_ITEM, raters_per_item=3)
    rater = enrolment.do_create_rater_link(study, "fast")
    for _ in range(2):
        _answer_all_held(allocation.do_start_assignment(rater))
    Judgment.objects.update(time_on_task_ms=50)  # ten timed judgments, all under the reading floor
    assert Judgment.objects.count() >= allocation.MIN_TIMED_JUDGMENTS
    assert allocation.seconds_per_pair(study) == (models.DEFAULT_SECONDS_PER_PAIR, False)
    assert cache.get(f"pace:{study.pk}") == (models.DEFAULT_SECONDS_PER_PAIR, False)
    with django_assert_num_queries(0):
        assert allocation.seconds_per_pair(study) == (models.DEFAULT_SECONDS_PER_PAIR, False)
    cache.delete(f"pace:{study.pk}")
