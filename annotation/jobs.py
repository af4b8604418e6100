"""One room for background jobs: what a job is (``annotation.models.Job``), how one is started, and its lifecycle,
written once for every kind.

A kind's body lives with its domain and is found here by dotted path, the way healthchecks finds its integrations
(``TRANSPORTS``): ``KINDS`` holds annotation's own, and selection and analytics add theirs from their
``AppConfig.ready`` (``register``), so this module imports none of them. ``run_job`` -- the one task every job runs
as, on django-tasks (``manage.py run_worker``, supervised by ``annotation/worker.py``, or any other backend named
by SEPLAB_TASKS_BACKEND) -- writes RUNNING and the first heartbeat, hands the body a ``Progress`` (done / total,
a message, the heartbeat), and writes DONE with the body's summary or FAILED with the reason: the body's own words
when it raises ``JobFailed``, otherwise the exception and the last lines of its traceback. A failed job's exception
is raised again, so django-tasks' own record of the task fails too. Every job is created by ``start`` and ended by
``end`` -- the one writer of done, failed and stopped, whoever ends it: ``run_job``, the stale-job sweep of
``annotation/worker.py``, an endpoint run stopped before a worker took it or found dead when resumed
(``annotation/endpoint_runs.py``).

A database outage during a job -- SQLite's write lock held past its timeout, a PostgreSQL connection dropped by a
restart or a pooler (``is_outage``) -- is not the body's failure: ``run_job`` waits until the database answers again
(1, 2, 4 ... 30 s), then runs the body again from the start when its kind is ``restartable`` (it computes and
stores, or resumes where it stopped: reports, plans, judges, embeddings), and otherwise fails the job with words
that say what happened (an import, which must not run twice over its own half). Either way the job never stays
"running" with nobody running it.

No researcher can fill the queue: every kind has a ``Limit`` -- what counts as the same piece of work (a budget
plan's whole request, a report's population, a judge's endpoint), whether starting the same work again while it is
queued returns the queued job instead of a second one, and how many pieces of work one study may have queued or
running at once; one researcher may have at most ``SEPLAB_JOBS_PER_KIND`` of each kind across their studies. A start
beyond a limit is refused with ``JobLimit`` (a ``ServiceError`` the page shows). The check and the new job are one
transaction under the owner's row lock (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's IMMEDIATE transactions
already write one at a time), so simultaneous starts never pass a limit together. Which queued job runs next is the
worker's choice (``annotation/worker.py``): the researcher served least recently first, and never more than
``SEPLAB_JOBS_PER_RESEARCHER`` of one researcher's jobs at once.

A body is ``body(job, progress) -> str | Outcome``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import traceback

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import InterfaceError, OperationalError, connections, transaction
from django.utils import timezone
from django.utils.module_loading import import_string
from django_tasks import task

from annotation.errors import ServiceError
from annotation.models import Job, Study

logger = logging.getLogger("seplab.worker")

KINDS: dict[str, str] = {
    "import": "annotation.uploads.upload_job",  # both kinds of file import run the one staged-import body
    "judgments": "annotation.uploads.upload_job",
    "rankings": "annotation.uploads.upload_job",
    "plan": "annotation.plan.planning.plan_job",
    "judge": "annotation.judges.runner.judge_job",
    "generate": "annotation.generating.runner.generate_job",
    "crowd_pay": "annotation.crowd.payments.pay_job",
}


@dataclasses.dataclass(frozen=True)
class Limit:
    """How much of one kind of job a study and a researcher may have queued or running at once.

    ``key`` names the params that make two jobs the same piece of work (empty: one piece of work per study; None:
    every param, an identical request). ``coalesce`` says what starting the same work again returns instead of a
    second job: ``"queued"`` the queued one (a running one may have read what has changed since, so a new one
    is queued behind it), ``"active"`` the queued or running one (its result will be the same), ``""`` nothing
    (a job of the same work as a running one -- an endpoint run going on after its time slice -- is always
    admitted: it is no new work). ``per_study`` bounds the distinct pieces of work of one study; every researcher
    may have at most ``SEPLAB_JOBS_PER_KIND`` of each kind across their studies."""

    words: str  # the kind's jobs in the plural, for the refusal ("budget plans")
    key: tuple[str, ...] | None = ()
    coalesce: str = ""
    per_study: int | None = None

    def work(self, job_params: dict) -> tuple:
        params = job_params or {}
        if self.key is None:
            return tuple(sorted((k, repr(v)) for k, v in params.items()))
        return tuple(repr(params.get(k)) for k in self.key)


LIMITS: dict[str, Limit] = {
    # each file is its own work (its staged upload); how many a researcher may have importing at once is the cap
    "import": Limit("study imports", key=("upload",)),
    "judgments": Limit("judgment imports", key=("upload",)),
    "rankings": Limit("ranking imports", key=("upload",)),
    # a plan job builds from the settings it finds when it runs: a queued one already builds the newest
    "plan": Limit("plan builds", coalesce="queued", per_study=1),
    # one run per endpoint at a time is the run's own rule (endpoint_runs); a run going on after its slice is the
    # same work
    "judge": Limit("judge runs", key=("judge",)),
    "generate": Limit("generation runs", key=("endpoint",)),
    # a queued run sends every action of the study queued by the time it runs
    "crowd_pay": Limit("crowd payment runs", coalesce="queued", per_study=1),
}


class JobLimit(ServiceError):
    """A start refused because the study or the researcher already has as many jobs of the kind as they may."""


# a body that may run again from the start after a database outage
RESTARTABLE: set[str] = {"plan", "judge", "generate", "crowd_pay"}  # crowd_pay: a row half-sent is failed, never resent
OUTAGE_RETRIES = 5  # times a restartable body is run again after an outage cut it short, before the job fails
OUTAGE = (
    "The database could not be reached while this job ran (it was locked by another writer or its "
    "connection dropped){again}; nothing after its last progress was kept. Start it again (an unfinished "
    "import can be deleted from the study page)."
)


def register(kind: str, body: str, restartable: bool = False, limit: Limit | None = None) -> None:
    """Another app's kind of job, by the dotted path of its body; ``restartable`` when running the body again from
    the start is harmless (it recomputes, or resumes what is missing); ``limit`` what the kind may have queued (by
    default each job is its own work, capped per researcher only)."""
    if KINDS.get(kind, body) != body:
        raise ValueError(f"job kind {kind!r} is already {KINDS[kind]}")
    KINDS[kind] = body
    if restartable:
        RESTARTABLE.add(kind)
    if limit is not None:
        LIMITS[kind] = limit


LOCKED = ("database is locked", "database table is locked")  # SQLite's words for a held lock
DISCONNECTED = ("57P01", "57P02", "57P03")  # PostgreSQL: admin shutdown, crash shutdown, cannot connect now
OUTAGE_WAIT_MAX = 900.0  # seconds an outage is waited out before the job is left to the stale-job sweep


def is_outage(exc: BaseException) -> bool:
    """Whether an exception is the database being unreachable -- SQLite's lock held past its timeout, a PostgreSQL
    connection dropped or refused (SQLSTATE class 08, 57P01-03) -- rather than the job's own fault (a missing table,
    a statement timeout, a deadlock, a full disk), which fails the job with its own words."""
    if isinstance(exc, InterfaceError):
        return True  # the connection is closed
    if not isinstance(exc, OperationalError):
        return False
    text = str(exc).lower()
    if any(words in text for words in LOCKED):
        return True
    cause = exc.__cause__
    state = getattr(cause, "sqlstate", None) or ""
    return (
        state.startswith("08")
        or state in DISCONNECTED
        or (
            not state
            and any(
                words in text
                for words in (
                    "server closed the connection",
                    "connection is closed",
                    "terminating connection",
                    "could not connect",
                )
            )
        )
    )


def wait_for_database(job_id: int, exc: BaseException, backoff_max: float = 30.0) -> None:
    """Wait until the job's row can be written again (every connection of this thread closed first, so a dropped
    one is not reused), backing off from a second to ``backoff_max``; ``exc`` again after ``OUTAGE_WAIT_MAX`` (the
    job is then failed by the stale-job sweep) or at once inside a transaction, which waiting cannot save."""
    if any(connection.in_atomic_block for connection in connections.all(initialized_only=True)):
        raise exc
    backoff, deadline = 1.0, time.monotonic() + OUTAGE_WAIT_MAX
    while True:
        connections.close_all()
        try:
            Job.objects.filter(pk=job_id).update(heartbeat=timezone.now())
            return
        except (OperationalError, InterfaceError) as again:
            if not is_outage(again) or time.monotonic() > deadline:
                raise
            logger.warning("job %s waits for the database (%s); trying again in %.0f s", job_id, again, backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, backoff_max)


class JobFailed(Exception):
    """A body's own words for why it failed, shown on the page as they are (no traceback: it may quote what the
    researcher must not see, such as an endpoint echoing a key)."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    message: str
    status: str = Job.Status.DONE
    complete: bool = False  # the progress bar shows 1 of 1 (a job whose steps were not counted)


class Progress:
    """What a body reports while it runs; every call is also the job's heartbeat."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id

    def __call__(self, done: int, total: int) -> None:
        Job.objects.filter(pk=self.job_id).update(done=done, total=total, heartbeat=timezone.now())

    def say(self, message: str) -> None:
        Job.objects.filter(pk=self.job_id).update(message=message, heartbeat=timezone.now())


def enqueue(job: Job) -> Job:
    run_job.enqueue(job.pk)
    return job


def start(study: Study, kind: str, *, queue: bool = True, **fields) -> Job:
    """Record a job of a registered kind and queue it; the page polls its progress. Every job is created here,
    within its kind's ``Limit``: the same work already queued is returned instead of a second job (when the kind
    coalesces), and a start past a limit raises ``JobLimit`` with nothing created -- checked and created in one
    transaction under the owner's lock, so simultaneous starts never pass a limit together. One run in the
    foreground (``queue`` False: ``manage.py generate``) takes no worker and is not limited; it is left for the
    caller to run with ``run_job.call``: it is created running, with a heartbeat, so that should the caller die
    before its run begins the stale-job sweep fails it like any job whose worker vanished (a queued job no worker
    will ever take would wait for ever, and hold its endpoint's next run back)."""
    if kind not in KINDS:
        raise ValueError(f"unknown job kind {kind!r}")
    if not queue:
        fields = {"status": Job.Status.RUNNING, "heartbeat": timezone.now(), **fields}
        return Job.objects.create(study=study, kind=kind, **fields)
    with transaction.atomic():
        lock_owner(study.owner_id)
        same = _within_limit(study, kind, fields.get("params") or {})
        if same is not None:
            return same
        return enqueue(Job.objects.create(study=study, kind=kind, **fields))


def lock_owner(owner_id: int) -> None:
    """Hold the researcher's row until the caller's transaction ends, so one researcher's starts are checked one at a
    time (PostgreSQL; SQLite's IMMEDIATE transactions already hold the database's write lock)."""
    list(get_user_model()._default_manager.select_for_update().filter(pk=owner_id).values_list("pk", flat=True))


def _within_limit(study: Study, kind: str, params: dict) -> Job | None:
    """The queued (or running) job doing the same work, when the kind coalesces; None when a new job may be created;
    ``JobLimit`` when it may not. Under ``lock_owner``."""
    limit = LIMITS.get(kind, Limit(kind.replace("_", " ") + " jobs", key=None))
    work = limit.work(params)
    active = list(
        Job.objects.filter(
            study__owner_id=study.owner_id, kind=kind, status__in=(Job.Status.QUEUED, Job.Status.RUNNING)
        )
        .order_by("created", "id")
        .only("id", "study_id", "status", "params")
    )
    same = [job for job in active if job.study_id == study.pk and limit.work(job.params) == work]
    wanted = {"queued": (Job.Status.QUEUED,), "active": (Job.Status.QUEUED, Job.Status.RUNNING)}.get(limit.coalesce, ())
    for job in same:
        if job.status in wanted:
            return Job.objects.get(pk=job.pk)
    if any(job.status == Job.Status.QUEUED for job in same):
        raise JobLimit(
            f"{limit.words.capitalize()}: the same is already queued for this study; it runs when a worker is free."
        )
    if same:
        return None  # the same work as a running job: an endpoint run's next slice, a plan after a newer change
    of_study = {limit.work(job.params) for job in active if job.study_id == study.pk}
    if limit.per_study is not None and len(of_study) >= limit.per_study:
        raise JobLimit(
            f"{limit.words.capitalize()}: this study already has {len(of_study)} queued or running, as many as "
            f"one study may have at once; start this again when {'it has' if len(of_study) == 1 else 'one has'} "
            "finished."
        )
    of_owner = {(job.study_id, limit.work(job.params)) for job in active}
    cap = settings.SEPLAB_JOBS_PER_KIND
    if len(of_owner) >= cap:
        raise JobLimit(
            f"{limit.words.capitalize()}: you already have {len(of_owner)} queued or running across your studies, "
            f"as many as one researcher may have at once; start this again when one has finished."
        )
    return None


ENDED = (Job.Status.DONE, Job.Status.FAILED, Job.Status.STOPPED)


def end(selected, status: str, message: str, *, now=None, ended_too: bool = False, **fields) -> int:
    """The one place a job's end is written: done, failed with the reason, or stopped, with when it ended.
    ``selected`` is a queryset of the job (or jobs) to end, filtered as the caller found them -- ``run_job``'s own
    job, a queued job stopped before a worker took it, a running job whose worker stopped answering; ``fields``
    are any others to write with it (progress, heartbeat). Only a job still queued or running is ended, so two
    enders never both write (a stale-job sweep and a resume, a stop and a finishing run), unless ``ended_too``:
    ``run_job``'s own end, whose body did finish even if the sweep had given up on it first. Returns how many jobs
    were ended."""
    if status not in ENDED:
        raise ValueError(f"{status!r} is not how a job ends")
    if not ended_too:
        selected = selected.filter(status__in=(Job.Status.QUEUED, Job.Status.RUNNING))
    return selected.update(status=status, finished=now or timezone.now(), message=message, **fields)


@dataclasses.dataclass(frozen=True)
class Ending:
    """How a run ended: what ``end`` writes, and the exception django-tasks' own record fails with."""

    status: str
    message: str
    fields: dict = dataclasses.field(default_factory=dict)
    error: BaseException | None = None


@task()
def run_job(job_id: int) -> None:
    """Run a job's body once, and write how it ended. A database outage while the body runs is waited out and the
    body run again when its kind is restartable (at most ``OUTAGE_RETRIES`` times); an outage while the end is
    written is waited out and only the writing done again, so a body that finished never runs twice."""
    cut_short = 0
    while True:
        try:
            ending = _run_body(job_id)
            if ending is None:
                return  # ended before it ran (stopped, or failed by the stale-job sweep): kept as it is
            break
        except Exception as exc:
            if not is_outage(exc):
                raise
            cut_short += 1
            wait_for_database(job_id, exc)
            job = Job.objects.get(pk=job_id)
            if job.status not in (Job.Status.QUEUED, Job.Status.RUNNING):
                return  # ended meanwhile (the stale-job sweep, a stop): nothing to run or write
            detail = f"{type(exc).__name__}: {exc}"
            if job.kind in RESTARTABLE and cut_short <= OUTAGE_RETRIES:
                logger.warning(
                    "job %s (%s) was cut short by a database outage (%s); running it again", job_id, job.kind, detail
                )
                continue
            again = f", {cut_short} times" if cut_short > 1 else ""
            message = OUTAGE.format(again=again) + f" ({detail})"
            ending = Ending(Job.Status.FAILED, message, error=JobFailed(message))
            break
    while True:
        try:
            now = timezone.now()
            # written whatever the job's status now: the body ran to this end even if the stale-job sweep, not
            # hearing from it in time, had marked the job failed meanwhile
            end(
                Job.objects.filter(pk=job_id),
                ending.status,
                ending.message,
                now=now,
                heartbeat=now,
                ended_too=True,
                **ending.fields,
            )
            break
        except Exception as exc:
            if not is_outage(exc):
                raise
            wait_for_database(job_id, exc)
    if ending.error is not None:
        raise ending.error


def _run_body(job_id: int) -> Ending | None:
    """The body's run and how it ended (None: the job had ended before it ran); a database outage is raised for
    ``run_job`` to wait out."""
    job = Job.objects.select_related("study").get(pk=job_id)
    if not Job.objects.filter(pk=job_id, status__in=(Job.Status.QUEUED, Job.Status.RUNNING)).update(
        status=Job.Status.RUNNING, heartbeat=timezone.now()
    ):
        return None
    try:
        body = import_string(KINDS[job.kind])  # an unknown kind fails the job, never leaves it queued
        outcome = body(job, Progress(job_id))
    except Exception as exc:
        if is_outage(exc):
            raise  # run_job waits it out
        if isinstance(exc, JobFailed):
            return Ending(Job.Status.FAILED, str(exc), error=exc)
        # the page shows what went wrong instead of waiting forever
        return Ending(Job.Status.FAILED, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}", error=exc)
    outcome = Outcome(outcome) if isinstance(outcome, str) else outcome
    return Ending(outcome.status, outcome.message, {"done": 1, "total": 1} if outcome.complete else {})
