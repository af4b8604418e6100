"""The background worker that does not die: a held SQLite write lock and a dropped PostgreSQL connection
are waited out (django-tasks' own worker exits on the first), a worker killed mid-job leaves a job that is failed
visibly instead of running forever, and pages and /healthz say when no worker has been seen."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation import jobs
from annotation.models import Job, WorkerBeat
from annotation.worker import VANISHED, do_sweep_stale_jobs, worker_missing
from tests.other_database import run_on

# In the child process: a study with judgments whose report refresh is queued (a Job and its django-tasks row), and
# a helper that starts a worker command as a process of its own on the same database.
SETUP = """
import os, signal, subprocess, sys, time
from django.contrib.auth import get_user_model
from analytics import stored
from analytics.populations import Population
from annotation.studies import creation
from annotation import jobs
from annotation.models import Job, WorkerBeat

owner = get_user_model().objects.create_user("owner", password="x")
lines = "".join('{"id": "i%d", "input": "Q%d", "outputs": {"a": ["x%d"], "b": ["y%d"]}}\\n' % (i, i, i, i)
                for i in range(6))
study = creation.do_create_study(owner, "s", lines.encode(), "s.jsonl")

def queue_report():
    return stored.do_request_refresh(study, Population(), stored.data_version(study) + str(time.monotonic()))

def start(command, *extra, env=None):
    return subprocess.Popen([sys.executable, "manage.py", command, *extra], env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

def wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False
"""


@pytest.mark.slow(seconds=25)
@pytest.mark.own_database
def test_a_held_sqlite_write_lock_ends_django_tasks_worker_but_not_ours(tmp_path):
    """The newcomer's blocker: a request held SQLite's write lock longer than the worker's timeout and `db_worker`
    exited; `run_worker` waits it out and then runs the queued job."""
    result = run_on(
        "sqlite",
        SETUP
        + """
import sqlite3
from django.db import connection
name = connection.settings_dict["NAME"]
short = {"SQLITE_TIMEOUT": "0.5"}

def under_lock(process, until_exit):
    # SQLite's write lock held until the process exits (django-tasks' worker exits at its next poll once the lock
    # outlasts SQLITE_TIMEOUT), or for 2 s for ours (four times the timeout, many polls of 0.1 s)
    holder = sqlite3.connect(name, timeout=5)
    holder.execute("BEGIN IMMEDIATE")
    if until_exit:
        wait_for(lambda: process.poll() is not None, 20)
    else:
        time.sleep(2.0)
    alive = process.poll() is None
    holder.rollback()
    holder.close()
    return alive

plain = start("db_worker", "--no-reload", "--interval", "0.1", env=short)
first = queue_report()
polling = wait_for(lambda: Job.objects.get(pk=first.pk).status == "done", 60)  # it runs jobs
plain_survived = under_lock(plain, until_exit=True)
plain.kill(); plain.wait()

ours = start("run_worker", "--interval", "0.1", "--beat-seconds", "0.5", env=short)
ready = wait_for(lambda: WorkerBeat.objects.exists(), 60)  # started and polling
ours_survived = under_lock(ours, until_exit=False)
job = queue_report()
finished = wait_for(lambda: Job.objects.get(pk=job.pk).status == "done", 60)
beat = WorkerBeat.objects.exists()
ours.send_signal(signal.SIGTERM)
ours.wait(30)
result = {"polling": polling, "ready": ready, "plain_survived": plain_survived, "ours_survived": ours_survived,
          "finished": finished, "beat": beat, "status": Job.objects.get(pk=job.pk).status,
          "left": WorkerBeat.objects.count()}
""",
        tmp_path,
    )
    assert result["polling"] and result["ready"]
    assert result["plain_survived"] is False  # the failure this guards against
    assert result["ours_survived"] is True and result["finished"] and result["status"] == "done"
    assert result["beat"] and result["left"] == 0  # a stopped worker takes its sign of life with it


@pytest.mark.slow(seconds=23)
@pytest.mark.own_database
def test_a_dropped_postgresql_connection_ends_django_tasks_worker_but_not_ours(tmp_path):
    result = run_on(
        "postgresql",
        SETUP
        + """
from django.db import connection
persistent = {"DB_CONN_MAX_AGE": "60"}  # as in production: the worker keeps its connection between polls

def drop_connections(times):  # a restart or a pooler drops every other connection of the database, again and again
    dropped = 0
    for _ in range(times):
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            dropped += cursor.fetchone()[0]
        time.sleep(0.3)
    return dropped

plain = start("db_worker", "--no-reload", "--interval", "0.1", env=persistent)
first = queue_report()
polling = wait_for(lambda: Job.objects.get(pk=first.pk).status == "done", 60)  # connected, running jobs
drop_connections(3)
plain_survived = not wait_for(lambda: plain.poll() is not None, 20)  # it exits at its next poll
plain.kill(); plain.wait()

ours = start("run_worker", "--interval", "0.1", "--beat-seconds", "0.5", env=persistent)
ready = wait_for(lambda: WorkerBeat.objects.exists(), 30)
dropped = drop_connections(10)
job = queue_report()
finished = wait_for(lambda: Job.objects.get(pk=job.pk).status == "done", 60)
alive = ours.poll() is None
ours.send_signal(signal.SIGTERM)
ours.wait(30)
result = {"polling": polling, "ready": ready, "dropped": dropped, "finished": finished, "alive": alive,
          "plain_survived": plain_survived}
""",
        tmp_path,
    )
    assert result["polling"] and result["plain_survived"] is False  # the failure this guards against
    assert result["ready"] and result["dropped"] >= 1
    assert result["finished"] and result["alive"]


@pytest.mark.slow(seconds=18)
@pytest.mark.own_database
def test_a_worker_killed_mid_job_leaves_a_job_failed_visibly_and_the_next_worker_goes_on(tmp_path):
    """kill -9 during a large import: the job is failed with a message saying the worker stopped (the study page
    then offers to delete the unfinished study) instead of "Importing... 48 %" forever; a new worker takes new jobs."""
    result = run_on(
        "sqlite",
        SETUP
        + """
big = "".join('{"id": "b%d", "input": "Q%d", "outputs": {"a": ["x%d"], "b": ["y%d"]}}\\n' % (i, i, i, i)
              for i in range(30000))
fast = {"SEPLAB_JOB_STALE_SECONDS": "3"}
importing, job = creation.do_start_study_import(owner, "big", big.encode(), "big.jsonl")  # the browser's path
first = start("run_worker", "--interval", "0.1", "--beat-seconds", "0.5", env=fast)
running = wait_for(lambda: Job.objects.get(pk=job.pk).done > 0, 120)
first.kill(); first.wait()  # kill -9
second = start("run_worker", "--interval", "0.1", "--beat-seconds", "0.5", env=fast)
failed = wait_for(lambda: Job.objects.get(pk=job.pk).status == "failed", 60)
report = queue_report()
finished = wait_for(lambda: Job.objects.get(pk=report.pk).status == "done", 60)
second.send_signal(signal.SIGTERM)
second.wait(30)
job.refresh_from_db()
importing.refresh_from_db()
result = {"running": running, "failed": failed, "message": job.message, "finished": finished,
          "study": importing.status}
""",
        tmp_path,
    )
    assert result["running"] and result["failed"] and result["finished"]
    assert result["message"] == VANISHED and result["study"] == "importing"  # unpublished: the page offers delete


@pytest.mark.slow(seconds=10)
@pytest.mark.own_database
def test_a_job_cut_short_by_a_held_write_lock_runs_again_or_fails_saying_so(tmp_path, monkeypatch):
    """The race CI met: the worker had claimed the job when a long request took SQLite's write lock, so the job's
    own writes failed. A restartable kind runs again once the lock is gone; an import fails with the reason, and
    neither stays "running" with nobody running it. The lock is real (a second connection's BEGIN IMMEDIATE)."""
    monkeypatch.setenv("SQLITE_TIMEOUT", "0.5")
    result = run_on(
        "sqlite",
        SETUP
        + """
import sqlite3, threading
from django.db import connection
name = connection.settings_dict["NAME"]
runs = []
met = threading.Event()  # the job met the lock: run_job began waiting the outage out
waited = []
wait_for_database = jobs.wait_for_database

def waiting(job_id, exc, *args, **kwargs):
    waited.append(type(exc).__name__)
    met.set()
    return wait_for_database(job_id, exc, *args, **kwargs)

jobs.wait_for_database = waiting

def hold_lock():
    # held until the job has met it (however long the machine takes to get there), then let go
    holder = sqlite3.connect(name, timeout=5, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    def release():
        met.wait(60)
        holder.rollback()
        holder.close()
    threading.Thread(target=release).start()

def body(job, progress):
    runs.append(job.kind)
    if runs.count(job.kind) == 1:
        met.clear()
        hold_lock()
        progress(1, 2)  # meets the held lock after SQLITE_TIMEOUT
    return f"ran {runs.count(job.kind)} times"

jobs.register("locked-restartable", "__main__.body", restartable=True)
jobs.register("locked-import", "__main__.body")
out = {}
for kind in ("locked-restartable", "locked-import"):
    job = Job.objects.create(study=study, kind=kind)
    try:
        jobs.run_job.call(job.pk)
        raised = None
    except Exception as exc:
        raised = type(exc).__name__
    job.refresh_from_db()
    out[kind] = {"status": job.status, "message": job.message, "raised": raised, "runs": runs.count(kind),
                 "waited": waited[:]}
    waited.clear()
result = out
""",
        tmp_path,
    )
    again = result["locked-restartable"]
    assert again == {**again, "status": "done", "message": "ran 2 times", "raised": None, "runs": 2}
    assert again["waited"] == ["OperationalError"]  # it met the lock, waited for it to go, and ran again
    once = result["locked-import"]
    assert once == {**once, "status": "failed", "raised": "JobFailed", "runs": 1, "waited": ["OperationalError"]}
    assert once["message"].startswith(jobs.OUTAGE.format(again="")) and "database is locked" in once["message"]


def test_a_job_is_ended_once_and_only_run_job_writes_over_an_ending(study):
    """jobs.end ends a queued or running job only: a stale-job sweep and a resume (or a stop and a finishing run)
    never both write; run_job's own end is written all the same, since its body did finish."""
    job = Job.objects.create(study=study, kind="report", status=Job.Status.RUNNING)
    assert jobs.end(Job.objects.filter(pk=job.pk), Job.Status.FAILED, VANISHED) == 1
    assert jobs.end(Job.objects.filter(pk=job.pk), Job.Status.DONE, "done") == 0
    job.refresh_from_db()
    assert (job.status, job.message) == ("failed", VANISHED)
    assert jobs.end(Job.objects.filter(pk=job.pk), Job.Status.DONE, "done", ended_too=True) == 1
    with pytest.raises(ValueError, match="not how a job ends"):
        jobs.end(Job.objects.filter(pk=job.pk), Job.Status.RUNNING, "again")


def test_a_job_run_in_the_foreground_whose_caller_died_is_failed_by_the_sweep(study):
    """A foreground run (manage.py generate) is created running with a heartbeat: had it been left queued, its
    caller dying before the run began would leave a job no worker ever takes, waited on for ever."""
    job = jobs.start(study, "report", queue=False)
    assert job.status == Job.Status.RUNNING and job.heartbeat is not None
    assert do_sweep_stale_jobs(job.heartbeat + dt.timedelta(minutes=5)) == 1
    job.refresh_from_db()
    assert (job.status, job.message) == ("failed", VANISHED)


def test_stale_jobs_are_failed_and_fresh_ones_left_alone(study):
    now = timezone.now()
    running = Job.Status.RUNNING
    old = Job.objects.create(study=study, kind="import", status=running, heartbeat=now - dt.timedelta(minutes=3))
    fresh = Job.objects.create(study=study, kind="import", status=running, heartbeat=now - dt.timedelta(seconds=30))
    queued = Job.objects.create(study=study, kind="report", status=Job.Status.QUEUED)
    never = Job.objects.create(study=study, kind="separability", status=Job.Status.RUNNING)
    Job.objects.filter(pk=never.pk).update(created=now - dt.timedelta(minutes=5))
    assert do_sweep_stale_jobs(now) == 2
    statuses = dict(Job.objects.values_list("pk", "status"))
    assert statuses == {old.pk: "failed", fresh.pk: "running", queued.pk: "queued", never.pk: "failed"}
    assert Job.objects.get(pk=old.pk).message == VANISHED


def test_pages_and_health_say_when_no_worker_has_been_seen(researcher_client, client, study):
    job = Job.objects.create(study=study, kind="separability", status=Job.Status.QUEUED)
    page = reverse("job_progress", args=[study.pk, job.pk])
    assert worker_missing()
    assert 'data-testid="worker-missing"' in researcher_client.get(page).content.decode()
    health = client.get("/healthz").json()
    assert health["worker"] == {"last_seen": None, "missing": True} and health["status"] == "ok"
    now = timezone.now()
    WorkerBeat.objects.create(worker_id="w", host="h", pid=1, started=now, last_seen=now)
    assert not worker_missing()
    assert 'data-testid="worker-missing"' not in researcher_client.get(page).content.decode()
    assert client.get("/healthz").json()["worker"] == {"last_seen": now.isoformat(), "missing": False}
    WorkerBeat.objects.filter(worker_id="w").update(last_seen=now - dt.timedelta(seconds=90))
    assert worker_missing() and 'data-testid="worker-missing"' in researcher_client.get(page).content.decode()


def test_a_job_of_a_kind_nobody_registered_fails_with_the_reason(study):
    """annotation/jobs.py: the one entry point writes FAILED for a job it cannot run, so no page waits on it."""
    from annotation.jobs import run_job

    job = Job.objects.create(study=study, kind="no-such-kind")
    with pytest.raises(KeyError):
        run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and "no-such-kind" in job.message and job.finished is not None


def test_a_job_s_own_database_error_is_not_an_outage(study):
    """A missing table is the job's fault, not the database's absence: the job fails with its own words at once,
    its body run once (an outage would be waited out and a restartable body run again)."""
    from django.db import connection, transaction

    runs = []

    def broken(job, progress):
        runs.append(job.pk)
        with transaction.atomic(), connection.cursor() as cursor:  # a savepoint: the test's transaction goes on
            cursor.execute("SELECT * FROM no_such_table")

    import sys

    sys.modules[__name__].broken = broken
    jobs.register("broken-query", f"{__name__}.broken", restartable=True)
    job = Job.objects.create(study=study, kind="broken-query")
    with pytest.raises(Exception) as raised:
        jobs.run_job.call(job.pk)
    assert not jobs.is_outage(raised.value)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and "no_such_table" in job.message and runs == [job.pk]


def test_what_counts_as_an_outage():
    from django.db import InterfaceError, OperationalError

    assert jobs.is_outage(OperationalError("database is locked"))
    assert jobs.is_outage(InterfaceError("connection already closed"))
    assert not jobs.is_outage(OperationalError("no such table: x"))
    assert not jobs.is_outage(ValueError("database is locked"))

    class Dropped(Exception):
        sqlstate = "57P01"  # psycopg's error for "terminating connection due to administrator command"

    wrapped = OperationalError("terminating connection due to administrator command")
    wrapped.__cause__ = Dropped()
    assert jobs.is_outage(wrapped)
    timeout = OperationalError("canceling statement due to statement timeout")
    timeout.__cause__ = type("QueryCanceled", (Exception,), {"sqlstate": "57014"})()
    assert not jobs.is_outage(timeout)
