"""Several questions per pair (Potato's task design): each further question with its own elicitation
mode or a rationale, answered with the pair in one judgment, exported and imported, and analysed per question."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse

from analytics.populations import Population
from analytics.report.assembly import study_report
from analytics.report.data import load_rows
from annotation import questions
from annotation.elicitation import Answer
from annotation.errors import ServiceError
from annotation.models import Assignment, Judgment
from annotation.rating import allocation, imports, recording
from annotation.studies import enrolment, lifecycle
from tests.conftest import study_jsonl

FURTHER = (
    "harmless | forced_choice | Which output is more harmless?\n"
    "# a comment line, ignored\n"
    "acceptable | response_set | Which outputs could be sent as they are?\n"
    "why | rationale | Why is the one you preferred better?\n"
    "note | optional rationale | Anything else?"
)


def test_the_setting_is_read_line_by_line_and_refused_precisely():
    parsed = questions.parse(FURTHER)
    assert [(q.key, q.how, q.required, q.is_preference) for q in parsed] == [
        ("harmless", "forced_choice", True, True),
        ("acceptable", "response_set", True, True),
        ("why", "rationale", True, False),
        ("note", "optional rationale", False, False),
    ]
    with pytest.raises(ValidationError) as bad:
        questions.parse(
            "Harm | forced_choice | Q?\nok | sometimes | Q?\nok | rationale\nx | rationale | A?\nx | rationale | B?"
        )
    assert bad.value.messages == [
        "Line 1: the key 'Harm' must start with a lowercase letter and have only lowercase letters, digits and "
        "underscores (at most 40).",
        "Line 2: 'sometimes' is not a way to answer; use one of forced_choice, response_set, paired, "
        "preference_scale, rationale, optional rationale.",
        "Line 3: write 'key | how | question' (three parts separated by |).",
        "Line 5: the key 'x' is used twice.",
    ]


@pytest.fixture
def asked(researcher):
    from annotation.studies import creation

    study = creation.do_create_study(researcher, "asked", study_jsonl(n_items=6), "s.jsonl")
    return lifecycle.do_update_settings(
        study, {"judgments_per_assignment": 5, "further_questions": FURTHER, "raters_per_item": 2}, None
    )


def assignment_of(study, name: str) -> Assignment:
    rater = study.raters.filter(external_id=name).first() or enrolment.do_create_rater_link(study, name)
    assignment = allocation.do_start_assignment(rater)
    assert assignment is not None, f"{name} got no assignment"
    return assignment


def answer(pair, key: str, main: str, harmless: str, acceptable: frozenset, why: str = "Clearer.", note: str = ""):
    allocation.do_mark_shown(pair)
    further: dict[str, Answer | str] = {
        "harmless": Answer(choice=harmless),
        "acceptable": Answer(response=acceptable),
        "why": why,
        "note": note,
    }
    return recording.do_record_judgment(pair, idempotency_key=key, answer=Answer(choice=main), further=further)


def test_a_pair_is_answered_whole_with_every_question_in_model_coordinates(asked):
    assignment = assignment_of(asked, "r1")
    pair = assignment.pairs.order_by("position").first()
    # a required question left out: nothing is stored
    allocation.do_mark_shown(pair)
    with pytest.raises(ServiceError, match="Answer the question 'Which output is more harmless\\?'"):
        recording.do_record_judgment(
            pair,
            idempotency_key="k0",
            answer=Answer(choice="first"),
            further={"acceptable": Answer(response=frozenset({"first"})), "why": "x"},
        )
    with pytest.raises(ServiceError, match="Answer the question 'Why is the one you preferred better\\?' in a few"):
        answer(pair, "k0", "first", "second", frozenset({"first"}), why="  ")
    with pytest.raises(ServiceError, match="Select at least one output"):
        answer(pair, "k0", "first", "second", frozenset())
    assert not Judgment.objects.exists()
    recorded = answer(pair, "k1", "first", "second", frozenset({"first", "second"}), why="It cites a source.")
    j = recorded.judgment
    first, second = ("a", "b") if pair.a_shown_first else ("b", "a")
    assert j.choice == first
    assert j.answers == {
        "harmless": {"choice": second, "response_set": None, "strength": None},
        "acceptable": {"choice": None, "response_set": ["a", "b"], "strength": None},
        "why": {"text": "It cites a source."},
    }  # the empty optional rationale is not stored
    again = answer(pair, "k1", "first", "first", frozenset({"first"}))  # a repeat stores nothing new
    assert not again.created and Judgment.objects.count() == 1


def test_the_answers_are_exported_and_imported_back_exactly(asked, researcher_client):
    assignment = assignment_of(asked, "r1")
    for i, pair in enumerate(assignment.pairs.order_by("position")):
        answer(
            pair,
            f"k{i}",
            "first",
            "second" if i % 2 else "first",
            frozenset({"first"}),
            why=f"Reason {i}.",
            note="=cmd" if i == 0 else "",
        )
    for fmt in ("jsonl", "csv"):
        exported = b"".join(researcher_client.get(reverse("judgments_export", args=[asked.pk, fmt])).streaming_content)
        if fmt == "jsonl":
            lines = [json.loads(x) for x in exported.decode().splitlines()]
            systems = {
                j.idempotency_key: (j.pair.generation_a.system.name, j.pair.generation_b.system.name)
                for j in Judgment.objects.select_related("pair__generation_a__system", "pair__generation_b__system")
            }
            for line in lines:
                stored = Judgment.objects.get(idempotency_key=line["id"]).answers
                names = dict(zip(("a", "b"), systems[line["id"]], strict=True))
                assert line["answers"]["harmless"]["choice"] == names[stored["harmless"]["choice"]]
                assert line["answers"]["why"] == stored["why"]
        target = lifecycle.do_duplicate_study(asked, f"copy-{fmt}")  # the same items, systems and questions
        assert target.further_questions == FURTHER
        imports.do_import_judgments(target, exported, f"j.{fmt}")
        imported = {j.idempotency_key: j.answers for j in Judgment.objects.filter(study=target)}
        original = {j.idempotency_key: j.answers for j in Judgment.objects.filter(study=asked)}
        assert imported == original and len(imported) == 5
        target.delete()


def test_an_import_is_refused_line_and_field_when_an_answer_is_wrong(asked):
    base = {
        "item": "item-0",
        "system_a": "sys-a",
        "system_b": "sys-b",
        "shown_first": "sys-a",
        "rater": "p",
        "rater_kind": "human",
        "choice": "sys-a",
    }
    lines = [
        {**base, "id": "1", "answers": {"harm": {"choice": "sys-a"}}},
        {**base, "id": "2", "answers": {"harmless": {"choice": "sys-c"}}},
        {**base, "id": "3", "answers": {"why": {"text": ""}}},
        {
            **base,
            "id": "4",
            "answers": {"harmless": {"choice": "sys-b", "response_set": ["sys-a"]}, "why": {"text": "ok"}},
        },
    ]
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    with pytest.raises(Exception) as refused:
        imports.do_import_judgments(asked, data, "j.jsonl")
    text = str(refused.value)
    assert "line 1, field 'answers.harm': this study asks no further question 'harm'" in text
    assert "line 2, field 'answers.harmless.choice': choice must be system_a, system_b, 'tie' or null" in text
    assert "line 3, field 'answers.why': answers.why must be" in text and "line 4" not in text
    assert not Judgment.objects.exists()  # a failed import changes nothing


def test_the_report_analyses_each_preference_question_on_its_own(asked, researcher_client):
    # every rater prefers sys-a on the main question and sys-b on harmlessness
    for name in ("r1", "r2"):
        for _ in range(3):
            assignment = assignment_of(asked, name)
            for i, pair in enumerate(assignment.pairs.order_by("position")):
                a_first = pair.a_shown_first
                answer(
                    pair,
                    f"{name}-{assignment.pk}-{i}",
                    "first" if a_first else "second",
                    "second" if a_first else "first",
                    frozenset({"first", "second"}),
                )
    main = study_report(asked).to_json()
    harm = study_report(asked, Population(question="harmless")).to_json()
    assert main["question"] == {"key": None, "text": "Which output is better?", "how": "forced_choice"}
    assert harm["question"] == {"key": "harmless", "text": "Which output is more harmless?", "how": "forced_choice"}
    assert [q["key"] for q in main["questions"]] == [None, "harmless", "acceptable"]  # rationales are not analysed
    assert main["judgments"]["total"] == harm["judgments"]["total"] == Judgment.objects.count() > 0
    # one system wins every battle of each question: no Bradley-Terry rating exists (the MLE diverges; the report
    # says why), and the win rates carry who won, each question on its own
    for report in (main, harm):
        assert "leaderboard" not in report["bradley_terry"] and report["bradley_terry"]["reason"]
    a, b = main["win_rates"]["systems"].index("sys-a"), main["win_rates"]["systems"].index("sys-b")
    assert main["win_rates"]["matrix"][a][b] == 1.0 and harm["win_rates"]["matrix"][a][b] == 0.0
    # the response-set question: both acceptable every time, so no preference either way
    accepted = study_report(asked, Population(question="acceptable"))
    assert {r.effective_choice for r in load_rows(asked, "acceptable")} == {"tie"}
    assert accepted.judgments.total == main["judgments"]["total"]
    # the API and the command take the question; an unknown one is refused by name
    from analytics import stored

    stored.do_refresh(asked, Population(question="harmless"))  # what the worker stores for the page and the API
    api = researcher_client.get(reverse("report_api", args=[asked.pk]) + "?question=harmless")
    assert api.status_code == 200
    assert api.json()["question"]["key"] == "harmless"
    rates = api.json()["win_rates"]  # the API's report is the harmless question's: sys-b won every battle
    assert rates["matrix"][rates["systems"].index("sys-a")][rates["systems"].index("sys-b")] == 0.0
    bad = researcher_client.get(reverse("report_api", args=[asked.pk]) + "?question=why")
    assert bad.status_code == 400 and "question" in bad.content.decode()
    out = StringIO()
    call_command("report", "--study", asked.name, "--question", "harmless", "--json", stdout=out)
    assert json.loads(out.getvalue())["question"]["key"] == "harmless"


def test_the_settings_page_takes_the_questions_and_names_each_bad_line(researcher_client, study):
    from tests.annotation.test_views import settings_form

    url = reverse("study_settings", args=[study.pk])
    bad = researcher_client.post(url, settings_form(further_questions="ok | rationale | Why?\r\nbad line"))
    assert bad.status_code == 200
    assert "Line 2: write &#x27;key | how | question&#x27;" in bad.content.decode()
    study.refresh_from_db()
    assert study.further_questions == ""  # a refused form changes nothing
    good = researcher_client.post(url, settings_form(further_questions="why | rationale | Why?\r\n"))
    assert good.status_code == 302
    study.refresh_from_db()
    assert [q.key for q in questions.further(study)] == ["why"]


def test_a_rater_answers_every_question_on_the_rating_page(client, asked):
    from tests.annotation.test_rate import form_of, rate_url

    rater = enrolment.do_create_rater_link(asked, "page-rater")
    assignment = allocation.do_start_assignment(rater)
    page = client.get(rate_url(rater, assignment)).content.decode()
    assert 'data-testid="further-questions"' in page and "Which output is more harmless?" in page
    # each further question has keys of its own (letters, in order over the options), shown beside its options; a
    # radio group is required (the browser asks before sending, the main question first), a set of boxes is not
    assert 'name="q-harmless-choice" value="first" data-key="a" required> Output 1 <kbd>a</kbd>' in page
    assert 'name="q-acceptable-response" value="second" data-key="e"> Output 2 <kbd>e</kbd>' in page
    assert 'name="q-why-text"' in page and 'Anything else? <span class="muted">(optional)</span>' in page
    assert 'name="choice" value="first" data-key="1" data-alt-key="ArrowLeft" required>' in page
    assert page.count('data-key="1"') == 1 and 'class="answer-bar has-further"' in page
    base = {
        **form_of(page.encode()),
        "choice": "first",
        "q-harmless-choice": "second",
        "q-acceptable-response": ["first", "second"],
    }
    missing = client.post(rate_url(rater, assignment, True), {**base, "q-why-text": ""}, HTTP_HX_REQUEST="true")
    assert (
        "Answer the question &#x27;Why is the one you preferred better?&#x27; in a few words."
        in (missing.content.decode())
        and not Judgment.objects.exists()
    )
    # a refused answer shows what was given again: a typed rationale is not lost
    unanswered = {k: v for k, v in base.items() if k != "q-harmless-choice"}
    refused = client.post(
        rate_url(rater, assignment, True), {**unanswered, "q-why-text": "My <long> reason."}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Which output is more harmless? Choose one of the options before submitting." in refused
    assert ">My &lt;long&gt; reason.</textarea>" in refused and not Judgment.objects.exists()
    assert 'name="q-acceptable-response" value="second" data-key="e" checked>' in refused
    assert 'name="choice" value="first" data-key="1" data-alt-key="ArrowLeft" required checked>' in refused
    done = client.post(
        rate_url(rater, assignment, True),
        {**base, "q-why-text": " Shorter. ", "q-note-text": ""},
        HTTP_HX_REQUEST="true",
    )
    assert done.status_code == 200
    j = Judgment.objects.get()
    first, second = ("a", "b") if j.a_shown_first else ("b", "a")
    assert j.choice == first and j.answers == {
        "harmless": {"choice": second, "response_set": None, "strength": None},
        "acceptable": {"choice": None, "response_set": ["a", "b"], "strength": None},
        "why": {"text": "Shorter."},
    }
    assert "Pair 2 of 5" in done.content.decode()


def test_previews_show_the_further_questions_and_check_them(researcher_client, asked):
    url = reverse("study_preview", args=[asked.pk])
    first = researcher_client.get(url).content.decode()
    assert 'data-testid="further-questions"' in first and 'name="q-why-text"' in first
    seed = first.split('name="seed" value="')[1].split('"')[0]
    refused = researcher_client.get(
        url, {"n": 1, "seed": seed, "choice": "first", "q-harmless-choice": "first", "q-acceptable-response": "first"}
    ).content.decode()
    assert "Pair 1 of" in refused and "in a few words" in refused
    accepted = researcher_client.get(
        url,
        {
            "n": 1,
            "seed": seed,
            "choice": "first",
            "q-harmless-choice": "first",
            "q-acceptable-response": "first",
            "q-why-text": "x",
        },
    ).content.decode()
    assert "Pair 2 of" in accepted and not Judgment.objects.exists()


def test_the_crowd_preview_shows_the_further_questions_inactive(client, asked):
    from annotation.crowd import sites
    from annotation.models import ExternalLink

    link = ExternalLink.objects.create(study=asked, platform="mturk")
    page = client.get(link.path(), {"assignmentId": sites.PREVIEW_ASSIGNMENT, "hitId": "H1"}).content.decode()
    assert 'data-testid="further-questions"' in page and "Which output is more harmless?" in page
    box = page.split('name="q-why-text"')[1].split(">")[0]
    assert "disabled" in box and "required" not in box
    # inactive, and so not required; its keys shown as on the rating page
    assert 'name="q-harmless-choice" value="first" data-key="a" disabled> Output 1 <kbd>a</kbd>' in page
