"""One room for background jobs: what a job is (``annotation.models.Job``), how one is started, and its lifecycle,
written once for every kind.

A kind's body lives with its domain and is found here by dotted path, the way healthchecks finds its integrations
(``TRANSPORTS``): ``KINDS`` holds annotation's own, and selection and analytics add theirs from their
``AppConfig.ready`` (``register``), so this module imports none of them. ``run_job`` -- the one task every job runs
as, on django-tasks (``manage.py run_worker``, supervised by ``annotation/worker.py``, or any other backend named
by SEPLAB_TASKS_BACKEND) -- writes RUNNING and the first heartbeat, hands the body a ``Progress`` (done / total,
a message, the heartbeat), and writes DONE with the body's summary or FAILED with the reason: the body's own words
when it raises ``JobFailed``, otherwise the exception and the last lines of its traceback. A failed job's exception
is raised again, so django-tasks' own record of the task fails too.

A body is ``body(job, progress) -> str | Outcome``.
"""

from __future__ import annotations

import dataclasses
import traceback

from django.utils import timezone
from django.utils.module_loading import import_string
from django_tasks import task

from annotation.models import Job

KINDS: dict[str, str] = {
    "import": "annotation.studies.creation.import_job",
    "judgments": "annotation.rating.recording.judgment_import_job",
    "plan": "annotation.plan.planning.plan_job",
    "judge": "annotation.judges.runner.judge_job",
}


def register(kind: str, body: str) -> None:
    """Another app's kind of job, by the dotted path of its body."""
    if KINDS.get(kind, body) != body:
        raise ValueError(f"job kind {kind!r} is already {KINDS[kind]}")
    KINDS[kind] = body


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


def start(study, kind: str, **fields) -> Job:
    """Record a job of a registered kind and queue it; the page polls its progress."""
    if kind not in KINDS:
        raise ValueError(f"unknown job kind {kind!r}")
    return enqueue(Job.objects.create(study=study, kind=kind, **fields))


@task()
def run_job(job_id: int) -> None:
    job = Job.objects.select_related("study").get(pk=job_id)
    Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING, heartbeat=timezone.now())
    try:
        body = import_string(KINDS[job.kind])  # an unknown kind fails the job, never leaves it queued
        outcome = body(job, Progress(job_id))
    except JobFailed as exc:
        _finish(job_id, Job.Status.FAILED, str(exc))
        raise
    except Exception as exc:  # the page shows what went wrong instead of waiting forever
        _finish(job_id, Job.Status.FAILED, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        raise
    outcome = Outcome(outcome) if isinstance(outcome, str) else outcome
    _finish(job_id, outcome.status, outcome.message, **({"done": 1, "total": 1} if outcome.complete else {}))


def _finish(job_id: int, status: str, message: str, **fields) -> None:
    now = timezone.now()
    Job.objects.filter(pk=job_id).update(status=status, finished=now, heartbeat=now, message=message, **fields)
