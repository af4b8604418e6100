"""The practice round: a new rater answers a few attention checks with feedback before their first real
pair; practice answers are PracticeAnswer rows, never judgments or attention-check results, and nobody practises
twice."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Assignment, ExternalLink, GoldAnswer, GoldPair, Judgment, PracticeAnswer, Rater
from annotation.rating import practice
from annotation.studies import lifecycle
from tests.conftest import found


def add_golds(study, n: int) -> list[GoldPair]:
    return [
        GoldPair.objects.create(
            study=study, input=f"Gold input {i}.", good_output=f"Good answer {i}.", bad_output=f"answer {i} good."
        )
        for i in range(n)
    ]


@pytest.fixture
def practising(study):
    add_golds(study, 3)
    return lifecycle.do_update_settings(study, {"practice_pairs": 2}, None)


def practice_page(client, rater, **params):
    return client.get(reverse("rater_practice", args=[rater.token()]), params)


def gold_of(page) -> int:
    return int(found(r'name="gold" value="(\d+)"', page.content.decode()).group(1))


def expected_choice(rater, gold_id: int) -> str:
    return "first" if practice.good_first(rater, gold_id) else "second"


def test_the_first_start_goes_to_the_practice_round_not_to_an_assignment(client, practising, rater):
    response = client.post(reverse("rater_start", args=[rater.token()]))
    assert response["Location"] == reverse("rater_practice", args=[rater.token()])
    assert not Assignment.objects.exists()
    page = practice_page(client, rater).content.decode()
    assert "Practice pair 1 of 2" in page and 'data-testid="practice-notice"' in page
    assert 'data-key="1"' in page and "Output 1 <kbd>1</kbd>" in page  # the real pair's form and keys


def test_a_right_and_a_wrong_answer_get_their_feedback_then_the_real_pairs_start(client, practising, rater):
    url = reverse("rater_practice", args=[rater.token()])
    first = gold_of(practice_page(client, rater))
    right = client.post(url, {"gold": first, "choice": expected_choice(rater, first)})
    assert right.status_code == 302 and right["Location"] == f"{url}?feedback={first}"
    feedback = client.get(right["Location"]).content.decode()
    assert "Correct" in feedback and "Next practice pair" in feedback and 'data-testid="expected"' in feedback
    second = gold_of(practice_page(client, rater))
    assert second != first
    wrong_choice = "second" if expected_choice(rater, second) == "first" else "first"
    wrong = client.post(url, {"gold": second, "choice": wrong_choice}, HTTP_HX_REQUEST="true")
    content = wrong.content.decode()
    assert wrong.status_code == 200 and "<html" not in content
    assert "Not quite" in content and "deliberately worse" in content and "Start the real pairs" in content
    expected = "Output 1" if expected_choice(rater, second) == "first" else "Output 2"
    assert f"the expected answer was <strong>{expected}</strong>" in content
    assert [(a.gold_id, a.correct) for a in PracticeAnswer.objects.order_by("id")] == [(first, True), (second, False)]
    assert not Judgment.objects.exists() and not GoldAnswer.objects.exists()
    rater.refresh_from_db()
    assert rater.practice_done_at is not None
    start = client.post(reverse("rater_start", args=[rater.token()]))
    assert "/a/" in start["Location"]
    assert b"Pair 1 of 5" in client.get(start["Location"]).content


def test_a_double_submit_stores_one_practice_answer(client, practising, rater):
    url = reverse("rater_practice", args=[rater.token()])
    gold = gold_of(practice_page(client, rater))
    client.post(url, {"gold": gold, "choice": "first"})
    client.post(url, {"gold": gold, "choice": "second"}, HTTP_HX_REQUEST="true")
    [answer] = PracticeAnswer.objects.all()
    assert answer.answer == "first"


def test_a_reload_shows_the_same_pair_on_the_same_sides(client, practising, rater):
    def seen(page) -> tuple:
        html = page.content.decode()
        return gold_of(page), html.split('data-testid="output-1"')[1][:60], html.split('data-testid="output-2"')[1][:60]

    assert seen(practice_page(client, rater)) == seen(practice_page(client, rater))


def test_sides_are_random_across_raters(client, practising):
    from annotation.studies import enrolment

    golds = list(practising.gold_pairs.values_list("pk", flat=True))
    raters = [enrolment.do_create_rater_link(practising, f"r{i}") for i in range(12)]
    assert {practice.good_first(r, g) for r in raters for g in golds} == {True, False}


def test_nobody_practises_twice(client, practising, rater):
    url = reverse("rater_practice", args=[rater.token()])
    for _ in range(2):
        gold = gold_of(practice_page(client, rater))
        client.post(url, {"gold": gold, "choice": "first"})
    over = practice_page(client, rater).content.decode()
    assert 'data-testid="practice-over"' in over and 'name="gold"' not in over
    lifecycle.do_update_settings(practising, {"practice_pairs": 3}, None)  # more practice asked later
    start = client.post(reverse("rater_start", args=[rater.token()]))
    assert "/a/" in start["Location"] and PracticeAnswer.objects.count() == 2


def test_an_answer_to_a_pair_outside_the_practice_is_refused(client, practising, rater):
    other = GoldPair.objects.create(study=practising, input="x", good_output="y", bad_output="z")
    PracticeAnswer.objects.all().delete()
    plan = practice.plan(rater, [])
    outsider = next(g.pk for g in practising.gold_pairs.all() if g.pk not in plan) if other.pk in plan else other.pk
    response = client.post(reverse("rater_practice", args=[rater.token()]), {"gold": outsider, "choice": "first"})
    assert response.status_code == 400 and b"not part of your practice" in response.content
    assert not PracticeAnswer.objects.exists()


def test_a_missing_answer_is_explained_and_nothing_is_stored(client, practising, rater):
    gold = gold_of(practice_page(client, rater))
    response = client.post(reverse("rater_practice", args=[rater.token()]), {"gold": gold})
    assert response.status_code == 400 and b"Choose one of the options" in response.content
    assert not PracticeAnswer.objects.exists()


def test_fewer_attention_checks_than_asked_practise_on_those_and_the_settings_say_so(
    client, researcher_client, study, rater
):
    add_golds(study, 1)
    lifecycle.do_update_settings(study, {"practice_pairs": 3}, None)
    page = researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    assert "only 1 attention check, so raters practise on 1" in page
    assert "Practice pair 1 of 1" in practice_page(client, rater).content.decode()


def test_a_study_without_attention_checks_has_no_practice(client, researcher_client, study, rater):
    lifecycle.do_update_settings(study, {"practice_pairs": 2}, None)
    assert (
        "no attention checks yet" in researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    )
    assert "/a/" in client.post(reverse("rater_start", args=[rater.token()]))["Location"]


def test_consent_comes_before_practice(client, practising, rater):
    lifecycle.do_update_settings(practising, {"consent_text": "I agree to take part."}, None)
    assert practice_page(client, rater)["Location"] == reverse("rater_consent", args=[rater.token()])
    agreed = client.post(reverse("rater_consent", args=[rater.token()]), {"consent": "agree"})
    assert agreed["Location"] == reverse("rater_practice", args=[rater.token()])


def test_a_crowd_worker_practises_before_any_place_is_held_and_comes_back_to_their_work(client, practising):
    link = ExternalLink.objects.create(study=practising, platform="mturk")
    params = {"assignmentId": "A1", "hitId": "H1", "workerId": "W1", "turkSubmitTo": "https://workersandbox.mturk.com"}
    entry = client.get(link.path(), params)
    worker = Rater.objects.get()
    assert entry.status_code == 302 and entry["Location"].startswith(reverse("rater_practice", args=[worker.token()]))
    assert not Assignment.objects.exists()
    url = entry["Location"]
    for _ in range(2):
        page = client.get(url)
        after = found(r'name="next" value="([^"]*)"', page.content.decode()).group(1).replace("&amp;", "&")
        client.post(
            reverse("rater_practice", args=[worker.token()]), {"gold": gold_of(page), "choice": "first", "next": after}
        )
    worker.refresh_from_db()
    assert worker.practice_done_at is not None
    back = client.get(after)  # "Start the real pairs" returns to the entry with the site's parameters
    session = worker.worker_sessions.get()
    assert back.status_code == 302 and session.assignment_id is not None
    assert back["Location"] == reverse("rate", args=[worker.token(), session.assignment_id])


def test_the_return_address_after_practice_is_only_ever_a_crowd_entry_of_this_site(practising, rater):
    from annotation.crowd import sites

    link = ExternalLink.objects.create(study=practising, platform="mturk")
    assert sites.entry_return(link.path() + "?workerId=W") == link.path() + "?workerId=W"
    for bad in ("https://evil.example/x", "//evil.example" + link.path(), "/studies/1/", "javascript:alert(1)", ""):
        assert sites.entry_return(bad) == ""


def test_the_researcher_sees_each_raters_practice_results_and_consent(client, researcher_client, practising, rater):
    lifecycle.do_update_settings(practising, {"consent_text": "Agree?"}, None)
    client.post(reverse("rater_consent", args=[rater.token()]), {"consent": "agree"})
    url = reverse("rater_practice", args=[rater.token()])
    for _ in range(2):
        gold = gold_of(practice_page(client, rater))
        client.post(url, {"gold": gold, "choice": expected_choice(rater, gold)})
    page = researcher_client.get(reverse("external_links", args=[practising.pk])).content.decode()
    table = page.split('data-testid="before-first-pair"')[1].split("</section>")[0]
    assert "rater-1" in table and "2 / 2" in table and "<time datetime=" in table
    assert "New raters practise on 2 of them first" in page


def test_the_practice_page_of_a_study_without_practice_marks_nothing(client, study, rater):
    response = practice_page(client, rater)  # nothing to practise: back to the rater's welcome page
    assert response.status_code == 302 and response["Location"] == reverse("rater_home", args=[rater.token()])
    rater.refresh_from_db()
    assert rater.practice_done_at is None


def test_a_paused_study_gives_no_practice(client, practising, rater):
    lifecycle.do_set_status(practising, "paused")
    response = practice_page(client, rater)
    assert response.status_code == 503 and b"Rating is paused" in response.content


def test_nobody_practises_for_work_that_is_gone(client, practising, rater):
    from django.db.models import F

    from annotation.models import Task

    Task.objects.filter(study=practising).update(taken=F("raters_required"))  # every place held
    response = client.post(reverse("rater_start", args=[rater.token()]))
    assert b"Nothing left to rate" in response.content and not PracticeAnswer.objects.exists()
    link = ExternalLink.objects.create(study=practising, platform="mturk")
    entry = client.get(
        link.path(),
        {"assignmentId": "A1", "hitId": "H1", "workerId": "W1", "turkSubmitTo": "https://workersandbox.mturk.com"},
    )
    assert b"Nothing left to rate" in entry.content
