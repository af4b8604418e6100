"""``manage.py generate``: a system's outputs from the local OpenAI-compatible server (tests/judge_server.py, ``gen-``
models) in the foreground, as a job of its own; resumable, within a budget, refused with the reason by name."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.generating import runner
from annotation.models import Generation, Job, SystemEndpoint
from annotation.plan import planning
from annotation.studies import creation
from tests.annotation import test_generation
from tests.annotation.test_generation import add, inputs_study

server = test_generation.server  # the local server, a fixture


def generate(server, study: str, system: str, model: str, *options: str) -> str:
    """Run the command against the local server; what it printed."""
    out = io.StringIO()
    call_command(
        "generate",
        *("--study", study, "--system", system, "--base-url", server.base_url, "--model", model, *options),
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def test_generate_runs_to_the_end_and_a_second_call_generates_only_what_is_missing(researcher, server):
    inputs_study(researcher, ["One?", "Two?", "Three?"], name="cli")
    said = generate(server, "cli", "small", "gen-terse-cli", "--samples", "2", "--budget", "100", "--seed", "3")
    assert "6 generated" in said and "every item has 2 output(s)" in said
    assert len(server.requests) == 6
    said = generate(server, "cli", "small", "gen-terse-cli", "--samples", "3")  # one more sample each
    assert len(server.requests) == 9 and "9 generated" in said
    with pytest.raises(CommandError, match="generated otherwise .*model: 'gen-terse-cli' -> 'gen-other'"):
        generate(server, "cli", "small", "gen-other", "--samples", "3")
    assert len(server.requests) == 9


def test_generate_says_when_the_budget_ends_the_run(researcher, server):
    inputs_study(researcher, ["One?", "Two?"], name="capped")
    with pytest.raises(CommandError, match=r"budget \(3\) is used up with 1 output\(s\) missing"):
        generate(server, "capped", "s", "gen-s", "--samples", "2", "--budget", "3")
    generate(server, "capped", "s", "gen-s", "--samples", "2", "--budget", "4")
    assert Generation.objects.filter(system__name="s").count() == 4


def test_generate_refuses_a_system_with_imported_outputs(researcher, server):
    lines = "".join(
        json.dumps({"id": f"i{i}", "input": f"Q{i}?", "outputs": {"a": ["x"], "b": ["y"]}}) + "\n" for i in range(2)
    )
    creation.do_create_study(researcher, "imported", lines.encode(), "s.jsonl")
    with pytest.raises(CommandError, match="has imported outputs"):
        generate(server, "imported", "a", "gen-a", "--samples", "1")


def test_a_system_is_complete_only_with_every_sample_of_every_item(researcher, server):
    """Review: counting all of a system's outputs took one with whole items missing for complete once K was lowered
    (and the plan then failed on the missing item)."""
    study = inputs_study(researcher, ["One?", "Two?", "Three?"], name="lowered")
    with pytest.raises(CommandError, match="budget"):
        generate(server, "lowered", "a", "gen-a", "--samples", "3", "--budget", "6", "--concurrency", "1")
    endpoint = SystemEndpoint.objects.get(system__name="a")
    assert runner.GenerationRun(endpoint).remaining() == 3  # items one and two whole, the third without any
    SystemEndpoint.objects.filter(pk=endpoint.pk).update(samples=2)  # K lowered: 6 outputs, but one item has none
    endpoint.refresh_from_db()
    assert runner.GenerationRun(endpoint).remaining() == 2 and planning.systems_with_outputs(study) == []
    generate(server, "lowered", "b", "gen-b", "--samples", "2")  # b complete; a not: nothing compared, nothing fails
    assert study.comparisons.count() == 0
    generate(server, "lowered", "a", "gen-a", "--samples", "2", "--budget", "20")
    assert [(c.system_a.name, c.system_b.name) for c in study.comparisons.all()] == [("a", "b")]


def test_the_command_and_a_workers_run_exclude_each_other(researcher, server):
    """Review: the command ran without a job, so Start on the page was accepted meanwhile and both paid for every
    missing output. The command's run is a job of its own: each refuses while the other is live."""
    study = inputs_study(researcher, ["One?"], name="busy")
    endpoint = add(study, server, "s", "gen-s", samples=2)
    runner.GenerationRun(endpoint).do_start()  # queued for a worker
    with pytest.raises(CommandError, match="being generated now"):
        generate(server, "busy", "s", "gen-s", "--samples", "2")
    assert not server.requests
    runner.GenerationRun(endpoint).do_stop()  # stopped before a worker took it
    generate(server, "busy", "s", "gen-s", "--samples", "2")
    job = Job.objects.filter(kind="generate").first()
    assert job.params["foreground"] and job.status == Job.Status.DONE and "2 generated" in job.message
    tasks = list(study.tasks.values_list("pk", flat=True))
    generate(server, "busy", "s", "gen-s", "--samples", "2")
    assert list(study.tasks.values_list("pk", flat=True)) == tasks and len(server.requests) == 2  # nothing redone


def test_generate_refuses_bad_options_by_name_and_keeps_nothing(researcher, server):
    inputs_study(researcher, ["One?"], name="options")
    for options, words in (
        (["--samples", "0"], "samples: Ensure this value is greater than or equal to 1"),
        (["--samples", "2", "--temperature", "9"], "temperature: Ensure this value is less than"),
        (["--samples", "2", "--price-input", "abc"], "argument --price-input: a price is a number"),
        (["--samples", "2", "--base-url", "http://10.0.0.5/v1"], "private, link-local"),
    ):
        with pytest.raises(CommandError, match=words):
            generate(server, "options", "s", "gen-s", *options)
    assert not SystemEndpoint.objects.exists() and not server.requests
