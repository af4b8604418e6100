"""One researcher no longer starves everyone's jobs. Before: three judges hung on a never-answering endpoint delayed
another researcher's four-request judge by 904 s, and 60 budget-plan POSTs in 1.6 s queued 60 jobs that delayed
another's report by 1,189 s; 40 simultaneous report views of different populations queued 16 refreshes where the
limit was 3. Now a worker takes the researcher served least recently first and never runs more than
SEPLAB_JOBS_PER_RESEARCHER of one researcher's jobs at once (real worker processes on the suite's database); every
kind has a limit, checked and created under the owner's lock, so simultaneous starts never pass it together
(threads with connections of their own); the same plan requested again returns the queued one. The suite runs on
SQLite and on PostgreSQL (.ci/run), and so do these."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import quote

import pytest
from django.db import connections
from django.test import override_settings
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from analytics import budgeting, stored
from analytics.populations import Population
from annotation import jobs
from annotation.models import Job
from annotation.studies import creation
from selection import jobs as selection_jobs
from tests.conftest import study_jsonl
from tests.other_database import run_on


def hang(job, progress):
    """A job that runs until the test lets it go: it tells the test's socket its id, then waits for a byte (a judge
    on an endpoint that never answers, without waiting for a timeout)."""
    with socket.create_connection(("127.0.0.1", job.params["port"])) as connection:
        connection.sendall(f"{job.pk}\n".encode())
        connection.recv(1)
    return "let go"


def quick(job, progress):
    return "done at once"


def suite_database_url() -> str:
    """The suite's own test database as a DATABASE_URL, for a worker process of its own (a transactional test's
    rows are committed, so the worker sees them). User, password and host are quoted; an empty host (a Unix socket)
    stays empty."""
    db = connections["default"].settings_dict
    if connections["default"].vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    login = quote(db["USER"] or "", safe="") + (":" + quote(db["PASSWORD"], safe="") if db["PASSWORD"] else "")
    place = quote(db["HOST"] or "", safe="") + (f":{db['PORT']}" if db["PORT"] else "")
    return f"postgres://{login}@{place}/{quote(db['NAME'], safe='')}"


WORKER = (
    "import django; django.setup()\n"
    "from annotation import jobs, worker\n"
    f"jobs.register('hang', '{__name__}.hang')\n"
    f"jobs.register('quick', '{__name__}.quick')\n"
    "worker.run(['default'], 0.02, 'default', beat_seconds=0.5, slots={slots})\n"
)


class Hangs:
    """The socket the hanging jobs report to: which began (in order), which hang now, the most at once."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.hanging: dict[int, socket.socket] = {}
        self.seen: list[int] = []
        self.most = 0
        self.changed = threading.Condition()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return  # closed at the end of the test
            job_id = int(connection.makefile().readline())
            with self.changed:
                self.hanging[job_id] = connection
                self.seen.append(job_id)
                self.most = max(self.most, len(self.hanging))
                self.changed.notify_all()

    def began(self, n: int, seconds: float = 30) -> int:
        """The id of the n-th job (from 1) to begin hanging, once it has."""
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.seen) >= n, timeout=seconds), "no job began hanging"
            return self.seen[n - 1]

    def let_go(self, job_id: int) -> None:
        with self.changed:
            connection = self.hanging.pop(job_id)
        connection.sendall(b"x")
        connection.close()

    def close(self) -> None:
        """Let every hanging job go (its connection closed) and stop listening, so no worker waits on this test."""
        self.server.close()
        with self.changed:
            hanging, self.hanging = list(self.hanging.values()), {}
        for connection in hanging:
            connection.close()


@pytest.fixture
def hangs(workers) -> Iterator[Hangs]:
    """A ``Hangs`` closed at the end of the test whatever happened, before the workers are stopped."""
    opened = Hangs()
    yield opened
    opened.close()


def stop(process: subprocess.Popen, seconds: float = 10) -> None:
    """SIGTERM (a running task finishes first), then kill if the process has not ended after ``seconds``, so no
    worker is left running against a dropped test database."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture
def kinds():
    jobs.register("hang", f"{__name__}.hang")
    jobs.register("quick", f"{__name__}.quick")
    yield
    for kind in ("hang", "quick"):
        del jobs.KINDS[kind]


@pytest.fixture
def workers() -> Iterator[Callable[..., None]]:
    """Start n worker processes (``annotation.worker.run``, as ``manage.py run_worker`` runs it) on the suite's
    database; stopped (SIGTERM: a running task finishes first) at the end."""
    started: list[subprocess.Popen] = []

    def start(n: int, slots: int = 1, **env: str) -> None:
        environment = {**os.environ, "DATABASE_URL": suite_database_url(), **env}
        script = WORKER.format(slots=slots)
        started.extend(subprocess.Popen([sys.executable, "-c", script], env=environment) for _ in range(n))

    yield start
    for process in started:
        stop(process)


def until(condition, seconds: float = 30) -> None:
    """Wait for what the workers write, checking every 20 ms (nothing sleeps for a fixed time)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def status(job: Job) -> str:
    return Job.objects.get(pk=job.pk).status


@pytest.fixture
def two_researchers(researcher, other_researcher):
    return (
        creation.do_create_study(researcher, "hers", study_jsonl(4), "s.jsonl"),
        creation.do_create_study(other_researcher, "his", study_jsonl(4), "s.jsonl"),
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("processes", "slots"), [(2, 1), (1, 2)], ids=["two workers", "one worker, two slots"])
def test_hung_jobs_of_one_researcher_hold_one_worker_and_another_researcher_s_job_runs_at_once(
    kinds, hangs, workers, two_researchers, processes, slots
):
    """The attack: one researcher's three never-ending jobs, then another's small one, on two workers (or two slots
    of one). With a share of one job per researcher, the first hangs on one; the other skips her two waiting jobs
    and runs his at once, while hers is still hung. She never has two running, and hers run in turn when let go."""
    hers, his = two_researchers
    hung = [jobs.start(hers, "hang", params={"port": hangs.port, "n": n}) for n in range(3)]
    small = jobs.start(his, "quick")
    workers(processes, slots, SEPLAB_JOBS_PER_RESEARCHER="1")
    until(lambda: status(small) == "done")
    assert hangs.began(1) == hung[0].pk
    assert [status(job) for job in hung] == ["running", "queued", "queued"]  # his ran while hers hung
    for n, job in enumerate(hung, start=1):
        assert hangs.began(n) == job.pk  # hers in turn
        hangs.let_go(job.pk)
    until(lambda: all(status(job) == "done" for job in hung))
    assert hangs.most == 1  # never two of hers at once


@pytest.mark.django_db(transaction=True)
def test_a_flood_of_one_researcher_s_jobs_waits_behind_another_s_on_one_worker(kinds, workers, two_researchers):
    """Sixty queued jobs of one researcher no longer run before another's report: the single worker takes the
    researcher served least recently, so his job runs second, after the one of hers it took first (in the order
    they were queued, his would have run ninth)."""
    hers, his = two_researchers
    flood = [jobs.start(hers, "quick", params={"n": n}) for n in range(8)]
    small = jobs.start(his, "quick")
    workers(1)
    until(lambda: all(status(job) == "done" for job in [*flood, small]))
    order = list(Job.objects.order_by("finished", "id").values_list("id", flat=True))
    assert order.index(small.pk) == 1 and order[0] == flood[0].pk
    assert order[2:] == [job.pk for job in flood[1:]]  # hers still oldest first


def test_sixty_budget_posts_queue_one_plan(researcher, client):
    """The attack: 60 POSTs of the budget planner in 1.6 s queued 60 simulations. The same request returns the plan
    already queued (202 with its job); another request while it is queued is refused with the reason (429), and the
    settings page says so."""
    study = creation.do_create_study(researcher, "s", study_jsonl(6), "s.jsonl")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    url = reverse("budget_api", args=[study.pk])
    answers = [api.post(url, {"margins": [0.1], "raters": [1]}, format="json") for _ in range(60)]
    assert {a.status_code for a in answers} == {202}
    assert len({a.json()["job"]["id"] for a in answers}) == 1
    assert Job.objects.filter(study=study, kind=budgeting.KIND).count() == 1
    other = api.post(url, {"margins": [0.2], "raters": [1]}, format="json")
    assert other.status_code == 429 and other["Retry-After"] == "10"
    assert other.json()["detail"].startswith("Budget plans: this study already has 1 queued or running")
    client.force_login(researcher)
    page = client.post(reverse("budget_start", args=[study.pk]), {"margins": "0.3", "raters": "2"}, follow=True)
    assert "Budget plans: this study already has 1 queued or running" in page.content.decode()
    assert Job.objects.filter(study=study, kind=budgeting.KIND).count() == 1


@override_settings(SEPLAB_JOBS_PER_KIND=3)
def test_every_kind_is_capped_per_study_and_per_researcher(researcher):
    """Embedding and separability coalesce (the same computation again returns the one queued); a study computes at
    most two metrics at once; a researcher has at most SEPLAB_JOBS_PER_KIND of a kind across their studies; a job
    of the same work as a running one (an endpoint run's next time slice) is always admitted."""
    studies = [creation.do_create_study(researcher, f"s{n}", study_jsonl(4), "s.jsonl") for n in range(4)]
    first = selection_jobs.do_start_embedding_job(studies[0])
    assert selection_jobs.do_start_embedding_job(studies[0]) == first
    Job.objects.filter(pk=first.pk).update(status=Job.Status.RUNNING)
    assert selection_jobs.do_start_embedding_job(studies[0]) == first  # running: its result is the same
    a = selection_jobs.do_start_separability_job(studies[0], "rouge1")
    assert selection_jobs.do_start_separability_job(studies[0], "rouge1") == a
    selection_jobs.do_start_separability_job(studies[0], "bleu")
    with pytest.raises(jobs.JobLimit, match="Separability computations: this study already has 2 queued or running"):
        selection_jobs.do_start_separability_job(studies[0], "cosine")
    selection_jobs.do_start_embedding_job(studies[1])
    selection_jobs.do_start_embedding_job(studies[2])
    with pytest.raises(jobs.JobLimit, match="you already have 3 queued or running across your studies"):
        selection_jobs.do_start_embedding_job(studies[3])
    assert Job.objects.filter(kind="embed").count() == 3  # the refused start created nothing
    run = Job.objects.create(study=studies[3], kind="judge", params={"judge": 7}, status=Job.Status.RUNNING)
    for judge in (8, 9):
        jobs.start(studies[3], "judge", params={"judge": judge})
    going_on = jobs.start(studies[3], "judge", params={"judge": 7})  # the running run's next slice
    assert going_on.pk != run.pk and going_on.status == Job.Status.QUEUED
    with pytest.raises(jobs.JobLimit, match="Judge runs: you already have 3"):
        jobs.start(studies[3], "judge", params={"judge": 10})


def at_once(start, n: int = 40) -> list:
    """What ``start(i)`` gave (or the name of what it raised) in each of ``n`` threads, each with its own
    connection, let go together at one barrier."""
    gate = threading.Barrier(n)
    outcomes: list = []

    def run(i: int) -> None:
        try:
            gate.wait()
            outcomes.append(start(i))
        except Exception as exc:
            outcomes.append(type(exc).__name__)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


@pytest.mark.django_db(transaction=True)
@override_settings(SEPLAB_JOBS_PER_KIND=8)
def test_simultaneous_starts_never_pass_the_limits(researcher):
    """The race: 40 simultaneous views of different populations queued 16 refreshes with a limit of 3. Forty threads
    start at one barrier: one study's refreshes stay at 3 (the other views wait, None), forty views of one
    population share one job, a budget plan is queued once (the same request returns it, another is refused), and
    one researcher's refreshes across studies stay at SEPLAB_JOBS_PER_KIND."""
    mine = [creation.do_create_study(researcher, f"s{n}", study_jsonl(4), "s.jsonl") for n in range(6)]
    views = at_once(lambda i: stored.do_request_refresh(mine[0], Population(rater=f"r{i}"), "v1"))
    assert Job.objects.filter(study=mine[0], kind="report").count() == stored.MAX_QUEUED_REFRESHES
    assert sum(1 for outcome in views if outcome is None) == 40 - stored.MAX_QUEUED_REFRESHES
    same_view = at_once(lambda i: stored.do_request_refresh(mine[1], Population(), "v1"))
    assert len({outcome.pk for outcome in same_view}) == 1
    assert Job.objects.filter(study=mine[1], kind="report").count() == 1
    plans = at_once(lambda i: budgeting.do_start_budget(mine[2], budgeting.read_request(mine[2], {"seed": i % 2})))
    assert Job.objects.filter(study=mine[2], kind="budget").count() == 1
    assert {o for o in plans if isinstance(o, str)} == {"JobLimit"} and len(
        {o.pk for o in plans if o != "JobLimit"}
    ) == 1
    across = at_once(lambda i: stored.do_request_refresh(mine[i % 6], Population(rater=f"x{i}"), "v1"))
    assert Job.objects.filter(study__owner=researcher, kind="report").count() == 8
    assert not [o for o in views + same_view + across if isinstance(o, str)]  # nothing raised


@override_settings(SEPLAB_JOBS_PER_KIND=1, SEPLAB_IMPORT_STEP=2)
def test_an_import_past_the_researcher_s_limit_is_refused_on_the_page_and_creates_nothing(researcher_client):
    """Large files are imported by the worker; a researcher with as many imports queued as they may gets the reason
    on the page, and neither a study nor a staged upload is left from the refused one."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotation.models import Study, Upload

    def post(name: str):
        upload = SimpleUploadedFile(f"{name}.jsonl", study_jsonl(4))
        return researcher_client.post(reverse("study_create"), {"name": name, "file": upload})

    assert post("first").status_code == 302 and Job.objects.filter(kind="import").count() == 1
    refused = post("second")
    assert "Study imports: you already have 1 queued or running across your studies" in refused.content.decode()
    assert not Study.objects.filter(name="second").exists() and Upload.objects.count() == 1


class Worker:
    """One worker process (``WORKER``, and ``extra`` code run before it) whose log lines the test can wait for."""

    def __init__(self, slots: int, extra: str = "", **env: str) -> None:
        environment = {**os.environ, "DATABASE_URL": suite_database_url(), **env}
        script = WORKER.format(slots=slots).replace("worker.run(", extra + "worker.run(")
        self.process = subprocess.Popen(
            [sys.executable, "-c", script], env=environment, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self.logged = threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self.logged:
                self.lines.append(line)
                self.logged.notify_all()

    def said(self, text: str, seconds: float = 10) -> bool:
        """Whether the worker logs ``text`` within ``seconds``."""
        with self.logged:
            return self.logged.wait_for(lambda: any(text in line for line in self.lines), timeout=seconds)


@pytest.fixture
def worker_process() -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(slots: int, extra: str = "", **env: str) -> Worker:
        started.append(Worker(slots, extra, **env))
        return started[-1]

    yield start
    for worker in started:
        stop(worker.process)


@pytest.mark.django_db(transaction=True)
def test_a_worker_with_slots_stops_once_its_running_jobs_are_done(kinds, worker_process, hangs, two_researchers):
    """SIGTERM to a worker of two slots: the job running goes on to its end (not cut off), then the worker exits."""
    hers, _ = two_researchers
    job = jobs.start(hers, "hang", params={"port": hangs.port})
    worker = worker_process(2)
    assert hangs.began(1) == job.pk
    worker.process.terminate()
    assert worker.said("Received"), "the worker never said it was told to stop"
    assert worker.process.poll() is None  # still running its job
    hangs.let_go(job.pk)
    assert worker.process.wait(10) == 0 and status(job) == "done"


# In the worker process: right after a claim commits (before its task begins), tell the test's socket the job's id
# and wait for its byte -- Django's own on_commit hook on django-tasks' claim, so the test signals inside that gap.
PAUSE_AFTER_CLAIM = (
    "import os, socket\n"
    "from django.db import transaction\n"
    "from django.db.models.signals import post_save\n"
    "from django_tasks_db.models import DBTaskResult\n"
    "def pause(instance):\n"
    "    with socket.create_connection(('127.0.0.1', int(os.environ['PAUSE_PORT']))) as connection:\n"
    "        connection.sendall(f\"{instance.args_kwargs['args'][0]}\\n\".encode())\n"
    "        connection.recv(1)\n"
    "def claimed(sender, instance, update_fields=None, **kwargs):\n"
    "    if update_fields and 'worker_ids' in update_fields:\n"
    "        transaction.on_commit(lambda: pause(instance))\n"
    "post_save.connect(claimed, sender=DBTaskResult, weak=False)\n"
)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("slots", [1, 2])
def test_sigterm_right_after_a_claim_lets_the_claimed_job_run_to_its_end(
    kinds, worker_process, hangs, two_researchers, slots
):
    """The defect: with one slot, django-tasks' own signal handler ran, and it exits at once unless its task has
    begun -- a SIGTERM after a claim committed but before its task began (the job's heartbeat write can wait 20 s
    on SQLite's lock) exited 0 with the job "running" until the sweep failed it as vanished, its task row running
    for good. Now the main thread takes the signals with one slot too: the claimed job runs to its end, then the
    worker exits 0."""
    from django_tasks_db.models import DBTaskResult

    hers, _ = two_researchers
    claims = Hangs()
    try:
        job = jobs.start(hers, "hang", params={"port": hangs.port})
        worker = worker_process(slots, PAUSE_AFTER_CLAIM, PAUSE_PORT=str(claims.port))
        assert claims.began(1, seconds=10) == job.pk  # claimed, committed, its task not begun
        worker.process.terminate()
        assert worker.said("Received"), "the worker never said it was told to stop"
        claims.let_go(job.pk)
        assert hangs.began(1, seconds=10) == job.pk  # the claimed job began after the signal
        assert worker.process.poll() is None
        hangs.let_go(job.pk)
        assert worker.process.wait(10) == 0
        assert status(job) == "done"
        assert list(DBTaskResult.objects.values_list("status", flat=True)) == ["SUCCESSFUL"]
    finally:
        claims.close()


REFUSE_RUNNING = {  # a database that refuses, with an error that is no outage, to mark any job running
    "sqlite": [
        "CREATE TRIGGER refuse_running BEFORE UPDATE OF status ON selection_job WHEN NEW.status = 'running' "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION refuse_running() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$",
        "CREATE TRIGGER refuse_running BEFORE UPDATE OF status ON selection_job FOR EACH ROW "
        "WHEN (NEW.status = 'running') EXECUTE FUNCTION refuse_running()",
    ],
}
ALLOW_RUNNING = {
    "sqlite": ["DROP TRIGGER IF EXISTS refuse_running"],
    "postgresql": [
        "DROP TRIGGER IF EXISTS refuse_running ON selection_job",
        "DROP FUNCTION IF EXISTS refuse_running()",
    ],
}


def execute(statements: list[str]) -> None:
    with connections["default"].cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("slots", [1, 2])
def test_a_database_error_that_is_no_outage_does_not_end_a_slot(kinds, worker_process, two_researchers, slots):
    """The defect: a slot waited out only OperationalError and InterfaceError; any other error in its claim (an
    IntegrityError on SQLite, an InternalError on PostgreSQL: here a trigger refusing to mark a job running) ended
    the slot's thread, and once every slot had ended the process exited 0, so nothing started it again. Now the
    slot logs it, waits and claims again: once the database accepts the claim the job runs, in the same process."""
    hers, _ = two_researchers
    vendor = connections["default"].vendor
    job = jobs.start(hers, "quick")
    execute(REFUSE_RUNNING[vendor])
    try:
        worker = worker_process(slots)
        for slot in range(slots):  # every slot met it and goes on
            assert worker.said(f"database unavailable to worker slot {slot} (refused by the test"), slot
    finally:
        execute(ALLOW_RUNNING[vendor])
    until(lambda: status(job) == "done", seconds=10)
    assert worker.process.poll() is None  # still serving
    worker.process.terminate()
    assert worker.process.wait(10) == 0


# In the worker process: slot 0's loop ends as no error does (SystemExit, which a thread swallows without a word).
SLOT_0_ENDS = (
    "import threading\n"
    "serve = worker.SupervisedWorker.run\n"
    "def run(self):\n"
    "    if threading.current_thread().name.startswith('slot-0-'):\n"
    "        raise SystemExit\n"
    "    serve(self)\n"
    "worker.SupervisedWorker.run = run\n"
)


@pytest.mark.django_db(transaction=True)
def test_a_slot_that_ends_unasked_ends_the_worker_with_exit_1(worker_process):
    """The defect: a slot's thread that ended left the worker running with fewer slots, and when every slot had
    ended the process exited 0 -- `make run`'s loop (`run_worker && break`) and Restart=on-failure took that as a
    clean stop. Now the worker stops its other slots and exits 1, saying which slot ended."""
    worker = worker_process(2, SLOT_0_ENDS)
    assert worker.process.wait(10) == 1
    assert worker.said("worker slot 0 ended without being told to")


STALLED_CLAIM = """
import threading, time
from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django_tasks_db.models import DBTaskResult
from django_tasks_db.utils import exclusive_transaction
from annotation import jobs, worker
from annotation.models import Job
from annotation.studies import creation
from tests.conftest import study_jsonl

jobs.register("quick", "tests.hardening.test_job_fairness.quick")
study = creation.do_create_study(get_user_model().objects.create_user("her"), "hers", study_jsonl(4), "s.jsonl")
job = jobs.start(study, "quick")
held, release = threading.Event(), threading.Event()

def stalled_claim():
    try:
        with transaction.atomic(), connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [worker.CLAIM_LOCK])
            held.set()
            release.wait(10)
    finally:
        connections.close_all()

thread = threading.Thread(target=stalled_claim)
thread.start()
try:
    assert held.wait(10)
    began = time.monotonic()
    with exclusive_transaction():
        while_held = worker.do_claim_fairly(DBTaskResult.objects.ready(), "w")
        with connections["default"].cursor() as cursor:
            cursor.execute("SHOW idle_in_transaction_session_timeout")
            idle_limit = cursor.fetchone()[0]
    waited = time.monotonic() - began
finally:
    release.set()
    thread.join()
with exclusive_transaction():
    claimed = worker.do_claim_fairly(DBTaskResult.objects.ready(), "w")
result = {
    "while_held": while_held is not None,
    "idle_limit": idle_limit,
    "waited": waited,
    "claimed_after": claimed is not None,
    "status": Job.objects.get(pk=job.pk).status,
}
"""


@pytest.mark.own_database
def test_a_stalled_claim_on_postgresql_holds_up_no_other_worker(tmp_path):
    """The defect: claims waited on PostgreSQL's advisory lock without a limit, so one stalled claim transaction
    stopped every worker while each still said it was alive. Now a claim that finds the lock taken gives up at once
    (the worker polls again), and a claim transaction idle for 30 s is ended by the server. Run on a PostgreSQL
    database of its own whichever database the suite runs on (SQLite has no advisory lock: its claims take the
    exclusive write lock)."""
    seen = run_on("postgresql", STALLED_CLAIM, tmp_path)
    assert seen["while_held"] is False  # gave up instead of claiming or waiting
    assert seen["waited"] < 1  # did not wait for the stalled claim
    assert seen["idle_limit"] == "30s"
    assert seen["claimed_after"] is True and seen["status"] == "running"


@pytest.mark.parametrize(
    ("arguments", "refusal"), [(["--slots", "0"], "--slots"), (["--max-tasks", "0"], "--max-tasks")]
)
def test_run_worker_refuses_zero_slots_or_tasks_instead_of_taking_the_default(arguments, refusal):
    """``--slots 0`` was taken as the default (a worker started with SEPLAB_WORKER_SLOTS); now it is refused."""
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=f"^{refusal} must be 1 or more$"):
        call_command("run_worker", *arguments)


@pytest.mark.django_db
def test_a_claim_counts_running_jobs_and_last_ends_per_researcher(two_researchers, researcher):
    """What a claim weighs (read through the status and (study, finished) indexes, not over every job a researcher
    ever had): the jobs running on a worker (a foreground run takes none) and the latest end over all studies."""
    from annotation import worker

    hers, his = two_researchers
    other = creation.do_create_study(researcher, "hers too", study_jsonl(4), "s.jsonl")
    early, late = dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 1, tzinfo=dt.UTC)
    Job.objects.create(study=hers, kind="report", status=Job.Status.DONE, finished=late)
    Job.objects.create(study=other, kind="report", status=Job.Status.FAILED, finished=early)
    Job.objects.create(study=other, kind="report", status=Job.Status.RUNNING)
    Job.objects.create(study=hers, kind="generate", status=Job.Status.RUNNING, params={"foreground": True})
    Job.objects.create(study=his, kind="report", status=Job.Status.QUEUED)
    assert worker._served({hers.owner_id, his.owner_id}) == {hers.owner_id: (1, late), his.owner_id: (0, None)}
