"""Security pass, M7 and M8: a large study file is imported in short transactions into a study raters cannot see,
published at the end (from the browser: a background job with progress; the request only checks the file);
a failed step leaves nothing; the request reads a file of either kind once; PostgreSQL imports more items than its
65,535 query parameters."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.urls import reverse

from annotation import uploads
from annotation.exchange import judgment_files, study_files
from annotation.jobs import run_job
from annotation.models import Item, Job, Study, Task, Upload
from annotation.plan import planning
from annotation.studies import creation, enrolment
from tests.annotation.test_judgment_import_in_background import judgment_file
from tests.other_database import run_on


def study_file(n: int) -> bytes:
    return "".join(
        json.dumps({"id": f"i{i}", "input": f"in {i}", "outputs": {"a": [f"a {i}"], "b": [f"b {i}"]}}) + "\n"
        for i in range(n)
    ).encode()


def test_the_browser_checks_the_file_then_imports_it_in_the_background(researcher_client, client, settings):
    settings.SEPLAB_IMPORT_STEP = 3
    response = researcher_client.post(
        reverse("study_create"), {"name": "big", "file": SimpleUploadedFile("b.jsonl", study_file(10))}
    )
    study = Study.objects.get(name="big")
    assert response.status_code == 302 and study.status == "importing" and not study.items.exists()
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert 'data-testid="importing"' in page and 'hx-get="' in page  # progress, polled
    rater = enrolment.do_create_rater_link(study, "early")
    assert client.post(reverse("rater_start", args=[rater.token()])).status_code == 503  # not open yet
    job = Job.objects.get(kind="import")
    run_job.call(job.pk)
    study.refresh_from_db()
    job.refresh_from_db()
    assert study.status == "active" and study.items.count() == 10 and Task.objects.filter(study=study).count() == 10
    assert (job.status, job.percent) == ("done", 100) and not Upload.objects.exists()
    assert client.post(reverse("rater_start", args=[rater.token()])).status_code == 302


def test_a_bad_large_file_is_refused_in_the_request_with_nothing_saved(researcher_client, settings):
    settings.SEPLAB_IMPORT_STEP = 3
    bad = study_file(10) + b'{"id": "x"}\n'
    response = researcher_client.post(
        reverse("study_create"), {"name": "bad", "file": SimpleUploadedFile("b.jsonl", bad)}
    )
    assert response.status_code == 400 and b"line 11" in response.content
    assert not Study.objects.exists() and not Job.objects.exists()


@pytest.mark.parametrize("records", [3, 10])
@pytest.mark.parametrize("kind", ["study", "judgments"])
def test_the_request_reads_a_file_once_whether_it_imports_it_or_stages_it(
    researcher_client, study, settings, monkeypatch, kind, records
):
    """Either kind of file: a small one is parsed and what was parsed imported, a large one parsed to check it, then
    its bytes staged for the worker."""
    settings.SEPLAB_IMPORT_STEP = 3
    module, parser = (study_files, "parse_study") if kind == "study" else (judgment_files, "parse_judgments")
    parse, reads = getattr(module, parser), []

    def counted(*args, **kwargs):
        reads.append(1)
        return parse(*args, **kwargs)

    monkeypatch.setattr(module, parser, counted)
    if kind == "study":
        form, url = (
            {"name": "once", "file": SimpleUploadedFile("o.jsonl", study_file(records))},
            reverse("study_create"),
        )
    else:
        form, url = (
            {"file": SimpleUploadedFile("j.jsonl", judgment_file(records))},
            reverse("judgments_import", args=[study.pk]),
        )
    assert researcher_client.post(url, form).status_code == 302
    staged = records > 3
    assert len(reads) == 1 and Upload.objects.filter(kind=kind).count() == staged
    assert Job.objects.filter(kind=uploads.JOB_KINDS[kind]).count() == staged


@pytest.mark.django_db(transaction=True)
def test_each_step_is_a_short_transaction_and_raters_see_nothing_until_published(researcher, settings):
    settings.SEPLAB_IMPORT_STEP = 4
    seen = []

    def progress(done, total):
        study = Study.objects.get(name="steps")
        seen.append((done, total, connection.in_atomic_block, study.status, study.accepts_raters))

    study = creation.do_create_study(researcher, "steps", study_file(10), "s.jsonl", progress=progress)
    assert all(not in_transaction for _, _, in_transaction, _, _ in seen)  # the database is free between steps
    assert all(status == "importing" and not open_ for _, _, _, status, open_ in seen[:-1])
    assert seen[-1][:2] == (seen[-1][1], seen[-1][1]) and study.status == "active"
    assert Item.objects.filter(study=study).count() == 10 and len(seen) >= 4


@pytest.mark.django_db(transaction=True)
def test_a_failed_step_leaves_nothing(researcher, settings, monkeypatch):
    settings.SEPLAB_IMPORT_STEP = 4

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(planning, "do_release_chunk", broken)
    with pytest.raises(RuntimeError):
        creation.do_create_study(researcher, "half", study_file(10), "s.jsonl")
    assert not Study.objects.exists() and not Item.objects.exists()


@pytest.mark.slow(seconds=50)
@pytest.mark.own_database
def test_postgresql_imports_more_items_than_its_query_parameters(tmp_path):
    """On a PostgreSQL database of its own, whichever database this suite runs on: the limit is PostgreSQL's."""
    result = run_on(
        "postgresql",
        """
from django.contrib.auth import get_user_model
from annotation.models import Task
from annotation.studies import creation, enrolment
from tests.hardening.test_large_imports import study_file
owner = get_user_model().objects.create_user("big")
study = creation.do_create_study(owner, "huge", study_file(66_000), "h.jsonl")
result = [study.status, study.items.count(), Task.objects.filter(study=study).count()]
""",
        tmp_path,
    )
    assert result == ["active", 66_000, 66_000]


@pytest.mark.slow(seconds=160)
@pytest.mark.own_database
def test_postgresql_imports_more_judgments_than_its_query_parameters(tmp_path):
    """70,000 judgment lines were once 'database briefly unavailable, try again' on PostgreSQL for ever (one
    lookup with 70,000 keys, one insert of 70,000 rows: past its 65,535 parameters). Looked up and inserted in
    chunks, 66,000 import (one import: ~50 s here)."""
    result = run_on(
        "postgresql",
        """
import json
from django.contrib.auth import get_user_model
from annotation.models import Judgment
from annotation.rating import imports
from annotation.studies import creation, enrolment
owner = get_user_model().objects.create_user("big")
study_lines = "".join(json.dumps({"id": f"i{i}", "input": "q", "outputs": {"a": ["x"], "b": ["y"]}}) + "\\n"
                      for i in range(100))
study = creation.do_create_study(owner, "s", study_lines.encode(), "s.jsonl")
lines = "".join(json.dumps({"id": f"j{n}", "item": f"i{n % 100}", "system_a": "a", "sample_a": 0, "system_b": "b",
                            "sample_b": 0, "shown_first": "a", "rater": f"r{n // 100}", "rater_kind": "human",
                            "choice": "a"}) + "\\n" for n in range(70_000))
first = imports.do_import_judgments(study, lines.encode(), "j.jsonl")
again = imports.do_import_judgments(study, lines.encode(), "j.jsonl")
result = [first.created, again.created, again.skipped, Judgment.objects.filter(study=study).count()]
""",
        tmp_path,
    )
    assert result == [70_000, 0, 70_000, 70_000]


# In the child process: a worker started as a process of its own, killed with SIGKILL while it imports a judgments
# file and then a study file, on the database run_on made. The steps are small so a kill lands half-way.
KILLED = """
import datetime as dt, json, os, signal, subprocess, sys, time
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from annotation import uploads
from annotation.exchange import exports
from annotation.models import Item, Job, Judgment, Pair, Rater, StagedJudgment, Study, Task, Upload
from annotation.rating import imports
from annotation.studies import creation
from annotation.worker import do_sweep_stale_jobs
from analytics.report.data import load_rows

STEP = "25"
settings.SEPLAB_IMPORT_STEP = int(STEP)
env = {**os.environ, "SEPLAB_IMPORT_STEP": STEP}

def worker():
    return subprocess.Popen([sys.executable, "manage.py", "run_worker", "--interval", "0.05", "--beat-seconds", "0.5"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

def wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False

def half_way(job):
    row = Job.objects.get(pk=job.pk)
    return row.status == "running" and 0 < row.done < row.total

def swept():  # the stale-job sweep, as a worker runs it once the killed one's heartbeat is old
    return do_sweep_stale_jobs(timezone.now() + dt.timedelta(seconds=settings.SEPLAB_JOB_STALE_SECONDS + 1))

owner = get_user_model().objects.create_user("owner")
items = "".join(json.dumps({"id": f"i{i}", "input": "q", "outputs": {"a": ["x"], "b": ["y"]}}) + "\\n"
                for i in range(20))
study = creation.do_create_study(owner, "s", items.encode(), "s.jsonl")
pairs_before = Pair.objects.filter(item__study=study).count()
lines = "".join(json.dumps({"id": f"j{n}", "item": f"i{n % 20}", "system_a": "a", "sample_a": 0, "system_b": "b",
                            "sample_b": 0, "shown_first": "a", "rater": f"r{n // 20}", "rater_kind": "human",
                            "choice": "a"}) + "\\n" for n in range(4000))
_, job = imports.do_start_judgment_import(study, lines.encode(), "j.jsonl")
first = worker()
killed_staging = wait_for(lambda: half_way(job), 120)
first.kill(); first.wait()  # kill -9
staged = StagedJudgment.objects.count()
visible = {"judgments": Judgment.objects.filter(study=study).count(),
           "exported": len(list(exports.judgment_lines(study))), "report_rows": len(load_rows(study)),
           "raters": Rater.objects.filter(study=study).count(),
           "pairs": Pair.objects.filter(item__study=study).count() - pairs_before}
failed = swept() == 1 and Job.objects.get(pk=job.pk).status == "failed"
stopped = uploads.stopped_upload(study, "judgments")
resumed = uploads.do_resume_upload(study, stopped.pk)

second = worker()
finished = wait_for(lambda: Job.objects.get(pk=resumed.pk).status == "done", 180)
big = "".join(json.dumps({"id": f"b{i}", "input": "q", "outputs": {"a": ["x"], "b": ["y"]}}) + "\\n"
              for i in range(1500))
importing, study_job = creation.do_start_study_import(owner, "big", big.encode(), "big.jsonl")
killed_items = wait_for(lambda: half_way(study_job), 120)
second.kill(); second.wait()
importing.refresh_from_db()
partial = {"status": importing.status, "open": importing.accepts_raters, "items": 0 < importing.items.count() < 1500,
           "listed": Study.objects.filter(pk=importing.pk, status="active").exists()}
study_failed = swept() == 1
resumed_study = uploads.do_resume_upload(importing, uploads.stopped_upload(importing, "study").pk)
third = worker()
study_finished = wait_for(lambda: Job.objects.get(pk=resumed_study.pk).status == "done", 180)
third.send_signal(signal.SIGTERM); third.wait(30)
importing.refresh_from_db()
result = {
    "killed_staging": killed_staging, "staged": 0 < staged < 4000, "visible": visible, "failed": failed,
    "finished": finished, "message": Job.objects.get(pk=resumed.pk).message,
    "judgments": Judgment.objects.filter(study=study).count(),
    "distinct": Judgment.objects.filter(study=study).values("idempotency_key").distinct().count(),
    "raters": Rater.objects.filter(study=study, source="import").count(), "left": StagedJudgment.objects.count(),
    "killed_items": killed_items, "partial": partial, "study_failed": study_failed, "study_finished": study_finished,
    "study": [importing.status, importing.items.count(), Task.objects.filter(study=importing).count(),
              list(importing.items.order_by("position").values_list("external_id", flat=True))
              == [f"b{i}" for i in range(1500)]],
    "uploads": Upload.objects.count(),
}
"""


@pytest.mark.slow(seconds=45)
@pytest.mark.own_database
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_worker_killed_mid_import_leaves_nothing_visible_and_the_import_resumes(tmp_path, database):
    """kill -9 of the worker 30 s into a 100,000-line judgments import on PostgreSQL once left 32,000 judgments in
    the study's exports and reports (and the 22 MB file); during a 70,000-item study import, an "importing" study
    whose page said "Start it again" but offered only delete. Now a judgments file's lines are staged apart and
    published in one transaction, an unfinished study opens to no one, and either import resumes where it stopped
    and completes, each line once."""
    result = run_on(database, KILLED, tmp_path)
    assert result["killed_staging"] and result["staged"] and result["failed"]
    assert result["visible"] == {"judgments": 0, "exported": 0, "report_rows": 0, "raters": 0, "pairs": 0}
    assert result["finished"] and result["message"] == "Imported 4,000 judgments (0 already present)."
    assert result["judgments"] == result["distinct"] == 4000 and result["raters"] == 200 and result["left"] == 0
    assert result["killed_items"] and result["study_failed"]
    assert result["partial"] == {"status": "importing", "open": False, "items": True, "listed": False}
    assert result["study_finished"] and result["study"] == ["active", 1500, 1500, True]
    assert result["uploads"] == 0


def test_a_stopped_study_import_is_resumed_from_its_page(researcher_client, settings, monkeypatch):
    """The unfinished study's page said "Start it again" and offered only delete: now it offers to resume, which goes
    on after the items already imported."""
    settings.SEPLAB_IMPORT_STEP = 3
    researcher_client.post(
        reverse("study_create"), {"name": "big", "file": SimpleUploadedFile("b.jsonl", study_file(10))}
    )
    study, job = Study.objects.get(name="big"), Job.objects.get(kind="import")
    real, calls = planning.do_release_chunk, []

    def power_cut(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("power cut")

    monkeypatch.setattr(planning, "do_release_chunk", power_cut)
    with pytest.raises(RuntimeError):
        run_job.call(job.pk)
    assert study.items.count() == 10 and Study.objects.get(pk=study.pk).status == "importing"
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert 'data-testid="resume-import"' in page and "Delete this unfinished study" in page
    monkeypatch.setattr(planning, "do_release_chunk", real)
    upload = Upload.objects.get()
    assert researcher_client.post(reverse("upload_resume", args=[study.pk, upload.pk])).status_code == 302
    run_job.call(Job.objects.filter(kind="import").first().pk)
    study.refresh_from_db()
    assert study.status == "active" and study.items.count() == 10 and Task.objects.filter(study=study).count() == 10
    assert list(study.items.order_by("position").values_list("external_id", flat=True)) == [f"i{i}" for i in range(10)]
    assert not Upload.objects.exists() and len(calls) == 1
