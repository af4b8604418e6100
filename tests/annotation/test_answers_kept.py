"""Nothing a rater gave is lost: a refused submit shows every answer again (the main choice, each further question,
the comment) and names the missing question; "change my answer" starts from the stored answers; the same on the
practice round, the researcher's preview and the German pages. Each question has keys of its own on the page."""

from __future__ import annotations

import itertools
import re
from types import SimpleNamespace

import pytest
from django.urls import reverse

from annotation import elicitation, questions
from annotation.elicitation import Answer
from annotation.models import Judgment, PracticeAnswer
from annotation.rating import allocation, recording
from annotation.studies import enrolment, lifecycle
from tests.annotation.test_practice import add_golds, gold_of, practice_page
from tests.annotation.test_rate import form_of, rate_url

FURTHER = (
    "clarity | forced_choice | Which output is clearer?\n"
    "scale | preference_scale | How much better is one than the other?\n"
    "why | optional rationale | Anything else?"
)


@pytest.fixture
def asking(study):
    return lifecycle.do_update_settings(study, {"further_questions": FURTHER, "allow_comment": True}, None)


def checked(page: str) -> dict[str, list[str]]:
    """The options a page shows selected, by field name."""
    out: dict[str, list[str]] = {}
    pattern = r'<input type="(?:radio|checkbox)" name="([^"]+)" value="([^"]+)"[^>]* checked>'
    for name, value in re.findall(pattern, page):
        out.setdefault(name, []).append(value)
    return out


def test_a_refused_submit_shows_every_answer_again_and_names_the_missing_question(client, asking):
    rater = enrolment.do_create_rater_link(asking, "kept")
    assignment = allocation.do_start_assignment(rater)
    first = client.get(rate_url(rater, assignment)).content
    given = {**form_of(first), "choice": "second", "q-scale-choice": "first:2", "comment": "Output 1 <rambles>."}
    refused = client.post(rate_url(rater, assignment, True), given)  # without JavaScript: the whole page, 400
    page = refused.content.decode()
    assert refused.status_code == 400 and not Judgment.objects.exists()
    assert "Which output is clearer? Choose one of the options before submitting." in page
    assert checked(page) == {"choice": ["second"], "q-scale-choice": ["first:2"]}
    assert ">Output 1 &lt;rambles&gt;.</textarea>" in page and "Pair 1 of 5" in page
    # the main question left out: the server names it, and keeps what was given for the others
    again = client.post(
        rate_url(rater, assignment, True),
        {**form_of(refused.content), "q-clarity-choice": "tie", "q-scale-choice": "second:1", "q-why-text": "Hm."},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "Which output is better? Choose one of the options before submitting." in again
    assert checked(again) == {"q-clarity-choice": ["tie"], "q-scale-choice": ["second:1"]}
    assert ">Hm.</textarea>" in again and not Judgment.objects.exists()
    done = client.post(
        rate_url(rater, assignment, True),
        {**form_of(again.encode()), "choice": "first", "q-clarity-choice": "tie", "q-scale-choice": "second:1"},
        HTTP_HX_REQUEST="true",
    )
    assert "Pair 2 of 5" in done.content.decode()
    j = Judgment.objects.get()
    first_, second_ = ("a", "b") if j.a_shown_first else ("b", "a")
    assert j.choice == first_ and j.answers == {
        "clarity": {"choice": "tie", "response_set": None, "strength": None},
        "scale": {"choice": second_, "response_set": None, "strength": 1},
    }


def test_every_question_has_keys_of_its_own_and_a_radio_group_is_required(client, asking):
    rater = enrolment.do_create_rater_link(asking, "keys")
    assignment = allocation.do_start_assignment(rater)
    page = client.get(rate_url(rater, assignment)).content.decode()
    keys = re.findall(r'name="([^"]+)" value="([^"]+)" data-key="([^"]+)"', page)
    assert [k for _, _, k in keys] == ["1", "2", "3", "a", "b", "c", "d", "e", "f", "g", "h"]
    assert len({k for _, _, k in keys}) == len(keys)  # no key of two options
    for _, _, key in keys:
        assert f"<kbd>{key}</kbd>" in page  # shown beside its option
    assert page.count(" required>") == len(keys)  # every radio button; the optional rationale is not required
    assert '<textarea name="q-why-text" id="id_q-why-text" rows="2" maxlength="2000">' in page


def test_change_my_answer_starts_from_the_stored_answers_and_a_refused_change_stays_a_change(client, asking):
    rater = enrolment.do_create_rater_link(asking, "changer")
    assignment = allocation.do_start_assignment(rater)
    pair = assignment.pairs.order_by("position").first()
    allocation.do_mark_shown(pair)
    recording.do_record_judgment(
        pair,
        idempotency_key="k1",
        answer=Answer(choice="second"),
        further={"clarity": Answer(choice="first"), "scale": Answer(choice="second", strength=2), "why": "Long <b>"},
        comment="A typo in 2.",
    )
    page = client.get(rate_url(rater, assignment), {"revise": pair.pk}).content.decode()
    assert 'data-testid="revising"' in page and "Pair 1 of 5" in page
    # shown where the rater saw them (display coordinates), whatever the sides of the pair
    assert checked(page) == {"choice": ["second"], "q-clarity-choice": ["first"], "q-scale-choice": ["second:2"]}
    assert ">Long &lt;b&gt;</textarea>" in page and ">A typo in 2.</textarea>" in page
    fields = {**form_of(page.encode()), "revise": "1", "choice": "first", "q-clarity-choice": "second"}
    refused = client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true").content.decode()
    assert "How much better is one than the other? Choose one of the options before submitting." in refused
    assert 'data-testid="revising"' in refused and f'name="pair" value="{pair.pk}"' in refused
    assert 'name="revise" value="1"' in refused
    assert checked(refused) == {"choice": ["first"], "q-clarity-choice": ["second"]}
    changed = client.post(
        rate_url(rater, assignment, True), {**form_of(refused.encode()), **fields, "q-scale-choice": "tie"}
    )
    assert changed.status_code == 302
    old, new = Judgment.objects.order_by("id")
    first_ = "a" if new.a_shown_first else "b"
    assert old.revised and not new.revised and new.choice == first_
    assert new.answers["scale"] == {"choice": "tie", "response_set": None, "strength": None}


def _study_like(**overrides):
    return SimpleNamespace(
        **{
            "allow_tie": True,
            "neither_option": True,
            "tie_label": "No preference",
            "neither_label": "Both are bad",
            "question": "Which?",
            "also_acceptable_question": "Also?",
            "response_set_question": "Acceptable?",
            **overrides,
        }
    )


def _offered(mode: elicitation.Mode, study) -> list[Answer]:
    """Every answer the mode accepts, built from its own form's options."""
    fieldsets = mode.fieldsets(study)
    answers = []
    for picks in itertools.product(*[[[o] for o in f.options if o.input == "radio"] or [[]] for f in fieldsets]):
        boxes = [o for f in fieldsets for o in f.options if o.input == "checkbox"]
        for n in range(len(boxes) + 1):
            for chosen in itertools.combinations(boxes, n):
                data: dict[str, list[str]] = {}
                for o in [*itertools.chain.from_iterable(picks), *chosen]:
                    data.setdefault(o.name, []).append(o.value)
                answer = mode.read(_Data(data))
                try:
                    mode.validate(study, answer)
                except elicitation.AnswerError:
                    continue
                answers.append(answer)
    return answers


class _Data(dict):
    def get(self, key, default=None):
        values = super().get(key)
        return values[-1] if values else default

    def getlist(self, key):
        return super().get(key, [])


@pytest.mark.parametrize("name", list(elicitation.MODES))
def test_a_stored_answer_reads_back_as_the_form_that_gave_it_in_every_mode(name):
    mode = elicitation.MODES[name]
    study = _study_like()
    offered = _offered(mode, study)
    assert len(offered) >= 3
    for answer, a_shown_first in itertools.product(offered, (True, False)):
        stored = mode.to_model(answer, a_shown_first)
        data = mode.form_data(mode.from_model(stored, a_shown_first))
        # the form shown for a change gives the same stored answer again, and it is one the form offers
        assert mode.to_model(mode.read(_Data(data)), a_shown_first) == stored, (answer, a_shown_first)
        shown = elicitation.selected(mode.fieldsets(study), _Data(data))
        assert {(o.name, o.value) for f in shown for o in f.options if o.checked} == {
            (n, v) for n, values in data.items() for v in values
        }


def test_a_choice_and_a_box_of_the_same_value_are_told_apart():
    study = _study_like()
    shown = elicitation.selected(
        elicitation.MODES["paired"].fieldsets(study), _Data({"choice": ["first"], "response": ["second"]})
    )
    assert [(o.name, o.value) for f in shown for o in f.options if o.checked] == [
        ("choice", "first"),
        ("response", "second"),
    ]


def test_the_practice_round_shows_a_refused_answer_again(client, study, rater):
    add_golds(study, 2)
    lifecycle.do_update_settings(study, {"practice_pairs": 2, "elicitation": "paired"}, None)
    gold = gold_of(practice_page(client, rater))
    url = reverse("rater_practice", args=[rater.token()])
    refused = client.post(url, {"gold": gold, "choice": "tie"})
    page = refused.content.decode()
    assert refused.status_code == 400 and "also mark which outputs are acceptable" in page
    assert checked(page) == {"choice": ["tie"]} and not PracticeAnswer.objects.exists()
    # the choice's radio buttons are required; the "also acceptable" boxes are checked by the server
    assert re.findall(r'type="(\w+)" name="(\w+)"[^>]* required', page) == [("radio", "choice")] * 3
    htmx = client.post(url, {"gold": gold, "choice": "tie", "response": "first"}, HTTP_HX_REQUEST="true")
    assert "Correct" in htmx.content.decode() or "Not quite" in htmx.content.decode()  # accepted once complete


def test_the_researchers_preview_shows_a_refused_answer_again(researcher_client, asking):
    url = reverse("study_preview", args=[asking.pk])
    first = researcher_client.get(url).content.decode()
    seed = first.split('name="seed" value="')[1].split('"')[0]
    refused = researcher_client.get(url, {"n": 1, "seed": seed, "choice": "tie", "q-scale-choice": "first:1"})
    page = refused.content.decode()
    assert "Pair 1 of" in page and "Which output is clearer? Choose one of the options" in page
    assert checked(page) == {"choice": ["tie"], "q-scale-choice": ["first:1"]}


def test_the_german_page_keeps_the_answers_and_names_the_question_in_german(client, asking):
    lifecycle.do_update_settings(asking, {"raters_language": "de"}, None)
    rater = enrolment.do_create_rater_link(asking, "de")
    assignment = allocation.do_start_assignment(rater)
    first = client.get(rate_url(rater, assignment)).content
    page = client.post(
        rate_url(rater, assignment, True),
        {**form_of(first), "choice": "first", "q-clarity-choice": "second", "comment": "Gut."},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "How much better is one than the other? Wählen Sie vor dem Absenden eine der Optionen." in page
    assert checked(page) == {"choice": ["first"], "q-clarity-choice": ["second"]}
    assert ">Gut.</textarea>" in page and "Ausgabe 1 <kbd>a</kbd>" in page and "Absenden" in page


def test_the_refused_form_is_built_by_one_function_for_every_page(asking):
    """The rating page, the practice round and the previews read one context for the answer part."""
    given = _Data({"choice": ["tie"], "q-clarity-choice": ["first"], "comment": ["c"]})
    page = questions.page(asking, given)
    assert page["comment_value"] == "c"
    assert [o.value for f in page["fieldsets"] for o in f.options if o.checked] == ["tie"]
    clarity = page["further"][0]["fieldsets"]
    assert [(o.value, o.key) for f in clarity for o in f.options if o.checked] == [("first", "a")]


def test_the_welcome_page_and_the_crowd_preview_list_every_questions_keys(client, asking):
    from annotation.models import ExternalLink

    rater = enrolment.do_create_rater_link(asking, "welcome")
    link = ExternalLink.objects.create(study=asking, platform="mturk")
    for page in (
        client.get(reverse("rater_home", args=[rater.token()])).content.decode(),
        client.get(link.path(), {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "H1"}).content.decode(),
    ):
        keys = page.split('<p class="muted keys">')[1].split("</p>")[0]
        # each letter with its option and its question, as the main question's digits come with their option
        assert "<kbd>a</kbd> Output 1 in “Which output is clearer?”, <kbd>b</kbd> Output 2 in" in keys
        assert "<kbd>c</kbd> No preference in “Which output is clearer?”," in keys
        assert (
            "<kbd>h</kbd> Output 2 is much better in “How much better is one than the other?”, <kbd>Enter</kbd> submit."
            in keys
        )
        assert keys.index("<kbd>1</kbd>") < keys.index("<kbd>a</kbd>")


def test_a_database_hiccup_during_a_change_shows_the_change_again_as_given(client, asking, monkeypatch):
    from django.db import OperationalError

    rater = enrolment.do_create_rater_link(asking, "hiccup")
    assignment = allocation.do_start_assignment(rater)
    pair = assignment.pairs.order_by("position").first()
    allocation.do_mark_shown(pair)
    further = {"clarity": Answer(choice="first"), "scale": Answer(choice="tie")}
    recording.do_record_judgment(pair, idempotency_key="k1", answer=Answer(choice="first"), further=further)
    page = client.get(rate_url(rater, assignment), {"revise": pair.pk}).content
    answers = {"choice": "second", "q-clarity-choice": "tie", "q-scale-choice": "first:1"}
    fields = {**form_of(page), "revise": "1", **answers}

    def down(*args, **kwargs):
        raise OperationalError("the database went away")

    monkeypatch.setattr(recording, "do_revise_judgment", down)
    failed = client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true")
    shown = failed.content.decode()
    assert failed.status_code == 503 and 'data-testid="revising"' in shown and 'name="revise" value="1"' in shown
    assert checked(shown) == {"choice": ["second"], "q-clarity-choice": ["tie"], "q-scale-choice": ["first:1"]}
    assert form_of(failed.content)["key"] == fields["key"] and Judgment.objects.count() == 1


def test_answers_given_for_another_pair_are_never_shown_on_this_one(client, asking):
    rater = enrolment.do_create_rater_link(asking, "elsewhere")
    assignment = allocation.do_start_assignment(rater)
    other = enrolment.do_create_rater_link(asking, "other")
    foreign = allocation.do_start_assignment(other).pairs.first()
    page = client.get(rate_url(rater, assignment)).content
    refused = client.post(
        rate_url(rater, assignment, True),
        {**form_of(page), "pair": foreign.pk, "choice": "second", "q-clarity-choice": "tie", "comment": "Not here."},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "That pair is not part of your assignment." in refused and "Pair 1 of 5" in refused
    assert checked(refused) == {} and "Not here." not in refused
