"""A study whose answers cover several outputs (Study.answer_unit): one task per item, a screen that shows the item's
outputs in an order drawn for it, an answer read against that screen and stored once with the judgments it implies,
refused precisely and shown again as given, counted in the assignment -- without script (a place per output, best and
worst radio buttons; the browser test drives the drag and the keys)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from django.urls import reverse

from annotation.errors import ServiceError
from annotation.models import Assignment, Judgment, Ranking, Task, TaskPair
from annotation.rating import allocation, rankings, recording
from annotation.studies import creation, enrolment, lifecycle
from annotation.views.forms import StudySettingsForm, settings_as_json
from tests.conftest import found

SYSTEMS = ("s1", "s2", "s3", "s4")


def four_systems(researcher, name="ranked", unit="rank", **settings):
    lines = [
        json.dumps(
            {"id": f"item-{i}", "input": f"Question {i}?", "outputs": {s: [f"{s} answers {i}."] for s in SYSTEMS}}
        )
        for i in range(3)
    ]
    study = creation.do_create_study(researcher, name, ("\n".join(lines) + "\n").encode(), f"{name}.jsonl")
    changes = {"answer_unit": unit, "judgments_per_assignment": 2, "allow_skip": True, **settings}
    return lifecycle.do_update_settings(study, changes, None)


@pytest.fixture
def ranked(researcher):
    return four_systems(researcher)


def start(client, rater) -> Assignment:
    response = client.post(reverse("rater_start", args=[rater.token()]))
    assert response.status_code == 302
    return Assignment.objects.get(pk=int(response["Location"].rstrip("/").split("/")[-1]))


def shown_outputs(html: str) -> list[tuple[str, int]]:
    """(label, generation id) of each output on the screen, top first."""
    return [
        (m.group(2), int(m.group(1)))
        for m in re.finditer(r'data-generation="(\d+)"[^>]*data-testid="output-(\w)"', html)
    ]


def hidden(html: str) -> dict[str, str]:
    return {name: found(rf'name="{name}" value="([^"]*)"', html).group(1) for name in ("pair", "key")}


def test_the_plan_has_one_task_per_item_with_one_place(ranked):
    assert ranked.comparisons.count() == 6  # every system pair is compared: the boards read them all
    tasks = Task.objects.filter(study=ranked)
    assert tasks.count() == 3 and len({t.item_id for t in tasks}) == 3
    assert TaskPair.objects.filter(task__study=ranked).count() == 3


def test_a_rater_ranks_the_outputs_without_javascript(client, ranked):
    rater = enrolment.do_create_rater_link(ranked, "r1")
    assignment = start(client, rater)
    url = reverse("rate", args=[rater.token(), assignment.pk])
    page = client.get(url).content.decode()
    assert "Item 1 of 2" in page and "Put the outputs in order, the best first." in page
    outputs = shown_outputs(page)
    assert [label for label, _ in outputs] == ["A", "B", "C", "D"]
    assert page.count('<option value="4"') == 4  # each output's place, 1 to 4
    again = shown_outputs(client.get(url).content.decode())
    assert again == outputs  # the same draw on a reload
    submit = reverse("rate_submit", args=[rater.token(), assignment.pk])
    # B best, then D, A, C
    places = {f"place_{g}": {"A": 3, "B": 1, "C": 4, "D": 2}[label] for label, g in outputs}
    response = client.post(submit, {**hidden(page), **places})
    assert response.status_code == 302
    ranking = Ranking.objects.get()
    by_label = dict(outputs)
    assert ranking.order == [by_label[x] for x in "BDAC"] and ranking.shown == [g for _, g in outputs]
    assert ranking.assignment_pair_id is not None and ranking.time_on_task_ms is not None
    judgments = Judgment.objects.filter(ranking=ranking)
    assert judgments.count() == 6 and set(judgments.values_list("assignment_id", flat=True)) == {assignment.pk}
    assert all(j.assignment_pair_id is None for j in judgments)
    assignment.refresh_from_db()
    assert assignment.answered == 1
    # the same form again (a double click, the back button): stored once
    client.post(submit, {**hidden(page), **places})
    assert Ranking.objects.count() == 1 and Judgment.objects.count() == 6
    assert "Item 2 of 2" in client.get(url).content.decode()


def test_a_refused_ranking_names_what_to_fix_and_keeps_what_was_given(client, ranked):
    rater = enrolment.do_create_rater_link(ranked, "r1")
    assignment = start(client, rater)
    page = client.get(reverse("rate", args=[rater.token(), assignment.pk])).content.decode()
    outputs = shown_outputs(page)
    submit = reverse("rate_submit", args=[rater.token(), assignment.pk])
    shared = {f"place_{g}": p for (_, g), p in zip(outputs, (1, 2, 2, 3), strict=True)}
    refused = client.post(submit, {**hidden(page), **shared})
    assert refused.status_code == 400
    text = refused.content.decode()
    assert "Two outputs share place 2: give each its own place." in text
    assert text.count('" selected>2<') == 2 and text.count('" selected>1<') == 1  # what was given, shown again
    missing = client.post(submit, {**hidden(page), **{f"place_{outputs[0][1]}": 1}})
    assert "Give every output a place, from 1 (the best) to 4." in missing.content.decode()
    assert not Ranking.objects.exists() and not Judgment.objects.exists()


def test_a_best_worst_screen_shows_some_outputs_and_stores_what_they_imply(client, researcher):
    study = four_systems(researcher, "bws", "best_worst", outputs_shown=3)
    rater = enrolment.do_create_rater_link(study, "r1")
    assignment = start(client, rater)
    page = client.get(reverse("rate", args=[rater.token(), assignment.pk])).content.decode()
    assert "Which output is the best, and which is the worst?" in page
    outputs = shown_outputs(page)
    assert len(outputs) == 3
    submit = reverse("rate_submit", args=[rater.token(), assignment.pk])
    same = client.post(submit, {**hidden(page), "best": outputs[0][1], "worst": outputs[0][1]})
    assert "The best and the worst are two different outputs." in same.content.decode()
    client.post(submit, {**hidden(page), "best": outputs[2][1], "worst": outputs[0][1]})
    ranking = Ranking.objects.get()
    assert (ranking.kind, ranking.best_id, ranking.worst_id) == ("best_worst", outputs[2][1], outputs[0][1])
    assert ranking.implied.count() == 3  # 2K - 3 with K = 3: the whole ranking C, B, A


def test_the_screens_spread_outputs_over_positions(ranked):
    """Each system's output is as likely at every position: over 400 screens each of 4 systems sits on top about 100
    times (a binomial's 3 standard deviations: 26)."""
    item = ranked.items.first()
    tops: dict[int, int] = {}
    for screen_id in range(400):
        top = rankings.screen(ranked, screen_id, item.pk).outputs[0].generation
        tops[top] = tops.get(top, 0) + 1
    assert len(tops) == 4 and all(abs(n - 100) <= 26 for n in tops.values()), tops


def test_an_answer_not_on_the_screen_is_refused_by_the_service(ranked):
    rater = enrolment.do_create_rater_link(ranked, "r1")
    assignment = allocation.do_start_assignment(rater)
    place = assignment.pairs.first()
    allocation.do_mark_shown(place)
    screen = rankings.screen(ranked, place.pk, place.pair.item_id)
    reversed_screen = tuple(reversed(screen.shown))
    answer = rankings.RankingAnswer("rank", reversed_screen, reversed_screen)
    with pytest.raises(ServiceError, match="not on the outputs of your screen"):
        recording.do_record_ranking_answer(place, idempotency_key="k", answer=answer)
    assert not Ranking.objects.exists()


def test_a_skipped_screen_counts_as_done_and_stores_no_judgment(client, ranked):
    rater = enrolment.do_create_rater_link(ranked, "r1")
    assignment = start(client, rater)
    page = client.get(reverse("rate", args=[rater.token(), assignment.pk])).content.decode()
    submit = reverse("rate_submit", args=[rater.token(), assignment.pk])
    client.post(submit, {**hidden(page), "skip": "1", "skip_reason": "cannot_judge"})
    assignment.refresh_from_db()
    assert assignment.answered == 1 and not Judgment.objects.exists() and not Ranking.objects.exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"answer_unit": "rank", "stop_when_decided": True}, "cannot stop buying one decided pair"),
        ({"answer_unit": "best_worst", "selection_method": "diffuse-iterative"}, "The live DiffUse loop"),
    ],
)
def test_settings_that_act_pair_by_pair_are_refused_with_rankings(researcher, changes, message):
    study = four_systems(researcher, unit="pairs")
    data = {**settings_as_json(study), **changes}
    data = {k: v for k, v in data.items() if v is not None and v is not False}
    form = StudySettingsForm(data, instance=study)
    assert not form.is_valid() and message in " ".join(form.errors["answer_unit"])


def test_two_systems_cannot_be_ranked(study):
    data = {
        k: v for k, v in {**settings_as_json(study), "answer_unit": "rank"}.items() if v is not None and v is not False
    }
    form = StudySettingsForm(data, instance=study)
    assert not form.is_valid() and "three systems or more" in " ".join(form.errors["answer_unit"])


def test_the_vendored_sortablejs_is_the_published_file():
    root = Path(__file__).resolve().parents[2] / "static" / "vendor" / "sortablejs"
    digest = hashlib.sha256((root / "Sortable.min.js").read_bytes()).hexdigest()
    assert digest == "bf4241bc73fef7f11c59a283a69fe8051cdd31c6d8ff5a2b9ba219e7831fcf76"  # sortablejs 1.15.7 on npm
    assert "MIT License" in (root / "LICENSE").read_text()


def test_the_researchers_preview_shows_the_ranking_screens_and_checks_their_answers(client, researcher, ranked):
    client.force_login(researcher)
    url = reverse("study_preview", args=[ranked.pk])
    page = client.get(url, {"seed": 7}).content.decode()
    assert "Put the outputs in order, the best first." in page and "Item 1 of 2" in page
    outputs = shown_outputs(page)
    assert outputs == shown_outputs(client.get(url, {"seed": 7}).content.decode())  # the same draw again
    refused = client.get(url, {"seed": 7, "n": 1, **{f"place_{g}": 1 for _, g in outputs}}).content.decode()
    assert "Two outputs share place 1" in refused and "Item 1 of 2" in refused
    places = {f"place_{g}": i + 1 for i, (_, g) in enumerate(outputs)}
    assert "Item 2 of 2" in client.get(url, {"seed": 7, "n": 1, **places}).content.decode()
    assert not Ranking.objects.exists() and not Judgment.objects.exists()


def test_the_welcome_and_the_completion_count_items_not_pairs(client, ranked):
    rater = enrolment.do_create_rater_link(ranked, "r1")
    welcome = client.get(reverse("rater_home", args=[rater.token()])).content.decode()
    assert "<strong>2 items</strong>" in welcome and "2 pairs" not in welcome
    assignment = start(client, rater)
    url = reverse("rate", args=[rater.token(), assignment.pk])
    for _ in range(2):
        page = client.get(url).content.decode()
        places = {f"place_{g}": i + 1 for i, (_, g) in enumerate(shown_outputs(page))}
        client.post(reverse("rate_submit", args=[rater.token(), assignment.pk]), {**hidden(page), **places})
    done = client.get(url).content.decode()
    assert "Assignment complete" in done and "Rate 1 more item" in done  # the third item is left


def test_a_skipped_screen_takes_no_answer_afterwards(client, ranked):
    """The skip and then the old form (a second tab, the back button): the answer is refused, the place counted once."""
    rater = enrolment.do_create_rater_link(ranked, "r1")
    assignment = start(client, rater)
    page = client.get(reverse("rate", args=[rater.token(), assignment.pk])).content.decode()
    submit = reverse("rate_submit", args=[rater.token(), assignment.pk])
    client.post(submit, {**hidden(page), "skip": "1", "skip_reason": "cannot_judge"})
    places = {f"place_{g}": i + 1 for i, (_, g) in enumerate(shown_outputs(page))}
    late = client.post(submit, {**{**hidden(page), "key": "another"}, **places})
    assert "You skipped this item, so this answer to it was not stored." in late.content.decode()
    assignment.refresh_from_db()
    assert assignment.answered == 1 and not Ranking.objects.exists() and not Judgment.objects.exists()


def test_the_default_instructions_follow_what_an_answer_covers_and_a_researchers_own_stay(researcher):
    from annotation import rater_words

    study = four_systems(researcher)  # from pairs to rankings: SepLab's default text follows
    assert study.instructions == rater_words.RANKING_INSTRUCTIONS
    study = lifecycle.do_update_settings(study, {"answer_unit": "pairs"}, None)
    assert study.instructions == rater_words.PAIR_INSTRUCTIONS
    own = lifecycle.do_update_settings(study, {"instructions": "Judge the tone."}, None)
    assert lifecycle.do_update_settings(own, {"answer_unit": "best_worst"}, None).instructions == "Judge the tone."
