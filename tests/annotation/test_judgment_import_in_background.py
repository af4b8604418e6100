"""A 70,000-line judgments file was once imported inside the request, holding the database's write lock for
14-16 s (submits on other studies stalled up to 12.9 s on SQLite). A large file is now checked in the request
(every problem listed, nothing saved) and imported by the worker in short steps, all or nothing: its lines are staged
apart and published in one transaction, and a stopped import is resumed or discarded from the study page."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.urls import reverse

from annotation import jobs
from annotation.jobs import run_job
from annotation.models import Job, Judgment, Rater, StagedJudgment, Upload
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


def test_a_step_that_fails_leaves_nothing_visible_and_the_import_resumes(
    researcher_client, study, small_limits, monkeypatch
):
    upload(researcher_client, study, judgment_file(120))
    job = Job.objects.get(kind="judgments")
    real = StagedJudgment.objects.bulk_create
    calls = {"n": 0}

    def third_step_fails(objs, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the database went away")
        return real(objs, **kwargs)

    monkeypatch.setattr(StagedJudgment.objects, "bulk_create", third_step_fails)
    with pytest.raises(jobs.JobFailed, match="The import stopped \\(RuntimeError: the database went away\\)"):
        run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "None of the file's judgments is in the study yet" in job.message
    assert not Judgment.objects.exists() and not Rater.objects.filter(study=study).exists()
    assert StagedJudgment.objects.count() == 40  # two steps staged, kept for the resume
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert "The judgments could not be imported" in page and 'data-testid="resume-import"' in page
    staged = Upload.objects.get()
    assert researcher_client.post(reverse("upload_resume", args=[study.pk, staged.pk])).status_code == 302
    again = Job.objects.filter(kind="judgments").first()
    assert again.pk != job.pk and again.status == "queued"
    run_job.call(again.pk)
    again.refresh_from_db()
    assert again.status == "done" and "Imported 120 judgments (0 already present)" in again.message
    assert calls["n"] == 3 + 4  # the resume staged the 80 lines left, in 4 steps of 20
    assert Judgment.objects.count() == 120 and not Upload.objects.exists() and not StagedJudgment.objects.exists()
    assert sorted(Judgment.objects.values_list("idempotency_key", flat=True)) == sorted(f"j{k}" for k in range(120))


def test_a_stopped_import_is_discarded_with_everything_staged(researcher_client, study, small_limits, monkeypatch):
    upload(researcher_client, study, judgment_file(120))
    job = Job.objects.get(kind="judgments")
    monkeypatch.setattr(imports, "_publish", lambda upload: (_ for _ in ()).throw(RuntimeError("power cut")))
    with pytest.raises(jobs.JobFailed):
        run_job.call(job.pk)
    assert StagedJudgment.objects.count() == 120 and not Judgment.objects.exists()
    staged = Upload.objects.get()
    assert researcher_client.post(reverse("upload_discard", args=[study.pk, staged.pk])).status_code == 302
    assert not Upload.objects.exists() and not StagedJudgment.objects.exists() and not Judgment.objects.exists()
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert 'data-testid="resume-import"' not in page
    response = researcher_client.post(reverse("upload_resume", args=[study.pk, staged.pk]), follow=True)
    assert "This file is no longer waiting" in response.content.decode()


def test_a_running_import_is_neither_resumed_nor_discarded(researcher_client, study, small_limits):
    upload(researcher_client, study, judgment_file(120))
    staged = Upload.objects.get()
    for action in ("upload_resume", "upload_discard"):
        response = researcher_client.post(reverse(action, args=[study.pk, staged.pk]), follow=True)
        assert "This file is being imported right now" in response.content.decode()
    assert Job.objects.filter(kind="judgments").count() == 1 and Upload.objects.exists()


def test_another_researchers_import_is_not_theirs_to_resume(client, study, small_limits, researcher_client):
    from django.contrib.auth.models import User

    upload(researcher_client, study, judgment_file(120))
    staged = Upload.objects.get()
    client.force_login(User.objects.create_user("other", password="x"))
    assert client.post(reverse("upload_discard", args=[study.pk, staged.pk])).status_code == 404
    assert Upload.objects.exists()


def test_a_file_the_study_no_longer_fits_is_removed_with_its_reason(researcher_client, study, small_limits):
    upload(researcher_client, study, judgment_file(120))
    job = Job.objects.get(kind="judgments")
    study.items.filter(external_id="item-3").delete()
    with pytest.raises(jobs.JobFailed, match="the file no longer fits the study"):
        run_job.call(job.pk)
    job.refresh_from_db()
    assert "unknown item 'item-3'" in job.message and not Upload.objects.exists() and not Judgment.objects.exists()


def test_the_staging_table_carries_every_column_of_a_judgment():
    """Publishing copies a staged line's columns into the judgment's: a new column of Judgment must be staged too
    (or be one a published import leaves empty)."""
    staged = {f.column for f in StagedJudgment._meta.concrete_fields}
    left = {f.column for f in Judgment._meta.concrete_fields} - staged
    # ranking_id: a judgments file never holds a judgment implied by a ranking (refused: the rankings file does)
    assert left == {
        "study_id",
        "rater_id",
        "pair_id",
        "recorded",
        "assignment_id",
        "assignment_pair_id",
        "shown_at",
        "ranking_id",
    }


@pytest.mark.django_db(transaction=True)
def test_each_step_is_its_own_short_transaction_and_publishing_is_one(researcher, small_limits, monkeypatch):
    from tests.conftest import study_jsonl

    study = creation.do_create_study(researcher, "steps", study_jsonl(4), "s.jsonl")
    outermost = []
    real = StagedJudgment.objects.bulk_create

    def watched(objs, **kwargs):  # inside a transaction, and not one nested in a bigger one
        connection = transaction.get_connection()
        outermost.append(connection.in_atomic_block and not connection.savepoint_ids)
        assert not Judgment.objects.filter(study=study).exists()  # nothing published while staging
        return real(objs, **kwargs)

    monkeypatch.setattr(StagedJudgment.objects, "bulk_create", watched)
    _, job = imports.do_start_judgment_import(study, judgment_file(120), "j.jsonl")
    run_job.call(job.pk)
    assert outermost == [True] * 6 and Judgment.objects.filter(study=study).count() == 120
    assert Rater.objects.filter(study=study, source="import").count() == 30


def test_a_stopped_import_stays_offered_after_a_later_import_finishes(
    researcher_client, study, small_limits, monkeypatch
):
    """The page offered a stopped file only while the latest judgments job was the failed one: once another import
    finished, the stopped file and its staged lines were never offered again, and nothing removed them. It stays
    offered, named, until it is resumed or discarded."""
    upload(researcher_client, study, judgment_file(120))
    stopped = Upload.objects.get()
    with monkeypatch.context() as power:
        power.setattr(imports, "_publish", lambda upload: (_ for _ in ()).throw(RuntimeError("power cut")))
        with pytest.raises(jobs.JobFailed):
            run_job.call(Job.objects.get(kind="judgments").pk)
    later = json.dumps({**json.loads(judgment_file(1).decode()), "id": "later"}) + "\n"
    upload(researcher_client, study, later.encode())  # small: imported in the request
    upload(researcher_client, study, judgment_file(150).replace(b'"j', b'"k'))  # large: by a job, which finishes
    finished = Job.objects.filter(kind="judgments").first()
    run_job.call(finished.pk)
    finished.refresh_from_db()
    assert finished.status == "done" and Judgment.objects.count() == 151
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert 'data-testid="stopped-import"' in page and "j.jsonl" in page and "120 judgments" in page
    assert reverse("upload_resume", args=[study.pk, stopped.pk]) in page
    assert reverse("upload_discard", args=[study.pk, stopped.pk]) in page
    researcher_client.post(reverse("upload_resume", args=[study.pk, stopped.pk]))
    run_job.call(Job.objects.filter(kind="judgments").first().pk)
    assert Judgment.objects.count() == 271 and not Upload.objects.exists() and not StagedJudgment.objects.exists()
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert 'data-testid="stopped-import"' not in page


def test_a_parsed_line_becomes_its_columns_in_one_place_whichever_way_it_is_imported(study, small_limits):
    """A parsed line's columns were written out twice, once for a judgment imported at once and once for a staged
    line: one helper now gives both every column they share, and a file imported either way stores the same."""
    from datetime import UTC, datetime

    lines = []
    for k in range(30):
        lines.append(
            json.dumps(
                {
                    **json.loads(judgment_file(k + 1).decode().splitlines()[k]),
                    "comment": f"note {k}",
                    "created": f"2026-02-01T00:00:{k:02d}Z",
                    "time_on_task_ms": 1000 + k,
                    "client_time_ms": 900 + k,
                    "revised": k % 3 == 0,
                    "superseded": k % 4 == 0,
                    "shown_first": "sys-b" if k % 2 else "sys-a",
                    "choice": ("sys-a", "sys-b", "tie")[k % 3],
                    "extra_field": k,
                }
            )
        )
    data = ("\n".join(lines) + "\n").encode()
    parsed = imports.check_judgment_file(study, data, "j.jsonl")
    columns = imports._columns(parsed[0], datetime(2026, 1, 1, tzinfo=UTC))
    own = {"id", "upload", "rater_external_id", "rater_kind", "generation_a", "generation_b"}
    shared = {f.name for f in StagedJudgment._meta.concrete_fields} - own
    assert set(columns) == shared and shared <= {f.name for f in Judgment._meta.concrete_fields}

    def stored(target) -> list[tuple]:
        fields = sorted(shared)
        rows = Judgment.objects.filter(study=target).order_by("idempotency_key")
        return [(j.rater.external_id, j.pair.item.external_id, *(getattr(j, f) for f in fields)) for j in rows]

    at_once = creation.do_create_study(study.owner, "at-once", _study_file(), "s.jsonl")
    assert imports.do_import_judgments(at_once, data, "j.jsonl").created == 30
    _, job = imports.do_start_judgment_import(study, data, "j.jsonl")  # 30 lines, more than a step: staged
    run_job.call(job.pk)
    assert len(stored(study)) == 30 and stored(study) == stored(at_once)


def _study_file() -> bytes:
    from tests.conftest import study_jsonl

    return study_jsonl()
