"""The report's background refresh (django-tasks, run by ``python manage.py run_worker`` like the other jobs)."""

from __future__ import annotations

import traceback

from django.utils import timezone
from django_tasks import task

from analytics import populations, stored
from selection.models import Job


@task()
def run_report(job_id: int) -> None:
    job = Job.objects.select_related("study").get(pk=job_id)
    Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING)
    try:
        population = populations.parse(job.params["query"])  # checked against the study when it was queued
        result = stored.refresh(job.study, population)
    except Exception as exc:  # the page shows what went wrong instead of waiting forever
        Job.objects.filter(pk=job_id).update(status=Job.Status.FAILED, finished=timezone.now(),
                                             message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        raise
    Job.objects.filter(pk=job_id).update(status=Job.Status.DONE, finished=timezone.now(), done=1, total=1,
                                         message=f"Report computed in {result.seconds:.1f} s.")
    # a refresh runs after every change of the data: keep only the latest finished one per population
    (Job.objects.filter(study=job.study, kind=stored.JOB_KIND, params__key=job.params["key"],
                        status__in=(Job.Status.DONE, Job.Status.FAILED)).exclude(pk=job_id).delete())
