"""The study's Systems page over HTTP: every system and where its outputs come from, adding a system by
its OpenAI-compatible endpoint (validated, the key write-only), start / progress / stop / resume of its generation
against the local server's ``gen-`` models, its outputs and the replies it could not use, and the owner's pages
only."""

from __future__ import annotations

import json
import unittest.mock

from django.urls import reverse

from annotation.generating import runner
from annotation.jobs import run_job
from annotation.models import Generation, GenerationCall, Job, SystemEndpoint
from annotation.rating import allocation
from annotation.studies import creation, enrolment
from tests.judge_server import server_fixture

KEY = "sk-systems-page-secret-0123456789"


server = server_fixture(api_key=KEY)


def inputs_study(researcher, inputs: list[str], name: str = "from-inputs"):
    lines = "".join(json.dumps({"id": f"q{i}", "input": text}) + "\n" for i, text in enumerate(inputs))
    return creation.do_create_study(researcher, name, lines.encode(), "inputs.jsonl")


def form_data(server, **changes) -> dict:
    data = {
        "name": "terse",
        "base_url": server.base_url,
        "model": "gen-terse-1",
        "api_key_env": "",
        "api_key": KEY,
        "system_prompt": "Be brief.",
        "samples": "3",
        "temperature": "0.7",
        "max_tokens": "64",
        "seed": "",
        "max_concurrency": "2",
        "request_budget": "100",
        "timeout_seconds": "5",
        "max_retries": "1",
        "price_input": "2.5",
        "price_output": "10",
    }
    return {**data, **changes}


def test_a_study_from_inputs_alone_says_how_to_begin(researcher_client, researcher):
    study = inputs_study(researcher, ["What is 2 + 2?", "Name a colour."])
    assert reverse("systems", args=[study.pk]) in researcher_client.get(study.get_absolute_url()).content.decode()
    page = researcher_client.get(reverse("systems", args=[study.pk])).content.decode()
    assert "No systems yet: add two endpoints below" in page and "2 items each" in page
    assert 'name="base_url"' in page and "Add the system" in page
    assert page.index('name="name"') < page.index('name="base_url"')  # the name comes first
    assert '<option value="" selected>' in page  # a new system reads no key by default, as for a local server


def test_an_imported_study_lists_its_systems_and_whether_they_are_compared(researcher_client, study):
    page = researcher_client.get(reverse("systems", args=[study.pk])).content.decode()
    assert "No systems yet" not in page and page.count('data-testid="system-row"') == 2
    assert page.count("imported from the study file") == 2 and "sys-a" in page and "sys-b" in page
    assert page.count("<td>Yes</td>") == 2 and "<td>20</td>" in page  # 4 items x 5 samples, compared
    assert 'data-testid="systems-frozen"' not in page
    allocation.do_start_assignment(enrolment.do_create_rater_link(study, "r1"))
    page = researcher_client.get(reverse("systems", args=[study.pk])).content.decode()
    assert 'data-testid="systems-frozen"' in page and 'name="base_url"' not in page


def test_adding_a_system_through_the_form_and_the_refused_ones(researcher_client, researcher, server, settings):
    settings.SEPLAB_JUDGE_KEY_VARIABLES = {"OPENAI_API_KEY": ["api.openai.com"]}
    study = inputs_study(researcher, ["One?", "Two?"])
    url = reverse("systems", args=[study.pk])
    bad = researcher_client.post(url, form_data(server, base_url="not a url", temperature="3", samples="0"))
    assert bad.status_code == 200 and not SystemEndpoint.objects.exists()
    text = bad.content.decode()
    assert "Enter a valid URL" in text and "less than or equal to 2.0" in text
    assert "greater than or equal to 1" in text and KEY not in text  # the typed key is not sent back either
    refused = researcher_client.post(url, form_data(server, api_key_env="SECRET_KEY"))
    assert "Select a valid choice" in refused.content.decode() and not SystemEndpoint.objects.exists()

    done = researcher_client.post(url, form_data(server), follow=True)
    endpoint = SystemEndpoint.objects.select_related("system").get()
    assert done.redirect_chain[-1][0] == reverse("system_detail", args=[study.pk, endpoint.pk])
    assert (endpoint.system.name, endpoint.model, endpoint.samples, endpoint.temperature, endpoint.seed) == (
        "terse",
        "gen-terse-1",
        3,
        0.7,
        None,
    )
    assert endpoint.api_key == KEY and endpoint.system_prompt == "Be brief."
    page = done.content.decode()
    assert "System terse added" in page and "Start (6 outputs to go)" in page
    assert KEY not in page and "A key is stored (not shown)" in page

    duplicate = researcher_client.post(url, form_data(server))
    assert duplicate.status_code == 200 and "already has a system named" in duplicate.content.decode()
    assert SystemEndpoint.objects.count() == 1
    listed = researcher_client.get(url).content.decode()
    assert "gen-terse-1</code> at <code>" + server.base_url in listed and "0 of 6 (3 per input)" in listed
    assert "Not yet: once every item has its 3 outputs" in listed and KEY not in listed

    # saving without typing the key keeps it; "remove" clears it
    detail = reverse("system_detail", args=[study.pk, endpoint.pk])
    researcher_client.post(detail, form_data(server, api_key="", model="gen-terse-2"))
    endpoint.refresh_from_db()
    assert (endpoint.model, endpoint.api_key) == ("gen-terse-2", KEY)
    researcher_client.post(detail, form_data(server, api_key="", clear_api_key="on"))
    endpoint.refresh_from_db()
    assert endpoint.api_key == ""


def test_start_run_progress_and_the_outputs_on_the_pages(researcher_client, researcher, server):
    study = inputs_study(researcher, ["What is 2 + 2?", "[[nul]] a bad byte", "[[always-429]] busy"])
    researcher_client.post(reverse("systems", args=[study.pk]), form_data(server, samples="2", max_retries="0"))
    endpoint = SystemEndpoint.objects.get()
    detail = reverse("system_detail", args=[study.pk, endpoint.pk])
    progress_url = reverse("system_progress", args=[study.pk, endpoint.pk])
    assert "No outputs yet" in researcher_client.get(detail).content.decode()
    researcher_client.post(reverse("system_action", args=[study.pk, endpoint.pk, "start"]))
    job = Job.objects.get(kind="generate")
    assert job.status == "queued" and not server.requests  # starting only queues the job
    progress = researcher_client.get(progress_url, HTTP_HX_REQUEST="true")
    card = progress.content.decode()
    assert 'hx-trigger="every 1s"' in card and "Waiting for the worker" in card and "HX-Refresh" not in progress
    again = researcher_client.post(reverse("system_action", args=[study.pk, endpoint.pk, "start"]), follow=True)
    assert "already being generated" in again.content.decode()
    listed = researcher_client.get(reverse("systems", args=[study.pk])).content.decode()
    assert progress_url in listed  # the list's run card polls too

    run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "done", job.message
    done = researcher_client.get(progress_url, HTTP_HX_REQUEST="true")
    assert done["HX-Refresh"] == "true" and "hx-trigger" not in done.content.decode()

    used = runner.GenerationRun(endpoint).usage()
    assert (used.done, used.unusable, used.failed) == (2, 2, 2) and used.tokens > 0
    page = researcher_client.get(detail).content.decode()
    assert "<strong>2</strong> of 6 outputs" in page and f"{used.tokens} tokens" in page and f"${used.cost}" in page
    assert "Replies it could not use (2)" in page and "NUL" in page
    assert "Requests that failed after the retries (2)" in page and "RateLimitError" in page
    assert "Resume (4 outputs to go)" in page and "Not compared yet" in page
    assert page.count('data-testid="output-row"') == 2
    first = Generation.objects.filter(system=endpoint.system).select_related("item").first()
    assert reverse("item_detail", args=[study.pk, first.item_id]) in page
    assert f"{first.provenance['prompt_tokens']} prompt, {first.provenance['completion_tokens']} completion" in page
    assert ">stop<" in page.replace("<td>", ">").replace("</td>", "<")  # the finish reason
    assert "gen-terse-1 on &#x27;What is 2 + 2?&#x27;" in page  # the output, escaped
    assert KEY not in page
    listed = researcher_client.get(reverse("systems", args=[study.pk])).content.decode()
    assert "2 of 6 (2 per input)" in listed and KEY not in listed


def test_outputs_are_escaped_and_paged(researcher_client, researcher, server):
    study = inputs_study(researcher, [f"<script>alert({i})</script>" for i in range(11)])
    endpoint = runner.do_add_endpoint_system(
        study, "many", base_url=server.base_url, model="gen-many", api_key=KEY, api_key_env="", samples=2
    )
    runner.GenerationRun(endpoint).do_run()
    detail = reverse("system_detail", args=[study.pk, endpoint.pk])
    page = researcher_client.get(detail).content.decode()
    assert "<script>alert(" not in page and "&lt;script&gt;alert(" in page
    assert page.count('data-testid="output-row"') == 20 and "Page 1 of 2 (22 outputs)" in page
    assert researcher_client.get(detail + "?page=2").content.decode().count('data-testid="output-row"') == 2
    listed = researcher_client.get(reverse("systems", args=[study.pk])).content.decode()
    # every output, but alone: in no system pair, and the page says why
    assert "22 of 22 (2 per input)" in listed and "<td>Yes</td>" not in listed
    assert "it has every output but is in no system pair" in listed and "it needs a second system" in listed
    assert "Every item has its 2 outputs" in listed


def test_stop_and_resume(researcher_client, researcher, server):
    study = inputs_study(researcher, [f"Question {i}?" for i in range(3)])
    researcher_client.post(reverse("systems", args=[study.pk]), form_data(server, samples="2", max_concurrency="1"))
    endpoint = SystemEndpoint.objects.get()
    researcher_client.post(reverse("system_action", args=[study.pk, endpoint.pk, "start"]))
    job = Job.objects.get(kind="generate")
    stopped = researcher_client.post(reverse("system_action", args=[study.pk, endpoint.pk, "stop"]), follow=True)
    assert "The run stops within a second" in stopped.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.stop_requested
    # no worker had taken it: it is stopped at once and never starts (nothing waits for a worker that may not exist)
    job.refresh_from_db()
    assert job.status == "stopped" and "Stopped before it started" in job.message
    run_job.call(job.pk)  # a worker that comes later skips it
    assert Generation.objects.filter(system=endpoint.system).count() == 0 and not server.requests
    # a running job hears the stop after its first replies
    researcher_client.post(reverse("system_action", args=[study.pk, endpoint.pk, "start"]))
    job = Job.objects.filter(kind="generate").first()
    replies = []
    original = runner.GenerationRun.do_record

    def record_then_stop(run, reply):
        replies.append(reply)
        if len(replies) == 2:
            run.do_stop()
        return original(run, reply)

    with unittest.mock.patch.object(runner.GenerationRun, "do_record", record_then_stop):
        run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "stopped" and "Resume to go on" in job.message
    kept = Generation.objects.filter(system=endpoint.system).count()
    assert 2 <= kept < 6
    page = researcher_client.get(reverse("system_detail", args=[study.pk, endpoint.pk])).content.decode()
    assert f"Resume ({6 - kept} output" in page and "Resume to go on" in page
    researcher_client.post(reverse("system_action", args=[study.pk, endpoint.pk, "start"]))
    run_job.call(Job.objects.filter(kind="generate").first().pk)
    assert Generation.objects.filter(system=endpoint.system).count() == 6
    assert researcher_client.post(reverse("system_action", args=[study.pk, endpoint.pk, "explode"])).status_code == 404


def test_where_the_outputs_come_from_is_kept_once_some_exist(researcher_client, researcher, server):
    study = inputs_study(researcher, ["One?", "Two?"])
    researcher_client.post(reverse("systems", args=[study.pk]), form_data(server, samples="1", request_budget="1"))
    endpoint = SystemEndpoint.objects.get()
    detail = reverse("system_detail", args=[study.pk, endpoint.pk])
    runner.GenerationRun(endpoint).do_run()
    page = researcher_client.get(detail).content.decode()
    assert "The request budget is used up with 1 output to go" in page and 'data-testid="generation-start"' not in page
    refused = researcher_client.post(detail, form_data(server, api_key="", model="gen-other", temperature="0.2"))
    text = refused.content.decode()
    assert refused.status_code == 200 and "already has outputs" in text
    assert "model: &#x27;gen-terse-1&#x27; -&gt; &#x27;gen-other&#x27;" in text and "temperature: 0.7 -&gt; 0.2" in text
    assert 'data-testid="generation-budget"' in text  # the run card shows the stored configuration, not the typed one
    endpoint.refresh_from_db()
    assert (endpoint.model, endpoint.temperature) == ("gen-terse-1", 0.7)
    # the budget, the samples, the concurrency and the prices may change
    researcher_client.post(
        detail, form_data(server, api_key="", request_budget="10", samples="2", max_concurrency="3", price_output="20")
    )
    endpoint.refresh_from_db()
    assert (endpoint.request_budget, endpoint.samples, endpoint.max_concurrency, endpoint.price_output) == (
        10,
        2,
        3,
        20,
    )
    assert "Resume (3 outputs to go)" in researcher_client.get(detail).content.decode()


def test_saving_is_refused_while_the_run_is_live(researcher_client, researcher, server):
    study = inputs_study(researcher, ["One?"])
    researcher_client.post(reverse("systems", args=[study.pk]), form_data(server))
    endpoint = SystemEndpoint.objects.get()
    researcher_client.post(reverse("system_action", args=[study.pk, endpoint.pk, "start"]))
    detail = reverse("system_detail", args=[study.pk, endpoint.pk])
    refused = researcher_client.post(detail, form_data(server, api_key="", request_budget="5"), follow=True)
    assert "Stop the run before changing" in refused.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.request_budget == 100


def test_the_pages_belong_to_the_owner(client, other_researcher, researcher, server):
    study = inputs_study(researcher, ["One?"])
    endpoint = runner.do_add_endpoint_system(study, "s", base_url=server.base_url, model="gen-s", api_key_env="")
    client.force_login(other_researcher)
    for url in (
        reverse("systems", args=[study.pk]),
        reverse("system_detail", args=[study.pk, endpoint.pk]),
        reverse("system_progress", args=[study.pk, endpoint.pk]),
    ):
        assert client.get(url).status_code == 404
    assert client.post(reverse("systems", args=[study.pk]), form_data(server, name="theirs")).status_code == 404
    assert (
        client.post(
            reverse("system_detail", args=[study.pk, endpoint.pk]), form_data(server, model="gen-x")
        ).status_code
        == 404
    )
    for action in ("start", "stop"):
        assert client.post(reverse("system_action", args=[study.pk, endpoint.pk, action])).status_code == 404
    assert not Job.objects.exists() and SystemEndpoint.objects.count() == 1
    endpoint.refresh_from_db()
    assert endpoint.model == "gen-s" and not endpoint.stop_requested
    # nor through another study of theirs: the endpoint must belong to the study in the address
    theirs = inputs_study(other_researcher, ["Mine?"], name="theirs")
    assert client.get(reverse("system_detail", args=[theirs.pk, endpoint.pk])).status_code == 404
    assert GenerationCall.objects.count() == 0
