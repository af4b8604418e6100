"""The background worker that does not die (``manage.py run_worker``): django-tasks' database worker, supervised.

- A database error that is not the task's own -- SQLite's write lock held by a long request, a PostgreSQL
  connection dropped by a restart or a pooler -- no longer ends the process: the worker closes its connections,
  waits (1, 2, 4 ... 30 s) and polls again. A task's own error fails its job as before.
- A thread writes the worker's sign of life (``WorkerBeat``) every ``BEAT_SECONDS`` and the heartbeat of the job it
  is running, whatever its kind; pages that wait on a job say when no worker has been seen for ``GONE_AFTER``
  (``worker_missing``), and /healthz reports it.
- Jobs whose worker vanished (``kill -9``, a crash, a machine gone) are found by their stale heartbeat and failed
  with a message that says so (``do_sweep_stale_jobs``), at start and every minute, so no page waits forever; a failed
  job can be started again from its page.
- The next task is the fairest, not the oldest (``do_claim_fairly``): a researcher with ``SEPLAB_JOBS_PER_RESEARCHER``
  jobs running (on every worker together) gets no other until one ends, and among the rest the researcher with
  the fewest running, then the one served least recently (whose last job ended longest ago, or never), goes first;
  a researcher's own jobs run oldest first. So one researcher's sixty queued jobs or three hung judges delay
  another's report by at most the jobs already running. Claims are taken one at a time (a PostgreSQL advisory lock;
  SQLite's exclusive transaction), and a claimed job is marked running in the same transaction, so two workers
  never both count a researcher below the share.
- A worker runs ``SEPLAB_WORKER_SLOTS`` jobs at once (``--slots``), each slot a thread with its own connection and
  its own supervised loop; with one more than the share, one researcher's long or hung jobs never hold every slot.
  The main thread takes the signals (with one slot too): the first lets the running jobs finish -- a job claimed
  just before it runs to its end -- and a second ends them.
- A slot waits out any database error outside a task and starts again after any other error (logged); should a slot
  end all the same, the worker stops once its other slots' jobs are done and exits with 1, to be started again.
- Claims on PostgreSQL never wait for each other (``pg_try_advisory_xact_lock``: a worker that finds another
  claiming polls again), and a stalled claim transaction is ended by the server after ``CLAIM_IDLE_LIMIT``.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import socket
import threading
import time
from types import FrameType

from django.conf import settings
from django.db import DatabaseError, OperationalError, close_old_connections, connections
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone
from django.utils.crypto import get_random_string
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult
from django_tasks_db.utils import exclusive_transaction, is_locked_database_exception

from annotation import jobs
from annotation.models import Job, Study, WorkerBeat

logger = logging.getLogger("seplab.worker")

BEAT_SECONDS = 10.0  # how often a worker says it is alive and bumps its job's heartbeat
GONE_AFTER = dt.timedelta(seconds=60)  # no sign of life this long: the pages say no worker is running
BACKOFF_MAX = 30.0


def stale_after() -> dt.timedelta:
    """A running job without a heartbeat this long has lost its worker (SEPLAB_JOB_STALE_SECONDS, 120 s)."""
    return dt.timedelta(seconds=settings.SEPLAB_JOB_STALE_SECONDS)


VANISHED = (
    "The background worker stopped while running this job (it was killed, crashed or lost its machine); "
    "nothing after its last progress was kept. Start it again."
)


def last_seen() -> dt.datetime | None:
    """When any worker was last seen alive."""
    beat = WorkerBeat.objects.order_by("-last_seen").values_list("last_seen", flat=True).first()
    return beat


def worker_missing(now: dt.datetime | None = None) -> bool:
    """Whether no worker has been seen for ``GONE_AFTER`` (queued jobs then wait for one to start)."""
    seen = last_seen()
    return seen is None or (now or timezone.now()) - seen > GONE_AFTER


def do_sweep_stale_jobs(now: dt.datetime | None = None) -> int:
    """Fail the running jobs whose heartbeat (or start, when they never had one) is older than ``stale_after``: their
    worker is gone. Returns how many."""
    now = now or timezone.now()
    cutoff = now - stale_after()
    stale = Job.objects.filter(status=Job.Status.RUNNING).filter(
        Q(heartbeat__lt=cutoff) | Q(heartbeat__isnull=True, created__lt=cutoff)
    )
    return jobs.end(stale, Job.Status.FAILED, VANISHED, now=now)


CLAIM_LOCK = 0x5E91AB  # the PostgreSQL advisory lock that takes claims one at a time
CLAIM_IDLE_LIMIT = "30s"  # a claim transaction idle this long is ended by PostgreSQL
NEVER = dt.datetime.min.replace(tzinfo=dt.UTC)


def _served(owners: set[int]) -> dict[int, tuple[int, dt.datetime | None]]:
    """Each of ``owners``' jobs running on a worker (a foreground run takes none) and when their last job ended:
    the running jobs through the status index, the last end as one index seek per study (``Job``'s
    ``(study, finished)`` index), so a claim costs the same however long a researcher's history grows."""
    if not owners:
        return {}
    running: dict[int, int] = {}
    for owner, foreground in Job.objects.filter(status=Job.Status.RUNNING, study__owner_id__in=owners).values_list(
        "study__owner_id", "params__foreground"
    ):
        if foreground is not True:
            running[owner] = running.get(owner, 0) + 1
    latest = Job.objects.filter(study=OuterRef("pk"), finished__isnull=False).order_by("-finished")
    last: dict[int, dt.datetime] = {}
    for owner, finished in (
        Study.objects.filter(owner_id__in=owners)
        .annotate(last=Subquery(latest.values("finished")[:1]))
        .filter(last__isnull=False)
        .values_list("owner_id", "last")
    ):
        if owner not in last or finished > last[owner]:
            last[owner] = finished
    return {owner: (running.get(owner, 0), last.get(owner)) for owner in owners}


def do_claim_fairly(tasks: QuerySet[DBTaskResult], worker_id: str) -> DBTaskResult | None:
    """Claim the fairest ready task of ``tasks`` for ``worker_id`` (inside the caller's claim transaction), or None
    when every ready task belongs to a researcher who has ``SEPLAB_JOBS_PER_RESEARCHER`` jobs running. Fairest: the
    researcher with the fewest jobs running, then the one whose last job ended longest ago (never first), then
    django-tasks' own order (priority, then the oldest). A task that runs no job of a study (not ``run_job``, or
    its job deleted) is taken at once. The claimed task's job is marked running in the same transaction."""
    if tasks.db and connections[tasks.db].vendor == "postgresql":
        with connections[tasks.db].cursor() as cursor:
            # a claim transaction stalled past this is ended by the server, so it cannot hold the lock for good
            cursor.execute(f"SET LOCAL idle_in_transaction_session_timeout = '{CLAIM_IDLE_LIMIT}'")
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [CLAIM_LOCK])
            if not cursor.fetchone()[0]:
                return None  # another worker is claiming: poll again, never wait on it
    ready = list(tasks.values_list("id", "task_path", "args_kwargs"))
    if not ready:
        return None
    job_of: dict[object, int] = {}  # a task's id: the job it runs
    for task_id, path, args_kwargs in ready:
        args = args_kwargs.get("args") if isinstance(args_kwargs, dict) else None
        if path == jobs.run_job.module_path and args and isinstance(args[0], int):
            job_of[task_id] = args[0]
    owner_of = dict(Job.objects.filter(pk__in=set(job_of.values())).values_list("pk", "study__owner_id"))
    served = _served(set(owner_of.values()))
    share = settings.SEPLAB_JOBS_PER_RESEARCHER
    candidates = []
    for index, (task_id, _, _) in enumerate(ready):
        job = job_of.get(task_id)
        owner = owner_of.get(job) if job is not None else None
        running, last = served[owner] if owner is not None else (0, None)
        if running >= share:
            continue  # the researcher's share is running: their other jobs wait
        candidates.append(((running, last is not None, last or NEVER, index), task_id))
    for _, task_id in sorted(candidates):
        task = tasks.filter(id=task_id).select_for_update(skip_locked=True).first()
        if task is None:
            continue  # claimed by a worker that does not take turns (django-tasks' own db_worker)
        task.claim(worker_id)
        if task_id in job_of:
            Job.objects.filter(pk=job_of[task_id], status=Job.Status.QUEUED).update(
                status=Job.Status.RUNNING, heartbeat=timezone.now()
            )
        return task
    return None


class SupervisedWorker(Worker):
    """django-tasks' worker that takes the fairest task instead of the oldest (``do_claim_fairly``) and remembers which
    job it runs (every SepLab task takes the job's id first)."""

    current_job: int | None = None

    def run(self) -> None:
        """django-tasks' worker loop (``Worker.run``, without its start-up delay and batch mode, which ``run`` never
        asks for), claiming with ``do_claim_fairly``."""
        while self.running:
            close_old_connections()  # dropped or expired connections, right after waking up
            tasks = DBTaskResult.objects.ready().filter(backend_name=self.backend_name)
            if not self.process_all_queues:
                tasks = tasks.filter(queue_name__in=self.queue_names)
            with exclusive_transaction(tasks.db):
                try:
                    task_result = do_claim_fairly(tasks, self.worker_id)
                except OperationalError as exc:
                    if not is_locked_database_exception(exc):
                        raise
                    task_result = None  # SQLite's write lock is held: try again at the next poll
            if task_result is not None:
                self.run_task(task_result)
            if self.max_tasks is not None and self._run_tasks >= self.max_tasks:
                return
            close_old_connections()
            if self.running and task_result is None:
                time.sleep(self.interval)

    def run_task(self, db_task_result) -> None:
        args = (db_task_result.args_kwargs or {}).get("args") or []
        self.current_job = args[0] if args and isinstance(args[0], int) else None
        try:
            if self.current_job is not None:
                Job.objects.filter(pk=self.current_job).update(heartbeat=timezone.now())
        except DatabaseError:
            pass  # a sign of life only: the task (run_job) waits out an outage itself
        try:
            super().run_task(db_task_result)
        finally:
            self.current_job = None


class Beat(threading.Thread):
    """Writes the worker's sign of life and its slots' jobs' heartbeats every ``BEAT_SECONDS``; sweeps stale jobs
    every minute (or half the staleness limit, when that is shorter). A database error skips one beat, nothing more."""

    def __init__(self, worker_id: str, beat_seconds: float = BEAT_SECONDS):
        super().__init__(name=f"beat-{worker_id}", daemon=True)
        self.worker_id, self.beat_seconds = worker_id, beat_seconds
        self.workers: dict[int, SupervisedWorker] = {}  # each slot's worker
        self.started_at = timezone.now()
        self.stopping = threading.Event()
        self.swept = 0.0

    def run(self) -> None:
        while True:
            self.beat()
            if self.stopping.wait(self.beat_seconds):
                return

    def beat(self) -> None:
        try:
            now = timezone.now()
            WorkerBeat.objects.update_or_create(
                worker_id=self.worker_id,
                defaults={
                    "host": socket.gethostname()[:255],
                    "pid": os.getpid(),
                    "started": self.started_at,
                    "last_seen": now,
                },
            )
            running = [worker.current_job for worker in list(self.workers.values()) if worker.current_job is not None]
            if running:
                Job.objects.filter(pk__in=running, status=Job.Status.RUNNING).update(heartbeat=now)
            if time.monotonic() - self.swept >= min(60.0, stale_after().total_seconds() / 2):
                swept = do_sweep_stale_jobs(now)
                self.swept = time.monotonic()
                if swept:
                    logger.warning("failed %d job(s) whose worker had stopped", swept)
        except DatabaseError as exc:
            logger.warning("worker heartbeat skipped: %s", exc)
        finally:
            connections.close_all()  # this thread's connections only

    def stop(self) -> None:
        self.stopping.set()
        try:
            WorkerBeat.objects.filter(worker_id=self.worker_id).delete()
        except DatabaseError:
            pass
        finally:
            connections.close_all()


def run(
    queue_names: list[str],
    interval: float,
    backend_name: str,
    beat_seconds: float = BEAT_SECONDS,
    max_tasks: int | None = None,
    slots: int = 1,
) -> None:
    """Run a supervised worker until it is told to stop (SIGINT / SIGTERM: the running tasks finish first, a second
    signal ends them) or has run ``max_tasks`` tasks. ``slots`` tasks run at once, each slot a thread with its own
    connection claiming fairly like any worker, one slot too: this thread only takes the signals, so a signal between
    a claim and its task never ends the process with the claimed job left behind (django-tasks' own handler exits
    at once unless its task has begun). ``max_tasks`` counts one slot's tasks. A slot that ends without being told
    to (``_serve`` only ends when told or done) stops the others once their tasks are done, and the process exits
    with 1, so ``make run``'s loop or a service manager starts it again."""
    if slots < 1:
        raise ValueError("a worker runs at least one slot")
    if slots > 1 and max_tasks is not None:
        raise ValueError("max_tasks counts one slot's tasks: run one slot")
    worker_id = get_random_string(32)
    beat = Beat(worker_id, beat_seconds)
    beat.start()
    stopping = threading.Event()
    ended: set[int] = set()  # the slots that ended as asked (told to stop, or max_tasks run)

    def stop_slots() -> None:
        stopping.set()
        for worker in list(beat.workers.values()):
            worker.running = False

    def shutdown(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():
            logger.warning("Received %s again - ending the running tasks.", signal.strsignal(signum))
            raise SystemExit(1)  # the slots are daemon threads: they end with the process
        logger.warning("Received %s - stopping once the running tasks are done.", signal.strsignal(signum))
        stop_slots()

    def slot_main(slot: int) -> None:
        name = worker_id if slots == 1 else f"{worker_id}-{slot}"
        _serve(name, slot, beat, queue_names, interval, backend_name, max_tasks, stopping)
        ended.add(slot)

    previous = {number: signal.signal(number, shutdown) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        threads = [
            threading.Thread(target=slot_main, name=f"slot-{slot}-{worker_id}", args=(slot,), daemon=True)
            for slot in range(slots)
        ]
        for thread in threads:
            thread.start()
        lost = False
        while any(thread.is_alive() for thread in threads):
            for slot, thread in enumerate(threads):
                thread.join(0.2)  # short joins, so this thread takes the signals
                if not thread.is_alive() and slot not in ended and not lost:
                    lost = True
                    logger.error("worker slot %d ended without being told to; stopping the worker", slot)
                    stop_slots()
        if lost:
            raise SystemExit(1)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        beat.stop()


def _serve(
    worker_id: str,
    slot: int,
    beat: Beat,
    queue_names: list[str],
    interval: float,
    backend_name: str,
    max_tasks: int | None,
    stopping: threading.Event,
) -> None:
    """One slot: django-tasks' worker loop, fairly claiming (``SupervisedWorker``), until ``stopping`` is set or it
    has run ``max_tasks``. Any database error outside a task (locked, dropped, restarting, or refused: a failed
    constraint, an internal error) is waited out and the loop started again (1, 2, 4 ... 30 s); any other error too,
    logged with its traceback -- a slot never ends unasked while the process keeps running with fewer."""
    backoff, failed_at = 1.0, 0.0
    done = 0
    try:
        while not stopping.is_set():
            worker = SupervisedWorker(
                queue_names=queue_names,
                interval=interval,
                batch=False,
                backend_name=backend_name,
                startup_delay=False,
                max_tasks=None if max_tasks is None else max_tasks - done,
                worker_id=worker_id,
                excluded_queue_names=[],
            )
            beat.workers[slot] = worker
            if stopping.is_set():
                worker.running = False  # told to stop while this slot was starting again
            try:
                worker.run()
                return  # max_tasks reached, or told to stop
            except Exception as exc:
                done += worker._run_tasks
                if time.monotonic() - failed_at > 60:  # a new outage starts waiting from a second again
                    backoff = 1.0
                failed_at = time.monotonic()
                if isinstance(exc, DatabaseError):
                    logger.warning(
                        "database unavailable to worker slot %d (%s); polling again in %.0f s", slot, exc, backoff
                    )
                else:
                    logger.exception("worker slot %d failed; polling again in %.0f s", slot, backoff)
                connections.close_all()
                stopping.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
                close_old_connections()
    finally:
        beat.workers.pop(slot, None)
        connections.close_all()  # this slot's thread's connections
