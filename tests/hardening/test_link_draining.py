"""Security pass, H2: a crowd link cannot be drained with invented worker ids: new worker sessions are limited per
client and per link, a worker holds places only once they answer (a short hold, not the hour), a Prolific
link refuses visits from another Prolific study, and the researcher is warned when a link mints workers
faster than people arrive; and the unanswered assignments a link's workers hold are capped on every way a worker
starts one (the link's entry and their own start page), under a lock per link."""

from __future__ import annotations

import datetime as dt
import re
import threading

import pytest
from django.db import connections
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotation.crowd import sites
from annotation.models import Assignment, AssignmentTask, ExternalLink, Rater, WorkerSession
from annotation.rating import allocation, holds
from annotation.studies import creation, enrolment, lifecycle
from tests.conftest import study_jsonl


def test_one_client_cannot_take_every_place_with_invented_ids(researcher):
    study = creation.do_create_study(researcher, "ten", study_jsonl(30), "t.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 1, "judgments_per_assignment": 5}, None)  # one item each
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    bot = Client(REMOTE_ADDR="203.0.113.66")
    codes = [bot.get(link.path(), {"worker_id": f"bot{n}"}).status_code for n in range(40)]
    per_client, _ = sites.NEW_WORKERS_PER_CLIENT
    held = allocation.UNANSWERED_PER_CLIENT  # a network's unanswered sessions hold at most this many places
    assert codes[:held] == [302] * held and set(codes[held:]) == {429}
    assert WorkerSession.objects.count() == per_client and AssignmentTask.objects.count() == held
    # a real worker elsewhere still gets work, and a worker coming back is never refused
    assert Client(REMOTE_ADDR="198.51.100.5").get(link.path(), {"worker_id": "real"}).status_code == 302
    assert bot.get(link.path(), {"worker_id": "bot0"}).status_code == 302


def test_places_of_a_worker_who_never_answers_return_after_the_short_hold(study):
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    personal = enrolment.do_create_rater_link(study, "person")
    mine = allocation.do_start_assignment(personal)
    Client().get(link.path(), {"worker_id": "idle"})
    idle = Assignment.objects.get(rater__source="external")
    hold = study.crowd_settings.first_answer_minutes
    Assignment.objects.filter(pk__in=[idle.pk, mine.pk]).update(created=timezone.now() - dt.timedelta(minutes=hold + 1))
    allocation.do_expire_stale_assignments(study)
    idle.refresh_from_db()
    mine.refresh_from_db()
    assert idle.status == "expired" and not idle.places.filter(slot__isnull=False).exists()
    assert mine.status == "active"  # a personal link's rater reading the instructions keeps the hour


def test_a_prolific_link_refuses_another_prolific_study(client, study):
    link = sites.do_create_external_link(study, ExternalLink.Platform.PROLIFIC, "abc123")
    other = client.get(link.path(), {"PROLIFIC_PID": "p1", "STUDY_ID": "zzz", "SESSION_ID": "s1"})
    assert other.status_code == 400 and b"another Prolific study" in other.content
    assert not WorkerSession.objects.exists()
    ours = client.get(link.path(), {"PROLIFIC_PID": "p1", "STUDY_ID": "abc123", "SESSION_ID": "s1"})
    assert ours.status_code == 302


def test_the_researcher_is_warned_when_a_link_mints_workers_too_fast(researcher_client, study):
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    page = reverse("external_links", args=[study.pk])
    assert 'data-testid="minting-warning"' not in researcher_client.get(page).content.decode()
    for n in range(sites.MINT_WARNING_PER_MINUTE):
        Client(REMOTE_ADDR=f"198.51.100.{n}").get(link.path(), {"worker_id": f"w{n}"})
    warned = researcher_client.get(page).content.decode()
    assert 'data-testid="minting-warning"' in warned and f"{sites.MINT_WARNING_PER_MINUTE} new workers" in warned


def test_addresses_of_one_ipv6_64_are_one_client(researcher):
    """60 addresses of one /64 once counted as 60 clients and held most of a study's places; a /64 is one
    household or one rented server, so it is one client."""
    study = creation.do_create_study(researcher, "v6", study_jsonl(30), "t.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 1, "judgments_per_assignment": 5}, None)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    codes = [
        Client(REMOTE_ADDR=f"2001:db8:1:2::{n:x}").get(link.path(), {"worker_id": f"b{n}"}).status_code
        for n in range(60)
    ]
    held = allocation.UNANSWERED_PER_CLIENT
    assert codes.count(302) == held and codes.count(429) == 60 - held
    assert AssignmentTask.objects.count() == held
    # another /64 is another client, and one client's refusals never count against the link's launch limit
    assert Client(REMOTE_ADDR="2001:db8:1:3::1").get(link.path(), {"worker_id": "real"}).status_code == 302


def test_a_real_launch_gets_in_and_the_launch_limit_is_the_links_own(researcher_client, researcher, settings):
    """150 Prolific participants from distinct addresses within a minute once met a fixed 120 a minute (30 got
    429). The limit is now the operator's default (SEPLAB_CROWD_LAUNCH_PER_MINUTE, 600) or the link's own, 0 is
    none, and the crowd page says when it turned workers away."""
    study = creation.do_create_study(researcher, "launch", study_jsonl(200), "t.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 1, "judgments_per_assignment": 1}, None)
    link = sites.do_create_external_link(study, ExternalLink.Platform.PROLIFIC, "ps1")

    def arrive(n):
        return (
            Client(REMOTE_ADDR=f"10.{n // 250}.{n % 250}.7")
            .get(link.path(), {"PROLIFIC_PID": f"p{n}", "STUDY_ID": "ps1", "SESSION_ID": f"s{n}"})
            .status_code
        )

    assert settings.SEPLAB_CROWD_LAUNCH_PER_MINUTE == 600
    assert [arrive(n) for n in range(150)] == [302] * 150
    page = reverse("external_links", args=[study.pk])
    assert 'data-testid="launch-refused"' not in researcher_client.get(page).content.decode()
    # the link's own limit, set on the crowd page
    action = reverse("external_link_action", args=[study.pk, link.pk, "launch-limit"])
    researcher_client.post(action, {"launch_per_minute": "155"})
    link.refresh_from_db()
    assert link.launch_per_minute == 155 and link.launch_limit == 155
    codes = [arrive(n) for n in range(150, 160)]
    assert codes == [302] * 5 + [429] * 5  # 155 in this minute
    shown = researcher_client.get(page).content.decode()
    assert 'data-testid="launch-refused"' in shown and "5 new workers turned away" in shown
    researcher_client.post(action, {"launch_per_minute": "0"})  # no limit
    assert [arrive(n) for n in range(160, 170)] == [302] * 10
    bad = researcher_client.post(action, {"launch_per_minute": "lots"}, follow=True).content.decode()
    assert "must be a whole number" in bad
    link.refresh_from_db()
    assert link.launch_per_minute == 0


def test_an_open_link_visitor_who_never_answers_also_holds_places_for_the_short_while_only(client, study):
    """Open-link raters were once not under the first-answer rule (their places held for the hour)."""
    visitor = enrolment.do_join_open_link(study)
    idle = allocation.do_start_assignment(visitor)
    personal = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "person"))
    hold = study.crowd_settings.first_answer_minutes
    Assignment.objects.filter(pk__in=[idle.pk, personal.pk]).update(
        created=timezone.now() - dt.timedelta(minutes=hold + 1)
    )
    assert allocation.do_expire_stale_assignments(study) == 1
    idle.refresh_from_db()
    personal.refresh_from_db()
    assert idle.status == "expired" and not idle.places.filter(slot__isnull=False).exists()
    assert personal.status == "active"  # a rater with a personal link keeps the hour


PROXY = "10.0.0.2"  # the README's nginx, as the app sees it


def arrive(link, address: str, worker: str) -> int:
    """A new worker through the proxy: the client's address is what the proxy appended to X-Forwarded-For
    (annotation.ratelimit.client_ip, python-ipware)."""
    return Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=address).get(link.path(), {"worker_id": worker}).status_code


def big_study(researcher, name: str, items: int = 120):
    study = creation.do_create_study(researcher, name, study_jsonl(items), "t.jsonl")
    return lifecycle.do_update_settings(study, {"raters_per_item": 1, "judgments_per_assignment": 5}, None)


def test_addresses_across_one_ipv6_48_are_one_site(settings, researcher):
    """80 addresses of one /48, each in a /64 (and a /56) of its own, once took every place of a study in 5 s: each
    /64 counted as a client of its own. Now the /48 is one site: its new sessions and the places its unanswered
    sessions hold are capped, and another /48 still gets in."""
    settings.BEHIND_PROXY = True
    study = big_study(researcher, "v6-48")
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    codes = [arrive(link, f"2001:db8:77:{n:x}00::{n + 1:x}", f"b{n}") for n in range(80)]
    held = holds.UNANSWERED_PER_NETWORK[48]
    assert codes.count(302) == held and codes.count(429) == 80 - held
    assert WorkerSession.objects.count() == sites.NEW_WORKERS_PER_NETWORK[48]  # the rest refused before a session
    assert Assignment.objects.filter(status="active").count() == held
    assert AssignmentTask.objects.count() == held  # one item each: nowhere near the study's 120
    assert arrive(link, "2001:db8:78::1", "real") == 302  # another /48 is another site


def test_addresses_across_one_ipv6_56_are_one_home(settings, researcher):
    settings.BEHIND_PROXY = True
    study = big_study(researcher, "v6-56")
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    codes = [arrive(link, f"2001:db8:5:ab{n:02x}::9", f"h{n}") for n in range(40)]  # 40 /64s of 2001:db8:5:ab00::/56
    held = holds.UNANSWERED_PER_NETWORK[56]
    assert codes.count(302) == held and set(codes) == {302, 429}
    assert WorkerSession.objects.count() == sites.NEW_WORKERS_PER_NETWORK[56]
    assert Assignment.objects.filter(status="active").count() == held
    # the next /56 of the same /48 is another home, within what the /48 may hold
    assert arrive(link, "2001:db8:5:ac00::1", "neighbour") == 302


def test_a_client_cannot_choose_its_network_behind_the_proxy(settings, researcher):
    """The address is the proxy's right-most hop: a client writing other /48s into X-Forwarded-For stays one site."""
    settings.BEHIND_PROXY = True
    study = big_study(researcher, "v6-spoof")
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    codes = [arrive(link, f"2001:db8:{n:x}::1, 2001:db8:99:{n:x}00::1", f"s{n}") for n in range(30)]
    assert codes.count(302) == holds.UNANSWERED_PER_NETWORK[48]


def answer_first_pair(client: Client, location: str) -> None:
    page = client.get(location).content.decode()
    found = re.search(r'name="pair" value="(\d+)"', page)
    assert found is not None, page
    pair = found.group(1)
    answered = client.post(location + "submit/", {"pair": pair, "key": f"k{pair}", "choice": "first"})
    assert answered.status_code in (200, 302)


def test_a_links_unanswered_assignments_are_capped(settings, researcher, researcher_client):
    """Invented ids from many networks (each within its own limits) could still hold every place: a link's workers
    hold at most SEPLAB_CROWD_UNANSWERED_PER_LINK assignments without an answer; an answer makes room."""
    settings.SEPLAB_CROWD_UNANSWERED_PER_LINK = 5
    study = big_study(researcher, "capped")
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    first = Client(REMOTE_ADDR="198.51.100.1")
    entered = first.get(link.path(), {"worker_id": "w0"})
    assert entered.status_code == 302
    codes = [Client(REMOTE_ADDR=f"203.0.113.{n}").get(link.path(), {"worker_id": f"w{n}"}) for n in range(1, 8)]
    assert [c.status_code for c in codes] == [302] * 4 + [429] * 3
    assert b"not answered yet" in codes[-1].content and codes[-1]["Retry-After"] == "60"
    assert Assignment.objects.filter(status="active", answered=0).count() == 5
    page = researcher_client.get(reverse("external_links", args=[study.pk])).content.decode()
    assert "5 not answered yet" in page and 'data-testid="unanswered-cap"' in page  # the researcher sees why
    answer_first_pair(first, entered["Location"])  # one of them answers: one place is theirs now, one more may start
    assert Client(REMOTE_ADDR="203.0.113.50").get(link.path(), {"worker_id": "late"}).status_code == 302
    assert Client(REMOTE_ADDR="203.0.113.51").get(link.path(), {"worker_id": "later"}).status_code == 429
    settings.SEPLAB_CROWD_UNANSWERED_PER_LINK = 6
    page = researcher_client.get(reverse("external_links", args=[study.pk])).content.decode()
    assert "5 not answered yet" in page and 'data-testid="unanswered-cap"' not in page
    # a worker who already holds places comes back to them whatever the cap
    assert Client(REMOTE_ADDR="203.0.113.1").get(link.path(), {"worker_id": "w1"}).status_code == 302


def finish(client: Client, location: str) -> None:
    """Answer every pair of the worker's assignment until the page shows the completion."""
    for _ in range(20):
        page = client.get(location).content.decode()
        if 'name="pair"' not in page:
            assert 'data-testid="completion-code"' in page, page
            return
        answer_first_pair(client, location)
    raise AssertionError("the assignment never completed")


def token_of(location: str) -> str:
    found = re.search(r"/r/([^/]+)/", location)
    assert found is not None, location
    return found.group(1)


def test_a_worker_cannot_start_past_the_cap_on_their_own_start_page(settings, researcher, researcher_client):
    """The attack: with a cap of 1, worker A finishes an assignment, B takes the one place, C is refused -- and A,
    posting to their own start page (its address is in every rating URL), got a new assignment that no session held
    and the link's count missed: 2 unanswered with the link reporting 1. Every start of a crowd worker's assignment
    is now checked, and the count is of the link's workers' unanswered assignments, however they were started."""
    settings.SEPLAB_CROWD_UNANSWERED_PER_LINK = 1
    study = creation.do_create_study(researcher, "bypass", study_jsonl(40), "t.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 1, "judgments_per_assignment": 1}, None)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    a = Client(REMOTE_ADDR="198.51.100.1")
    entered = a.get(link.path(), {"worker_id": "A"})
    finish(a, entered["Location"])
    b = Client(REMOTE_ADDR="203.0.113.9")
    taken = b.get(link.path(), {"worker_id": "B"})
    assert taken.status_code == 302
    assert Client(REMOTE_ADDR="203.0.113.10").get(link.path(), {"worker_id": "C"}).status_code == 429
    start = reverse("rater_start", args=[token_of(entered["Location"])])
    for _ in range(3):
        refused = a.post(start)
        assert refused.status_code == 429 and refused["Retry-After"] == "60"
        assert "not answered yet" in refused.content.decode()
    assert Assignment.objects.filter(status="active", answered=0).count() == 1 == holds.unanswered(link)
    # once B answers, A starts again on their own page: that assignment holds no session and still counts
    answer_first_pair(b, taken["Location"])
    again = a.post(start)
    assert again.status_code == 302
    mine = Assignment.objects.get(rater__external_id="generic:A", status="active")
    assert not WorkerSession.objects.filter(assignment=mine).exists() and holds.unanswered(link) == 1
    assert Client(REMOTE_ADDR="203.0.113.11").get(link.path(), {"worker_id": "D"}).status_code == 429
    page = researcher_client.get(reverse("external_links", args=[study.pk])).content.decode()
    assert "1 not answered yet" in page and 'data-testid="unanswered-cap"' in page


def test_an_ipv6_48_cannot_go_past_its_share_on_the_workers_own_start_page(settings, researcher):
    """The /48's share of a link's unanswered assignments holds on a worker's own start page too."""
    settings.SEPLAB_CROWD_UNANSWERED_PER_LINK = 0  # no link cap: only the network's share
    study = creation.do_create_study(researcher, "v6-own", study_jsonl(60), "t.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 1, "judgments_per_assignment": 1}, None)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    first = Client(REMOTE_ADDR="2001:db8:66:100::1")
    entered = first.get(link.path(), {"worker_id": "first"})
    finish(first, entered["Location"])
    share = holds.UNANSWERED_PER_NETWORK[48]
    codes = [
        Client(REMOTE_ADDR=f"2001:db8:66:{n + 2:x}00::1").get(link.path(), {"worker_id": f"s{n}"}).status_code
        for n in range(share)
    ]
    assert codes == [302] * share
    refused = first.post(reverse("rater_start", args=[token_of(entered["Location"])]))
    assert refused.status_code == 429 and "Several people on your network" in refused.content.decode()
    assert Assignment.objects.filter(status="active", answered=0).count() == share


@pytest.mark.django_db(transaction=True)
def test_starts_at_once_through_the_entry_and_own_start_pages_hold_no_more_than_the_cap(
    settings, researcher, monkeypatch
) -> None:
    """Real threads: six new workers through the link's entry and six returning workers on their own start pages
    start together. Each waits, once it holds its link's lock, for all twelve to arrive there (a barrier, given up
    after a few seconds): without the lock all twelve would count an empty link together; with it, the others
    wait for the lock and the count includes every assignment committed before. Exactly the cap's worth start."""
    settings.SEPLAB_CROWD_UNANSWERED_PER_LINK = 3
    study = creation.do_create_study(researcher, "together", study_jsonl(60), "t.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 1, "judgments_per_assignment": 1}, None)
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    returning = []
    for n in range(6):
        worker = Client(REMOTE_ADDR=f"198.51.100.{n + 1}")
        location = worker.get(link.path(), {"worker_id": f"back{n}"})["Location"]
        finish(worker, location)
        returning.append((worker, reverse("rater_start", args=[token_of(location)])))
    assert holds.unanswered(link) == 0
    together = threading.Barrier(12)
    at_the_count = threading.Barrier(12)
    real = holds._lock_links
    counted: list[int] = []

    def locked_then_wait(rater: Rater) -> list[int]:
        links = real(rater)
        counted.append(rater.pk)
        try:
            at_the_count.wait(3)
        except threading.BrokenBarrierError:  # the link's lock lets one start through at a time
            pass
        return links

    monkeypatch.setattr(holds, "_lock_links", locked_then_wait)
    codes: list[int] = []
    errors: list[BaseException] = []

    def start(n: int) -> None:
        try:
            together.wait(10)
            if n < 6:
                worker, url = returning[n]
                codes.append(worker.post(url).status_code)
            else:
                new = Client(REMOTE_ADDR=f"203.0.113.{n + 1}")
                codes.append(new.get(link.path(), {"worker_id": f"new{n}"}).status_code)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=start, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [] and len(codes) == 12 and len(counted) == 12  # every start reached the count
    assert codes.count(302) == 3 and codes.count(429) == 9
    assert Assignment.objects.filter(study=study, status="active", answered=0).count() == 3 == holds.unanswered(link)
