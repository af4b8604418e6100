"""One line ending for text that comes in (a prompt template saved from the browser's textarea carried
"\r\n", the local judge server found no outputs in it and answered "A" every time)."""

from __future__ import annotations

import json

from django.urls import reverse

from annotation.exchange import rules, study_files
from annotation.judges import prompts
from annotation.models import Judge, Study
from annotation.text import newlines
from tests.annotation.test_judge_runner import study_with
from tests.annotation.test_judge_views import form_data, server  # noqa: F401 (the fixture)
from tests.annotation.test_views import settings_form
from tests.judge_server import OUTPUTS


def test_newlines_makes_every_line_ending_a_line_feed():
    assert newlines("a\r\nb\rc\nd\r\n\r\n") == "a\nb\nc\nd\n\n"
    assert newlines("\ttab  \n\n") == "\ttab  \n\n"  # everything else is kept as written


def test_a_judge_added_in_the_browser_sends_the_template_as_typed(researcher_client, researcher, server):  # noqa: F811
    study = study_with(researcher, ["Q0?", "Q1?"])
    typed = prompts.DEFAULT_TEMPLATE.replace("\n", "\r\n")  # what a textarea submits
    researcher_client.post(reverse("judges", args=[study.pk]), form_data(server, prompt_template=typed))
    judge = Judge.objects.get()
    assert judge.prompt_template == prompts.DEFAULT_TEMPLATE
    # the README's local judge server finds the two outputs in the prompt (it did not with "\r\n")
    rendered = prompts.render_prompt(judge.prompt_template, prompts.Offer.of(study), "Q0?", "first one", "second one")
    found = OUTPUTS.search(rendered)
    assert found and (found["first"], found["second"]) == ("first one", "second one")
    detail = reverse("judge_detail", args=[study.pk, judge.pk])
    researcher_client.post(detail, form_data(server, api_key="", prompt_template=typed + "\r\nBe brief."))
    judge.refresh_from_db()
    assert judge.prompt_template == prompts.DEFAULT_TEMPLATE + "\nBe brief."


def test_instructions_and_an_imported_study_keep_one_line_ending(researcher_client, researcher):
    study = study_with(researcher, ["Q0?"])
    response = researcher_client.post(
        reverse("study_settings", args=[study.pk]), settings_form(instructions="Read both.\r\n\r\nThen choose.")
    )
    assert response.status_code == 302
    assert Study.objects.get(pk=study.pk).instructions == "Read both.\n\nThen choose."
    line = json.dumps(
        {"id": "1", "input": "Say\r\nhi", "reference": "r\r\n", "outputs": {"a": ["x\r\ny"], "b": ["z\rw"]}}
    )
    parsed = study_files.parse_study((line + "\r\n").encode(), "s.jsonl")
    item = parsed.items[0]
    assert (item.input, item.reference, item.outputs) == ("Say\nhi", "r\n", {"a": ["x\ny"], "b": ["z\nw"]})


def test_a_rejected_file_lists_its_warnings_with_its_problems():
    """A bad upload once listed lines 2 and 4 but not the empty output on line 3, which would import with a
    warning; a rejected file now lists everything a newcomer must look at, in line order."""
    import pytest

    lines = [
        {"id": "1", "input": "Q1", "outputs": {"a": ["x"], "b": ["y"]}},
        {"id": "2", "input": "", "outputs": {"a": ["x"], "b": ["y"]}},
        {"id": "3", "input": "Q3", "outputs": {"a": [""], "b": ["y"]}},
        {"id": "4", "input": "Q4", "outputs": {"a": ["x"], "b": "y"}},
    ]
    with pytest.raises(rules.FormatError) as caught:
        study_files.parse_study("".join(json.dumps(x) + "\n" for x in lines).encode(), "s.jsonl")
    problems = caught.value.problems
    assert [p.line for p in problems] == [2, 3, 4]
    assert problems[1].field == "outputs.a[0]" and "a warning only" in problems[1].message
    alone = study_files.parse_study("".join(json.dumps(x) + "\n" for x in (lines[0], lines[2])).encode(), "s.jsonl")
    assert [(w.line, w.field) for w in alone.warnings] == [(2, "outputs.a[0]")]
