"""The judges pages over HTTP: add (validated), the key write-only, start / stop / resume, progress."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.jobs import run_job
from annotation.judges import prompts, runner
from annotation.models import Job, Judge, JudgeCall
from tests.annotation.test_judge_runner import KEY, study_with
from tests.judge_server import server_fixture

server = server_fixture(api_key=KEY)


def form_data(server, **changes) -> dict:
    data = {
        "name": "gpt-local",
        "base_url": server.base_url,
        "model": "m",
        "api_key_env": "",
        "api_key": KEY,
        "prompt_template": prompts.DEFAULT_TEMPLATE,
        "temperature": "0",
        "max_tokens": "100",
        "scope": "shown",
        "max_concurrency": "2",
        "request_budget": "100",
        "timeout_seconds": "5",
        "max_retries": "2",
        "price_input": "2.5",
        "price_output": "10",
    }
    return {**data, **changes}


def test_add_judge_validates_and_never_shows_the_key(researcher_client, researcher, server):
    study = study_with(researcher, ["Q0?", "Q1?"])
    url = reverse("judges", args=[study.pk])
    page = researcher_client.get(url)
    assert b"No judges yet" in page.content and b"Verdict: A | Verdict: B | Verdict: Tie" in page.content
    bad = researcher_client.post(
        url, form_data(server, prompt_template="Compare {first} and {second}", temperature="3", base_url="not a url")
    )
    assert bad.status_code == 200 and not Judge.objects.exists()
    text = bad.content.decode()
    assert "must contain {input}, {answer_format}" in text and "less than or equal to 2.0" in text
    assert "Enter a valid URL" in text and KEY not in text  # the typed key is not sent back either
    # only the variables the operator allows are offered, and any other is refused without saying if it exists
    assert 'value="OPENAI_API_KEY"' in text and "SECRET_KEY" not in text
    # a new judge reads no key by default, as the README's local server needs none
    assert '<option value="" selected>' in page.content.decode()
    refused = researcher_client.post(url, form_data(server, api_key_env="SECRET_KEY"))
    assert refused.status_code == 200 and not Judge.objects.exists()
    assert "Select a valid choice" in refused.content.decode()
    done = researcher_client.post(url, form_data(server), follow=True)
    judge = Judge.objects.get()
    assert judge.api_key == KEY and judge.rater.external_id == "gpt-local" and judge.rater.kind == "judge"
    assert KEY not in done.content.decode() and "A key is stored (not shown)" in done.content.decode()
    # saving without typing the key keeps it; "remove" clears it
    detail = reverse("judge_detail", args=[study.pk, judge.pk])
    researcher_client.post(detail, form_data(server, api_key="", model="m2"))
    judge.refresh_from_db()
    assert (judge.model, judge.api_key) == ("m2", KEY)
    researcher_client.post(detail, form_data(server, api_key="", clear_api_key="on"))
    judge.refresh_from_db()
    assert judge.api_key == ""
    dup = researcher_client.post(url, form_data(server))
    assert "already has a rater named" in dup.content.decode()


def test_start_progress_stop_resume_over_http(researcher_client, researcher, server):
    study = study_with(researcher, ["Q0?", "[[malformed]] Q1?", "Q2?"])
    researcher_client.post(reverse("judges", args=[study.pk]), form_data(server))
    judge = Judge.objects.get()
    detail = reverse("judge_detail", args=[study.pk, judge.pk])
    assert "Start (6 requests to go)" in researcher_client.get(detail).content.decode()
    researcher_client.post(reverse("judge_action", args=[study.pk, judge.pk, "start"]))
    job = Job.objects.get(kind="judge")
    progress = researcher_client.get(reverse("judge_progress", args=[study.pk, judge.pk])).content.decode()
    assert 'hx-trigger="every 1s"' in progress and "Waiting for the worker" in progress
    again = researcher_client.post(reverse("judge_action", args=[study.pk, judge.pk, "start"]), follow=True)
    assert "already running" in again.content.decode()
    researcher_client.post(reverse("judge_action", args=[study.pk, judge.pk, "stop"]))
    job.refresh_from_db()  # no worker had taken it: stopped at once, never started
    assert job.status == "stopped" and "Stopped before it started" in job.message
    run_job.call(job.pk)  # a worker that comes later skips it
    assert not JudgeCall.objects.filter(judge=judge).exists()
    researcher_client.post(reverse("judge_action", args=[study.pk, judge.pk, "start"]))
    job = Job.objects.filter(kind="judge").first()
    Judge.objects.filter(pk=judge.pk).update(stop_requested=True)  # Stop pressed while the worker runs it
    run_job.call(job.pk)  # the worker sees the stop after its first replies
    job.refresh_from_db()
    assert job.status == "stopped" and "Resume to go on" in job.message
    asked = JudgeCall.objects.filter(judge=judge)
    settled = asked.exclude(status="failed").count()  # replies that came back; what was still out was cut off
    assert 1 <= asked.count() <= 2 and set(asked.values_list("status", flat=True)) <= {
        "judged",
        "unparseable",
        "failed",
    }
    page = researcher_client.get(detail).content.decode()
    assert f"Resume ({6 - settled} request" in page
    researcher_client.post(reverse("judge_action", args=[study.pk, judge.pk, "start"]))
    run_job.call(Job.objects.filter(kind="judge").first().pk)
    page = researcher_client.get(detail).content.decode()
    used = runner.JudgeRun(judge).usage()
    assert (used.done, used.unusable) == (4, 2)
    assert "Every pair of the judge" in page and "Replies it could not read (2)" in page
    assert "Both outputs have merits" in page and f"${used.cost}" in page
    expected = (used.prompt_tokens * 2.5 + used.completion_tokens * 10) / 1e6
    assert float(used.cost) == pytest.approx(expected, abs=1e-4)
    assert KEY not in page


def test_judge_pages_belong_to_the_owner(client, other_researcher, researcher, server):
    study = study_with(researcher, ["Q0?"])
    judge = runner.do_create_judge(study, "j", base_url=server.base_url, model="m", api_key_env="")
    client.force_login(other_researcher)
    for url in (
        reverse("judges", args=[study.pk]),
        reverse("judge_detail", args=[study.pk, judge.pk]),
        reverse("judge_progress", args=[study.pk, judge.pk]),
    ):
        assert client.get(url).status_code == 404
    assert client.post(reverse("judge_action", args=[study.pk, judge.pk, "start"])).status_code == 404
    assert not Job.objects.exists()


def test_a_used_up_budget_says_so_instead_of_offering_resume(researcher_client, researcher, server):
    study = study_with(researcher, ["Q0?", "Q1?"])
    researcher_client.post(reverse("judges", args=[study.pk]), form_data(server, request_budget="2"))
    judge = Judge.objects.get()
    detail = reverse("judge_detail", args=[study.pk, judge.pk])
    page = researcher_client.get(detail).content.decode()
    assert page.index('name="name"') < page.index('name="base_url"')  # the name comes first
    runner.JudgeRun(judge).do_run()
    page = researcher_client.get(detail).content.decode()
    assert "The request budget is used up with 2 requests to go" in page and 'data-testid="judge-start"' not in page
    researcher_client.post(detail, form_data(server, api_key="", request_budget="10"))
    assert "Resume (2 requests to go)" in researcher_client.get(detail).content.decode()


def test_the_judges_page_names_imported_judges(researcher_client, judged_study_with_imports):
    """The demo's judges page once said "No judges yet" beside a judge with 120 verdicts (imported)."""
    page = researcher_client.get(reverse("judges", args=[judged_study_with_imports.pk])).content.decode()
    assert "No judge runs here yet" in page and "No judges yet" not in page
    assert 'data-testid="imported-judges"' in page and "<strong>judge-a</strong> (40 verdicts)" in page


@pytest.fixture
def judged_study_with_imports(study):
    """One person rated every pair; a judge's verdicts on them (both orders) came in a file."""
    from annotation.rating import allocation, imports
    from annotation.studies import enrolment
    from tests.analytics.conftest import judge_lines
    from tests.conftest import answer_all

    rater = enrolment.do_create_rater_link(study, "h1")
    while (assignment := allocation.do_start_assignment(rater)) is not None:
        answer_all(assignment)
    imports.do_import_judgments(study, judge_lines(study, "judge-a", "sys-a", True), "j.jsonl")
    return study
