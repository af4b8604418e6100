"""Elicitation modes as registered units (annotation/elicitation.py), and the two things added through them:
the 5-point preference scale and the "neither is acceptable / both are bad" option."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from django.http import QueryDict
from django.urls import reverse

from analytics.core import indeterminacy
from analytics.report.assembly import study_report
from analytics.report.data import load_rows
from annotation import elicitation
from annotation.crowd import sites
from annotation.elicitation import Answer, Stored
from annotation.models import GoldPair, Judgment, Study
from annotation.rating import allocation, imports, recording
from annotation.studies import creation, enrolment, lifecycle
from selection.core import winners
from tests.annotation.test_rate import form_of, rate_url, start
from tests.conftest import study_jsonl


def unsaved_study(**settings) -> Study:
    return Study(**{"allow_tie": True, "neither_option": True, **settings})


def post(**fields) -> QueryDict:
    data = QueryDict(mutable=True)
    for name, value in fields.items():
        data.setlist(name, value if isinstance(value, list) else [value])
    return data


@pytest.mark.parametrize("name", list(elicitation.MODES))
@pytest.mark.parametrize("neither", [False, True])
def test_every_offered_option_is_read_accepted_and_has_its_own_key(name, neither):
    study = unsaved_study(elicitation=name, neither_option=neither)
    mode = study.elicitation_mode
    options = [o for fieldset in mode.fieldsets(study) for o in fieldset.options]
    keys = [o.key for o in options] + [o.alt_key for o in options if o.alt_key]
    assert len(keys) == len(set(keys)) and "Enter" not in keys
    assert (("Enter",), "submit") in mode.key_help(study)
    for option in options:
        if option.input == "radio":
            fields = {"choice": option.value}
            if name == "paired" and option.value == "tie":
                fields["response"] = ["first"]
        else:
            fields = {"response": [option.value]}
            if name == "paired":
                fields["choice"] = "first"
        mode.validate(study, mode.read(post(**fields)))  # raises if an offered option were refused


@pytest.mark.parametrize("name", list(elicitation.MODES))
def test_the_display_to_model_flip_is_the_same_in_every_mode(name):
    study = unsaved_study(elicitation=name)
    mode = study.elicitation_mode
    answer = (
        Answer(response=frozenset(["first"]))
        if name == "response_set"
        else (mode.read(post(choice="first:1")) if name == "preference_scale" else Answer(choice="first"))
    )
    mode.validate(study, answer)
    shown_first, shown_second = mode.to_model(answer, True), mode.to_model(answer, False)
    picked = (lambda s: s.response_set[0]) if name == "response_set" else (lambda s: s.choice)
    assert (picked(shown_first), picked(shown_second)) == ("a", "b")


def test_the_scale_stores_the_side_in_model_coordinates_and_the_strength():
    study = unsaved_study(elicitation="preference_scale")
    mode = study.elicitation_mode
    labels = [o.label for o in mode.fieldsets(study)[0].options]
    assert labels == [
        "Output 1 is much better",
        "Output 1 is better",
        "About the same",
        "Output 2 is better",
        "Output 2 is much better",
        "Both are bad",
    ]
    assert mode.read(post(choice="second:2")) == Answer(choice="second", strength=2)
    assert mode.to_model(Answer(choice="second", strength=2), a_shown_first=False) == Stored("a", None, 2)
    assert mode.to_model(Answer(choice="tie"), a_shown_first=True) == Stored("tie", None, None)
    for bad in ("second:3", "first", "first:x", ""):
        with pytest.raises(elicitation.AnswerError):
            mode.validate(study, mode.read(post(choice=bad)))


def test_both_bad_is_a_tie_with_no_acceptable_output_and_only_when_offered():
    forced = unsaved_study(elicitation="forced_choice")
    assert forced.elicitation_mode.to_model(Answer(choice="both_bad"), True) == Stored("tie", [], None)
    with pytest.raises(elicitation.AnswerError, match="not offered"):
        forced.elicitation_mode.validate(unsaved_study(neither_option=False), Answer(choice="both_bad"))

    sets = unsaved_study(elicitation="response_set")
    mode = sets.elicitation_mode
    assert mode.to_model(mode.read(post(response=["neither"])), False) == Stored(None, [], None)
    with pytest.raises(elicitation.AnswerError, match="choose one"):
        mode.validate(sets, Answer(response=frozenset(["neither", "first"])))
    with pytest.raises(elicitation.AnswerError, match="or 'neither is acceptable'"):
        mode.validate(sets, Answer(response=frozenset()))
    with pytest.raises(elicitation.AnswerError, match="Only the two outputs"):
        mode.validate(
            unsaved_study(elicitation="response_set", neither_option=False), Answer(response=frozenset(["neither"]))
        )

    paired = unsaved_study(elicitation="paired")
    with pytest.raises(elicitation.AnswerError, match="both are bad"):
        paired.elicitation_mode.validate(paired, Answer(choice="both_bad", response=frozenset(["first"])))
    assert paired.elicitation_mode.to_model(Answer(choice="both_bad", response=frozenset()), True) == Stored(
        "tie", [], None
    )


def test_analytics_reads_the_scale_by_its_sign_and_both_bad_as_a_tie_with_omega_zero():
    # Eq. 4 / 7 see only the side; "both are bad" and "neither is acceptable" are no preference
    assert elicitation.effective_choice("b", None) == "b"  # "B much better" is stored as choice b, strength 2
    assert elicitation.effective_choice("tie", []) == "tie"
    assert elicitation.effective_choice(None, []) == "tie"
    np.testing.assert_array_equal(indeterminacy.omega([[]], ["tie"], beta=0.3), [0.0, 0.0])
    # mixed with a forced choice of a (beta 0.3 for b): the mean of [0, 0] and [1, 0.3]
    np.testing.assert_allclose(indeterminacy.omega([[], None], ["tie", "a"], beta=0.3), [0.5, 0.15])


@pytest.fixture
def scale_study(study):
    lifecycle.do_update_settings(study, {"elicitation": "preference_scale", "neither_option": True}, None)
    return study


def test_a_scale_answer_goes_from_the_htmx_form_to_the_export_and_back(
    client, scale_study, rater, researcher, researcher_client
):
    assignment = start(client, rater)
    page = client.get(rate_url(rater, assignment)).content.decode()
    for key, value in [
        ("1", "first:2"),
        ("2", "first:1"),
        ("3", "tie"),
        ("4", "second:1"),
        ("5", "second:2"),
        ("0", "both_bad"),
    ]:
        assert f'type="radio" name="choice" value="{value}" data-key="{key}"' in page
    # Output 2 much better, then Output 1 better, then both bad
    for value in ("second:2", "first:1", "both_bad"):
        response = client.post(
            rate_url(rater, assignment, True), {**form_of(page.encode()), "choice": value}, HTTP_HX_REQUEST="true"
        )
        assert response.status_code == 200
        page = response.content.decode()
    judgments = list(Judgment.objects.order_by("id"))
    expected = [
        ("b" if judgments[0].a_shown_first else "a", None, 2),
        ("a" if judgments[1].a_shown_first else "b", None, 1),
        ("tie", [], None),
    ]
    assert [(j.choice, j.response_set, j.strength) for j in judgments] == expected

    rows = load_rows(scale_study)
    assert [r.rating for r in rows] == [winners.RATING[c] for c, _, _ in expected]

    lines = [
        json.loads(x)
        for x in researcher_client.get(reverse("judgments_export", args=[scale_study.pk, "jsonl"]))
        .getvalue()
        .decode()
        .splitlines()
    ]
    assert [(x["strength"], x["response_set"]) for x in lines] == [(2, None), (1, None), (None, [])]
    table = list(
        csv.DictReader(
            io.StringIO(
                researcher_client.get(reverse("judgments_export", args=[scale_study.pk, "csv"])).getvalue().decode()
            )
        )
    )
    assert [row["strength"] for row in table] == ["2", "1", ""]
    extensions = ["strength", "comment", "revised", "answers", "excluded", "ranking", "extra"]
    assert list(table[0])[-7:] == extensions

    copy = creation.do_create_study(researcher, "copy", services_study_file(scale_study), "c.jsonl")
    imports.do_import_judgments(copy, "".join(json.dumps(x) + "\n" for x in lines).encode(), "j.jsonl")
    assert sorted((j.choice, j.response_set, j.strength) for j in copy.judgments.all()) == sorted(
        (j.choice, j.response_set, j.strength) for j in judgments
    )


def services_study_file(study) -> bytes:
    lines = []
    for item in study.items.prefetch_related("generations__system"):
        outputs: dict[str, list[str]] = {}
        for g in sorted(item.generations.all(), key=lambda g: (g.system.name, g.sample_index)):
            outputs.setdefault(g.system.name, []).append(g.text)
        lines.append(json.dumps({"id": item.external_id, "input": item.input, "outputs": outputs}))
    return ("\n".join(lines) + "\n").encode()


def test_a_refused_answer_says_why_and_stores_nothing(client, scale_study, rater):
    assignment = start(client, rater)
    page = client.get(rate_url(rater, assignment)).content
    response = client.post(rate_url(rater, assignment, True), {**form_of(page), "choice": "second:7"})
    assert response.status_code == 400 and b"That option is not offered" in response.content
    assert not Judgment.objects.exists()


def test_a_human_who_says_both_are_bad_gives_omega_zero_against_a_judge(study, rater):
    lifecycle.do_update_settings(study, {"neither_option": True}, None)
    assignment = allocation.do_start_assignment(rater)
    pair = assignment.pairs.select_related(
        "pair__item", "pair__generation_a__system", "pair__generation_b__system"
    ).first()
    allocation.do_mark_shown(pair)  # as the rating page does before an answer
    recording.do_record_judgment(pair, idempotency_key="h", answer=Answer(choice="both_bad"))
    p = pair.pair
    judge = {
        "item": p.item.external_id,
        "system_a": p.generation_a.system.name,
        "sample_a": p.generation_a.sample_index,
        "system_b": p.generation_b.system.name,
        "sample_b": p.generation_b.sample_index,
        "shown_first": p.generation_a.system.name,
        "rater": "gpt",
        "rater_kind": "judge",
        "choice": p.generation_a.system.name,
    }
    imports.do_import_judgments(study, (json.dumps(judge) + "\n").encode(), "j.jsonl")
    metrics = study_report(study).indeterminacy.judges["gpt"]
    assert metrics.units == 1
    np.testing.assert_array_equal(metrics.omega_human_mean, [0.0, 0.0])
    np.testing.assert_array_equal(metrics.omega_judge_mean, [1.0, 0.0])
    assert metrics.mse == pytest.approx(1.0)  # ||[0, 0] - [1, 0]||^2


def test_attention_checks_are_scored_by_the_mode(study, rater):
    lifecycle.do_update_settings(
        study, {"elicitation": "preference_scale", "gold_rate": 0.2, "neither_option": True}, None
    )
    GoldPair.objects.create(study=study, input="2 + 2?", good_output="4", bad_output="fish")
    gold = allocation.do_start_assignment(rater).pairs.get(gold__isnull=False)
    good = "first" if gold.a_shown_first else "second"
    allocation.do_mark_shown(gold)  # as the rating page does before an answer
    recorded = recording.do_record_judgment(gold, idempotency_key="g", answer=Answer(choice=good, strength=1))
    assert recorded.gold_answer.correct and recorded.gold_answer.answer == f"{good}:1"
    other = enrolment.do_create_rater_link(study, "r2")
    gold = allocation.do_start_assignment(other).pairs.get(gold__isnull=False)
    allocation.do_mark_shown(gold)  # as the rating page does before an answer
    wrong = recording.do_record_judgment(gold, idempotency_key="g2", answer=Answer(choice="both_bad"))
    assert not wrong.gold_answer.correct


def test_the_welcome_page_and_the_crowd_preview_show_the_modes_own_keys(client, scale_study, rater):
    home = client.get(reverse("rater_home", args=[rater.token()])).content.decode()
    assert "<kbd>5</kbd> Output 2 is much better" in home and "<kbd>0</kbd> Both are bad" in home
    link = sites.do_create_external_link(scale_study, "mturk")
    preview = client.get(link.path() + "?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1").content.decode()
    assert 'value="second:2" data-key="5" disabled' in preview and "<kbd>5</kbd> Output 2 is much better" in preview


@pytest.mark.parametrize("name", list(elicitation.MODES))
def test_welcome_preview_and_rating_page_state_the_real_task_of_each_mode(client, researcher, name):
    study = creation.do_create_study(researcher, f"truth-{name}", study_jsonl(2, k=1), "t.jsonl")
    lifecycle.do_update_settings(
        study, {"elicitation": name, "neither_option": True, "question": f"Q for {name}?"}, None
    )
    mode = study.elicitation_mode
    options = [o for fieldset in mode.fieldsets(study) for o in fieldset.options]
    rater = enrolment.do_create_rater_link(study, "truth")
    welcome = client.get(reverse("rater_home", args=[rater.token()])).content.decode()
    link = sites.do_create_external_link(study, "mturk")
    preview = client.get(link.path() + "?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h").content.decode()
    assignment = start(client, rater)
    page = client.get(rate_url(rater, assignment)).content.decode()
    for text in (welcome, preview):  # K = 1, two items: both in one assignment (size 10), said as it is
        assert "Each assignment: <strong>2 pairs</strong>" in text
        for o in options:
            assert f"<kbd>{o.key_label}</kbd>" in text and o.label in text
    for text in (preview, page):
        for fieldset in mode.fieldsets(study):
            assert f"<legend>{fieldset.legend}</legend>" in text
        for o in options:
            assert f'type="{o.input}" name="{o.name}" value="{o.value}" data-key="{o.key}"' in text
    assert "Pair 1 of 2" in page and " disabled" in preview


def test_a_stored_answer_reads_as_one_choice_in_model_coordinates():
    assert elicitation.effective_choice("b", ["a"]) == "b"  # the forced choice comes first
    assert elicitation.effective_choice(None, ["a"]) == "a"
    assert elicitation.effective_choice(None, ["a", "b"]) == "tie"
    assert elicitation.effective_choice(None, None, 0.7) == "a"
    assert elicitation.effective_choice(None, None, 0.5) == "tie"
    # "neither is acceptable" (an empty response set) prefers neither output: no preference
    assert elicitation.effective_choice(None, [], None) == "tie"
    assert elicitation.effective_choice("tie", [], None) == "tie"  # a forced "both are bad"
    assert elicitation.effective_choice(None, None, None) is None


@pytest.mark.parametrize(
    ("choice", "response_set", "winner"),
    [
        ("a", None, "model_a"),
        ("b", None, "model_b"),
        ("tie", None, "tie"),
        ("tie", [], "tie (bothbad)"),  # "both are bad" on a forced choice
        (None, ["a"], "model_a"),  # a response set of one system votes for it
        (None, ["b"], "model_b"),
        (None, ["a", "b"], "tie"),  # both acceptable: no preference
        (None, [], "tie (bothbad)"),  # neither is acceptable
        (None, None, None),
    ],
)
def test_an_answer_in_chatbot_arenas_words_whatever_the_way_of_asking(choice, response_set, winner):
    assert elicitation.arena_winner(choice, response_set) == winner
