"""Systems from endpoints: a study created from a file of inputs alone, two systems generated from the
local OpenAI-compatible server (tests/judge_server.py, ``gen-`` models: every request validated against the openai
client's own request types), stored with their provenance, resumable, within a budget; the systems join the plan once
every output is in. ``manage.py generate`` is tests/annotation/test_generate_command.py's."""

from __future__ import annotations

import json

import pytest

from annotation.endpoints import EndpointError
from annotation.exchange.rules import FormatError
from annotation.exchange.study_files import parse_study
from annotation.generating import runner
from annotation.jobs import run_job
from annotation.models import Generation, GenerationCall, Job, SystemEndpoint
from annotation.plan import planning
from annotation.studies import creation
from tests.judge_server import generated_text, server_fixture

server = server_fixture()


def inputs_file(inputs: list[str]) -> bytes:
    return "".join(json.dumps({"id": f"q{i}", "input": text}) + "\n" for i, text in enumerate(inputs)).encode()


def inputs_study(researcher, inputs: list[str], name: str = "from-inputs"):
    return creation.do_create_study(researcher, name, inputs_file(inputs), "inputs.jsonl")


def add(study, server, name: str, model: str, **fields) -> SystemEndpoint:
    defaults = {
        "base_url": server.base_url,
        "model": model,
        "api_key_env": "",
        "samples": 3,
        "max_retries": 3,
        "timeout_seconds": 5.0,
    }
    return runner.do_add_endpoint_system(study, name, **{**defaults, **fields})


# ----------------------------------------------------------------------------------------------------------
# A file of inputs alone


def test_a_file_of_inputs_alone_makes_a_study_with_items_and_no_systems(researcher):
    study = inputs_study(researcher, ["What is 2 + 2?", "Name a colour."])
    assert study.items.count() == 2 and study.systems.count() == 0
    assert study.comparisons.count() == 0 and study.tasks.count() == 0


def test_a_csv_of_inputs_alone_is_read_row_by_row():
    parsed = parse_study(b"item_id,input,reference\nq1,First?,one\nq2,Second?,\n", "inputs.csv")
    assert [(i.external_id, i.input, i.reference, i.outputs) for i in parsed.items] == [
        ("q1", "First?", "one", {}),
        ("q2", "Second?", "", {}),
    ]
    assert parsed.systems == []
    with pytest.raises(FormatError) as refused:
        parse_study(b"item_id,input,colour\nq1,First?,red\nq1,Again?,blue\n", "inputs.csv")
    said = str(refused.value)
    assert "line 1, field 'colour': unknown column" in said
    assert "line 3, field 'item_id': duplicate id 'q1' (first on line 2)" in said


def test_items_with_and_without_outputs_in_one_file_are_refused_on_their_lines():
    lines = [
        {"id": "a", "input": "A?", "outputs": {"x": ["1"], "y": ["2"]}},
        {"id": "b", "input": "B?"},
        {"id": "c", "input": "C?", "outputs": None},
    ]
    with pytest.raises(FormatError) as refused:
        parse_study("".join(json.dumps(line) + "\n" for line in lines).encode(), "s.jsonl")
    said = str(refused.value)
    assert "line 2, field 'outputs': missing outputs (other items have them" in said
    assert "line 3, field 'outputs': outputs is null" in said and "missing system" not in said


# ----------------------------------------------------------------------------------------------------------
# Generating


def test_two_endpoints_generate_k_samples_each_with_provenance_and_join_the_plan(researcher, server):
    study = inputs_study(researcher, ["What is 2 + 2?", "Name a colour.", "Why is the sky blue?"])
    terse = add(
        study, server, "terse", "gen-terse-1", seed=7, system_prompt="Be brief.", temperature=0.7, max_tokens=64
    )
    verbose = add(study, server, "verbose", "gen-verbose-1")
    assert planning.systems_with_outputs(study) == []  # nothing generated yet: nothing to compare

    result = runner.GenerationRun(terse).do_run()
    assert result.recorded == 9 and not result.budget_reached and not server.invalid
    assert planning.systems_with_outputs(study) == [terse.system]  # complete, but alone
    # the requests: the system prompt first, the input, the seed plus the sample's index, the settings
    sent = sorted((b["messages"][-1]["content"], b["seed"]) for b in server.requests)
    assert sent == sorted((i.input, 7 + k) for i in study.items.all() for k in range(3))
    assert all(
        b["messages"][0] == {"role": "system", "content": "Be brief."}
        and b["temperature"] == 0.7
        and b["max_tokens"] == 64
        and b["model"] == "gen-terse-1"
        for b in server.requests
    )
    for g in Generation.objects.filter(system=terse.system).select_related("item"):
        assert g.text == generated_text("gen-terse-1", g.item.input, 7 + g.sample_index, 0)  # the reply, as sent
        p = g.provenance
        assert (p["endpoint"], p["model"], p["served_by"], p["finish_reason"]) == (
            server.base_url,
            "gen-terse-1",
            "gen-terse-1",
            "stop",
        )
        assert p["parameters"] == {
            "temperature": 0.7,
            "max_tokens": 64,
            "system_prompt": "Be brief.",
            "seed": 7 + g.sample_index,
        }
        assert p["completion_tokens"] == len(g.text.split()) and p["time"]
        assert g.call.status == "generated" and g.call.response["choices"][0]["message"]["content"] is None

    runner.GenerationRun(verbose).do_run()
    assert runner.GenerationRun(verbose).do_include_if_complete().startswith("The plan was rebuilt with the new system")
    assert [(c.system_a.name, c.system_b.name) for c in study.comparisons.all()] == [("terse", "verbose")]
    assert study.tasks.count() == 3  # every item of the one system pair (the study's default selection)
    # without a seed, the samples of one input differ (what separability measures)
    verbose_texts = {}
    for g in Generation.objects.filter(system=verbose.system):
        verbose_texts.setdefault(g.item_id, set()).add(g.text)
    assert all(len(texts) == 3 for texts in verbose_texts.values())

    asked = len(server.requests)  # resumable: nothing is missing, nothing is asked
    assert (
        runner.GenerationRun(terse).do_run().asked == 0
        and runner.GenerationRun(verbose).do_run().asked == 0
        and len(server.requests) == asked
    )


def test_failures_are_kept_and_asked_again_and_nothing_is_generated_twice(researcher, server):
    study = inputs_study(
        researcher,
        [
            "[[always-429]] busy",
            "[[server-error]] once",
            "[[nul]] bad byte",
            "[[filtered]] withheld",
            "[[empty]] nothing",
            "[[long]] rambling",
        ],
    )
    endpoint = add(study, server, "flaky", "gen-flaky", samples=1, max_retries=1, max_tokens=5)
    runner.GenerationRun(endpoint).do_run()
    calls = {
        c.item.input.split()[0]: c for c in GenerationCall.objects.filter(endpoint=endpoint).select_related("item")
    }
    assert calls["[[always-429]]"].status == "failed" and "RateLimitError" in calls["[[always-429]]"].problem
    assert calls["[[server-error]]"].status == "generated"  # the client's retry mended it
    assert calls["[[nul]]"].status == "unusable" and "NUL" in calls["[[nul]]"].problem
    assert calls["[[filtered]]"].status == "unusable" and "content filter" in calls["[[filtered]]"].problem
    assert calls["[[empty]]"].status == "generated" and calls["[[empty]]"].generation.text == ""
    long = calls["[[long]]"].generation
    assert (
        long.provenance["finish_reason"] == "length"
        and "cut off at the token limit (5 tokens)" in long.provenance["notes"][0]
        and len(long.text.split()) == 5
    )
    used = runner.GenerationRun(endpoint).usage()
    assert (used.done, used.unusable, used.failed, used.replies) == (3, 2, 1, 5)
    assert runner.GenerationRun(endpoint).remaining() == 3 and planning.systems_with_outputs(study) == []

    before = {g.pk: g.text for g in Generation.objects.filter(system=endpoint.system)}
    server.seen.clear()
    result = runner.GenerationRun(endpoint).do_run()  # resume: only the three missing outputs are asked for
    assert result.asked == 3
    assert sorted(p.split()[0] for p in server.seen) == ["[[always-429]]", "[[filtered]]", "[[nul]]"]
    after = {g.pk: g.text for g in Generation.objects.filter(system=endpoint.system)}
    assert after == before  # what was stored is never asked for again, nor changed
    again = runner.GenerationRun(
        endpoint
    ).usage()  # the two unusable outputs were paid for twice: the budget counts both replies
    assert (again.replies, again.done, again.unusable, again.failed) == (7, 3, 2, 1)
    # the re-asked inputs' words (the local server's prompt tokens), added
    assert again.prompt_tokens == used.prompt_tokens + len("[[nul]] bad byte [[filtered]] withheld".split())
    assert (
        "It began: 'before\\x00after'"
        in GenerationCall.objects.get(endpoint=endpoint, item__input__startswith="[[nul]]").problem
    )
    assert GenerationCall.objects.filter(endpoint=endpoint).count() == 6  # one ledger row per output, updated


def test_the_budget_counts_replies_over_every_run(researcher, server):
    study = inputs_study(researcher, [f"Question {i}?" for i in range(4)])
    endpoint = add(study, server, "capped", "gen-capped", samples=2, request_budget=3)
    result = runner.GenerationRun(endpoint).do_run()
    assert result.budget_reached and result.recorded == 3 and len(server.requests) == 3
    assert runner.GenerationRun(endpoint).do_run().asked == 0  # used up
    with pytest.raises(EndpointError, match=r"request budget \(3\) is used up"):
        runner.GenerationRun(endpoint).do_start()


def test_a_stop_keeps_what_arrived_and_a_resume_asks_for_the_rest(researcher, server):
    study = inputs_study(researcher, [f"Question {i}?" for i in range(6)])
    endpoint = add(study, server, "stopped", "gen-stopped", samples=2, max_concurrency=1)
    replies = []
    result = runner.GenerationRun(endpoint).do_run(
        progress=lambda done, total: replies.append(done), should_stop=lambda: len(replies) > 3
    )
    kept = Generation.objects.filter(system=endpoint.system).count()
    assert result.stopped and 0 < kept < 12
    assert runner.GenerationRun(endpoint).do_run().recorded == 12 - kept
    assert Generation.objects.filter(system=endpoint.system).count() == 12


def test_the_background_job_generates_and_rebuilds_the_plan(researcher, server):
    study = inputs_study(researcher, ["One?", "Two?"])
    first = add(study, server, "first", "gen-terse-a", samples=2)
    second = add(study, server, "second", "gen-verbose-b", samples=2)
    for endpoint in (first, second):
        job = runner.GenerationRun(endpoint).do_start()
        with pytest.raises(EndpointError, match="already being generated"):
            runner.GenerationRun(endpoint).do_start()
        run_job.call(job.pk)
        job.refresh_from_db()
        assert job.status == Job.Status.DONE, job.message
    assert "4 generated, 0 unusable, 0 failed" in job.message and "plan was rebuilt" in job.message
    assert study.comparisons.count() == 1 and study.tasks.count() == 2
    with pytest.raises(EndpointError, match="Every item has all its outputs"):
        runner.GenerationRun(first).do_start()


def test_a_complete_run_ends_done_when_the_researchers_plan_builds_are_at_their_cap(researcher, server, settings):
    """Once every output is in, a study that plans on embeddings queues a plan build; with the researcher's plan
    builds at their cap, queueing it raised inside the job's body and a complete generation run ended failed."""
    settings.SEPLAB_JOBS_PER_KIND = 1
    busy = inputs_study(researcher, ["Other?"], name="busy")
    Job.objects.create(study=busy, kind="plan", status=Job.Status.QUEUED)  # the one plan build the cap allows
    study = inputs_study(researcher, ["One?", "Two?"])
    stored = study.selection_settings
    stored.selection_method, stored.budget = "diffuse", 2  # plans on the outputs' embeddings: built by the worker
    stored.save()
    endpoint = add(study, server, "first", "gen-terse-a", samples=1)
    job = runner.GenerationRun(endpoint).do_start()
    run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.DONE, job.message
    assert "2 generated, 0 unusable, 0 failed" in job.message
    assert "the plan could not be rebuilt now: Plan builds: you already have 1 queued or running" in job.message
    assert runner.GenerationRun(endpoint).remaining() == 0 and planning.plan_needs_worker(study)
    assert Job.objects.filter(kind="plan").count() == 1


def test_adding_a_system_is_checked(researcher, server, settings):
    study = inputs_study(researcher, ["One?"])
    add(study, server, "one", "gen-a")
    with pytest.raises(EndpointError, match="already has a system named 'one'"):
        add(study, server, "one", "gen-b")
    with pytest.raises(EndpointError, match="samples"):
        add(study, server, "many", "gen-b", samples=50)
    settings.SEPLAB_JUDGE_KEY_VARIABLES = {"OPENAI_API_KEY": ["api.openai.com"]}
    with pytest.raises(EndpointError, match="operator allows"):
        add(study, server, "env", "gen-b", api_key_env="HOME")
    settings.SEPLAB_JUDGE_PRIVATE_HOSTS = []
    with pytest.raises(EndpointError, match="base_url"):
        add(study, server, "private", "gen-b", base_url="http://10.0.0.1/v1")


# ----------------------------------------------------------------------------------------------------------
# Every page of a study that has no systems yet, and one with a single generated system


PAGES = (
    "study_detail",
    "report",
    "study_settings",
    "separability",
    "external_links",
    "study_items",
    "study_preview",
    "live_selection",
    "study_delete",
    "study_duplicate",
    "rater_links_bulk",
    "judges",
    "review_queue",
    "systems",
)  # tests/browser/test_accessibility.py's list of a study's GET pages


@pytest.mark.parametrize("systems", [0, 1], ids=["no-system", "one-generated-system"])
def test_every_page_of_a_study_without_a_system_pair_opens(researcher, researcher_client, server, systems):
    from django.urls import reverse

    from tests.conftest import refresh_reports

    study = inputs_study(researcher, ["One?", "Two?"])
    if systems:
        runner.GenerationRun(add(study, server, "only", "gen-only", samples=2)).do_run()
        runner.GenerationRun(SystemEndpoint.objects.get(system__name="only")).do_include_if_complete()
    refresh_reports()
    for name in PAGES:
        response = researcher_client.get(reverse(name, args=[study.pk]), follow=True)  # the preview: to the study
        assert response.status_code == 200, (name, response.status_code)
    refresh_reports()  # the report the pages asked for, computed as the worker does
    report = researcher_client.get(reverse("report_api", args=[study.pk]))
    assert report.status_code == 200 and report.json()["study"] == study.name
    assert researcher_client.get(reverse("item_detail", args=[study.pk, study.items.first().pk])).status_code == 200
    # the settings can be saved (nothing to plan yet)
    page = researcher_client.get(reverse("study_settings", args=[study.pk]))
    assert page.status_code == 200


# ----------------------------------------------------------------------------------------------------------
# What the independent review found


def test_untrusted_error_words_and_malformed_replies_are_kept_not_fatal(researcher, server):
    """A NUL in an endpoint's error message (PostgreSQL refuses it in text) and a 200 reply that is no chat
    completion (the client does not validate it) are kept as a failed and an unusable call; the run goes on."""
    study = inputs_study(researcher, ["[[nul-error]] bad words", "[[malformed-shape]] odd", "Fine?"])
    endpoint = add(study, server, "odd", "gen-odd", samples=1, max_retries=0)
    runner.GenerationRun(endpoint).do_run()
    calls = {
        c.item.input.split()[0]: c for c in GenerationCall.objects.filter(endpoint=endpoint).select_related("item")
    }
    assert calls["[[nul-error]]"].status == "failed" and "bad\ufffdgateway" in calls["[[nul-error]]"].problem
    assert calls["[[malformed-shape]]"].status == "unusable" and "malformed" in calls["[[malformed-shape]]"].problem
    assert calls["Fine?"].status == "generated"
    assert runner.GenerationRun(endpoint).usage().replies == 2  # the malformed reply arrived: paid for, counted


def test_the_system_pairs_keep_their_sides_when_the_plan_is_rebuilt(researcher):
    """Review: the complete systems came from a grouped query without an order, so on PostgreSQL (after ANALYZE)
    a rebuild swapped A and B of some pairs, deleting them with their results."""
    from django.db import connection

    lines = "".join(
        json.dumps({"id": f"i{i}", "input": f"Q{i}?", "outputs": {f"s{k:02d}": ["x"] for k in range(12)}}) + "\n"
        for i in range(2)
    )
    study = creation.do_create_study(researcher, "many-systems", lines.encode(), "s.jsonl")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    before = list(study.comparisons.order_by("pk").values_list("pk", "system_a_id", "system_b_id"))
    assert len(before) == 66 and all(a < b for _, a, b in before)
    planning.do_rebuild_plan(study)
    assert list(study.comparisons.order_by("pk").values_list("pk", "system_a_id", "system_b_id")) == before


def test_a_duplicated_study_keeps_its_generated_systems_and_their_provenance(researcher, server):
    from annotation.studies import lifecycle

    study = inputs_study(researcher, ["One?", "Two?"], name="original")
    runner.GenerationRun(add(study, server, "done", "gen-done", samples=2)).do_run()
    add(study, server, "later", "gen-later", samples=2)  # not started
    copy = lifecycle.do_duplicate_study(study, "copy")
    assert sorted(copy.systems.values_list("name", flat=True)) == ["done", "later"]
    later = SystemEndpoint.objects.get(system__study=copy, system__name="later")
    assert later.model == "gen-later" and runner.GenerationRun(later).remaining() == 4
    assert all(
        g.provenance and g.provenance["model"] == "gen-done" for g in Generation.objects.filter(system__study=copy)
    )
    assert copy.comparisons.count() == 0  # 'later' is not complete: nothing to compare yet, and nothing failed
    runner.GenerationRun(later).do_run()
    assert "rebuilt with the new system" in runner.GenerationRun(later).do_include_if_complete()
    assert copy.comparisons.count() == 1
