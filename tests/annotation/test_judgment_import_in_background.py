"""A 70,000-line judgments file was once imported inside the request, holding the database's write lock for
14-16 s (submits on other studies stalled up to 12.9 s on SQLite). A large file is now checked in the request
(every problem listed, nothing saved) and imported by the worker in short steps, all or nothing."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.urls import reverse

from annotation import jobs
from annotation.jobs import run_job
from annotation.models import Job, Judgment, Upload
from annotation.rating import imports
from annotation.studies import creation


def judgment_file(n: int, bad_line: int | None = None) -> bytes:
    lines = []
    for k in range(n):
        line = {
            "id": f"j{k}",
            "item": f"item-{k % 4}",
            "system_a": "sys-a",
            "sample_a": 0,
            "system_b": "sys-b",
            "sample_b": 0,
            "shown_first": "sys-a",
            "rater": f"r{k // 4}",
            "rater_kind": "human",
            "choice": "sys-a",
        }
        if k == bad_line:
            line["choice"] = "sys-z"
        lines.append(json.dumps(line))
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def small_limits(settings):
    settings.SEPLAB_IMPORT_STEP = 20  # a file of more than 20 lines is imported by the worker, 20 a step


def upload(client, study, data: bytes):
    return client.post(
        reverse("judgments_import", args=[study.pk]), {"file": SimpleUploadedFile("j.jsonl", data)}, follow=True
    )


def test_a_large_file_is_checked_in_the_request_and_imported_by_the_worker(researcher_client, study, small_limits):
    page = upload(researcher_client, study, judgment_file(120)).content.decode()
    assert "its 120 judgments are being imported in the background" in page and 'data-testid="judgments-job"' in page
    assert not Judgment.objects.exists() and Upload.objects.count() == 1
    job = Job.objects.get(kind="judgments")
    run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "done" and "Imported 120 judgments (0 already present)" in job.message
    assert Judgment.objects.count() == 120 and not Upload.objects.exists()


def test_a_bad_large_file_is_refused_in_the_request_with_every_problem(researcher_client, study, small_limits):
    response = upload(researcher_client, study, judgment_file(120, bad_line=99))
    assert response.status_code == 400 and "line 100" in response.content.decode()
    assert not Job.objects.filter(kind="judgments").exists() and not Upload.objects.exists()


def test_a_step_that_fails_leaves_nothing_of_the_file(researcher_client, study, small_limits, monkeypatch):
    upload(researcher_client, study, judgment_file(120))
    job = Job.objects.get(kind="judgments")
    real = Judgment.objects.bulk_create
    calls = {"n": 0}

    def third_step_fails(objs, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the database went away")
        return real(objs, **kwargs)

    monkeypatch.setattr(Judgment.objects, "bulk_create", third_step_fails)
    with pytest.raises(jobs.JobFailed, match="Nothing was imported: RuntimeError: the database went away"):
        run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "Nothing was imported" in job.message
    assert not Judgment.objects.exists()  # the first two steps (40 judgments) were deleted again
    assert "The judgments could not be imported" in researcher_client.get(study.get_absolute_url()).content.decode()


@pytest.mark.django_db(transaction=True)
def test_each_step_is_its_own_short_transaction(researcher, small_limits, monkeypatch):
    from tests.conftest import study_jsonl

    study = creation.do_create_study(researcher, "steps", study_jsonl(4), "s.jsonl")
    outermost = []
    real = Judgment.objects.bulk_create

    def watched(objs, **kwargs):  # inside a transaction, and not one nested in a bigger one
        connection = transaction.get_connection()
        outermost.append(connection.in_atomic_block and not connection.savepoint_ids)
        return real(objs, **kwargs)

    monkeypatch.setattr(Judgment.objects, "bulk_create", watched)
    parsed = imports.check_judgment_file(study, judgment_file(120), "j.jsonl")
    summary = imports.do_import_judgments_staged(study, parsed)
    assert summary.created == 120 and outermost == [True] * 6
