"""A newcomer's blocker: saving DiffUse with a budget once embedded every output inside the request while it
held SQLite's write lock (27 s), and a file with 400 systems built 79,800 system pairs in the upload request. Now
the embedding runs in the worker, outside any transaction, before the plan is rebuilt in one short transaction; and
a study compares at most 5,000 system pairs (an import with more compares each system with the first, and says so)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from annotation import jobs
from annotation.errors import ServiceError
from annotation.jobs import run_job
from annotation.models import Job, Study, Task
from annotation.studies import creation, lifecycle
from tests.conftest import study_jsonl


@pytest.fixture
def no_embedding_in_the_request(monkeypatch):
    """Embedding outputs raises, as a request must never do it; the worker's job switches it back on."""
    from selection import embedding

    real = embedding.do_embed_texts
    calls = {"worker": 0}

    def refused(*args, **kwargs):
        raise AssertionError("outputs embedded inside the request")

    monkeypatch.setattr(embedding, "do_embed_texts", refused)

    def allow():
        def counted(*args, **kwargs):
            calls["worker"] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(embedding, "do_embed_texts", counted)
        return calls

    return allow


def test_saving_diffuse_with_a_budget_embeds_in_the_worker_not_in_the_request(
    researcher_client, researcher, no_embedding_in_the_request
):
    study = creation.do_create_study(researcher, "s", study_jsonl(12), "s.jsonl")
    from tests.annotation.test_views import settings_form

    response = researcher_client.post(
        reverse("study_settings", args=[study.pk]), settings_form(selection_method="diffuse", budget=4), follow=True
    )
    page = response.content.decode()
    assert response.status_code == 200 and "The plan is being built in the background" in page
    assert 'data-testid="plan-job"' in page and not Task.objects.filter(study=study).exists()
    job = Job.objects.get(study=study, kind="plan")
    assert job.status == "queued"
    calls = no_embedding_in_the_request()
    run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "done" and calls["worker"] >= 1 and "Plan built" in job.message
    assert Task.objects.filter(study=study).count() == 4
    assert 'data-testid="plan-job"' not in researcher_client.get(study.get_absolute_url()).content.decode()


def test_a_plan_that_needs_nothing_embedded_is_still_built_at_once(researcher, no_embedding_in_the_request):
    study = creation.do_create_study(researcher, "s", study_jsonl(12), "s.jsonl")
    lifecycle.do_update_settings(study, {"selection_method": "random", "budget": 5}, None, background=True)
    assert Task.objects.filter(study=study).count() == 5 and not Job.objects.filter(kind="plan").exists()


def test_a_failed_plan_says_why_and_a_newer_change_supersedes_an_older_job(
    researcher, researcher_client, no_embedding_in_the_request
):
    """A change while a plan job is queued needs no second job (the queued one builds from the settings it finds);
    a change while one runs queues a newer one, which makes the running one's plan needless."""
    study = creation.do_create_study(researcher, "s", study_jsonl(12), "s.jsonl")
    lifecycle.do_update_settings(
        study,
        {"selection_method": "diffuse-threshold", "budget": 4, "separability_threshold": 0.99},
        None,
        background=True,
    )
    lifecycle.do_update_settings(study, {"selection_method": "diffuse", "budget": 5}, None, background=True)
    older = Job.objects.get(kind="plan")  # the second change joined the queued job
    Job.objects.filter(pk=older.pk).update(status=Job.Status.RUNNING)  # a worker has taken it
    lifecycle.do_update_settings(study, {"selection_method": "diffuse", "budget": 3}, None, background=True)
    lifecycle.do_update_settings(study, {"selection_method": "diffuse", "budget": 3}, None, background=True)
    newer = Job.objects.exclude(pk=older.pk).get(kind="plan")  # queued behind the running one, once
    no_embedding_in_the_request()
    run_job.call(older.pk)
    older.refresh_from_db()
    assert older.status == "done" and "newer change" in older.message
    run_job.call(newer.pk)
    assert Task.objects.filter(study=study).count() == 3
    # outputs nothing has embedded yet: the threshold leaves no item, which the worker finds and says
    lines = "".join(
        json.dumps(
            {
                "id": f"n{i}",
                "input": f"Q{i}",
                "outputs": {"a": [f"A fresh answer number {i}."], "b": [f"Another fresh reply {i}."]},
            }
        )
        + "\n"
        for i in range(8)
    )
    study = creation.do_create_study(researcher, "fresh", lines.encode(), "f.jsonl")
    lifecycle.do_update_settings(
        study,
        {"selection_method": "diffuse-threshold", "separability_threshold": 1.0, "budget": 4},
        None,
        background=True,
    )
    failing = Job.objects.filter(kind="plan").order_by("-pk").first()
    with pytest.raises(jobs.JobFailed, match="separability"):  # the task fails, as django-tasks records it
        run_job.call(failing.pk)
    failing.refresh_from_db()
    assert failing.status == "failed" and "The plan could not be built" in failing.message
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert "The plan could not be built" in page and "Change the settings" in page


def test_a_file_with_more_system_pairs_than_a_study_compares_is_compared_with_a_baseline(researcher):
    line = {"id": "x", "input": "in", "outputs": {f"sys-{i:03d}": ["out"] for i in range(120)}}
    study = creation.do_create_study(researcher, "many", (json.dumps(line) + "\n").encode(), "m.jsonl")
    assert study.pair_mode == Study.PairMode.BASELINE and study.baseline.name == "sys-000"
    assert study.comparisons.count() == 119
    assert any("7,140 system pairs" in str(w) and "compared with sys-000" in str(w) for w in study.import_warnings)
    with pytest.raises(ServiceError, match="120 systems make 7,140 system pairs; a study compares at most"):
        lifecycle.do_update_settings(study, {"pair_mode": "all"}, None)
    study.refresh_from_db()
    assert study.pair_mode == Study.PairMode.BASELINE  # the refused change changed nothing
