"""Background work. Runs on django-tasks: the database backend by default (`python manage.py
run_worker`, started by `make run`), or any other django-tasks backend named by SEPLAB_TASKS_BACKEND
(a Redis-backed queue such as django-tasks-rq for scale-out)."""

from __future__ import annotations

import traceback

from django.utils import timezone
from django_tasks import task

from selection import services
from selection.models import Job


def start_separability_job(study, metric: str) -> Job:
    """Record the job and queue it; the researcher's page polls its progress."""
    services.parse_metric(metric)  # a bad metric is the caller's error, before anything is queued
    job = Job.objects.create(study=study, kind="separability", params={"metric": metric})
    run_separability.enqueue(job.pk)
    return job


def start_embedding_job(study) -> Job:
    job = Job.objects.create(study=study, kind="embed", message="Embedding the outputs")
    run_embedding.enqueue(job.pk)
    return job


def _progress(job_id: int):
    def progress(done: int, total: int) -> None:
        Job.objects.filter(pk=job_id).update(done=done, total=total)

    return progress


def _fail(job_id: int, exc: Exception) -> None:
    Job.objects.filter(pk=job_id).update(status=Job.Status.FAILED, finished=timezone.now(),
                                         message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")


@task()
def run_embedding(job_id: int) -> None:
    job = Job.objects.select_related("study").get(pk=job_id)
    Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING)
    try:
        total = services.embed_study(job.study, progress=_progress(job_id))
    except Exception as exc:  # the job shows what went wrong instead of spinning forever
        _fail(job_id, exc)
        raise
    Job.objects.filter(pk=job_id).update(status=Job.Status.DONE, finished=timezone.now(),
                                         message=f"All {total} distinct outputs are embedded.")


@task()
def run_separability(job_id: int) -> None:
    job = Job.objects.select_related("study").get(pk=job_id)
    job.status = Job.Status.RUNNING
    job.message = "Embedding the outputs" if job.params["metric"].startswith("cosine") else "Computing similarities"
    job.save(update_fields=["status", "message"])

    try:
        runs = services.compute_separability(job.study, job.params["metric"], progress=_progress(job_id))
    except Exception as exc:  # the job shows what went wrong instead of spinning forever
        _fail(job_id, exc)
        raise
    Job.objects.filter(pk=job_id).update(status=Job.Status.DONE, finished=timezone.now(),
                                         message=f"Separability computed for {len(runs)} system pair(s).")
