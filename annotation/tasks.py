"""The background import of a large study file (django-tasks, run by ``python manage.py run_worker`` like the
other jobs), with its progress on the study page."""

from __future__ import annotations

import traceback

from django.conf import settings
from django.utils import timezone
from django_tasks import task

from annotation import formats, services
from annotation.models import Study, StudyUpload
from selection.models import Job

JOB_KIND = "import"


def start_study_import(study: Study, n_items: int) -> Job:
    job = Job.objects.create(study=study, kind=JOB_KIND, total=1, message=f"Importing {n_items} items")
    run_study_import.enqueue(job.pk)
    return job


@task()
def run_study_import(job_id: int) -> None:
    job = Job.objects.select_related("study").get(pk=job_id)
    Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING)

    def progress(done: int, total: int) -> None:
        Job.objects.filter(pk=job_id).update(done=done, total=total)

    try:
        upload = StudyUpload.objects.get(study=job.study)
        parsed = formats.parse_study(bytes(upload.data), upload.filename or None)
        services.import_staged(job.study, parsed, progress)
    except Exception as exc:  # the study page shows what went wrong; the unpublished study can be deleted
        Job.objects.filter(pk=job_id).update(status=Job.Status.FAILED, finished=timezone.now(),
                                             message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        raise
    StudyUpload.objects.filter(study=job.study).delete()
    Job.objects.filter(pk=job_id).update(status=Job.Status.DONE, finished=timezone.now(),
                                         message=f"Imported {len(parsed.items)} items.")


JUDGMENTS_KIND = "judgments"


def start_judgment_import(study: Study, upload, n_lines: int) -> Job:
    job = Job.objects.create(study=study, kind=JUDGMENTS_KIND, total=n_lines, params={"upload": upload.pk},
                             message=f"Importing {n_lines:,} judgments")
    run_judgment_import.enqueue(job.pk)
    return job


@task()
def run_judgment_import(job_id: int) -> None:
    """A large judgments file checked in the request, imported in short steps (all or nothing)."""
    from annotation.models import JudgmentUpload

    job = Job.objects.select_related("study").get(pk=job_id)
    Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING, heartbeat=timezone.now())

    def progress(done: int, total: int) -> None:
        Job.objects.filter(pk=job_id).update(done=done, total=total, heartbeat=timezone.now())

    upload = JudgmentUpload.objects.get(pk=job.params["upload"])
    try:
        summary = services.import_judgments_staged(job.study, bytes(upload.data), upload.filename or None, progress)
    except Exception as exc:  # nothing of the file stays; the study page says why
        Job.objects.filter(pk=job_id).update(status=Job.Status.FAILED, finished=timezone.now(),
                                             message=f"Nothing was imported: {type(exc).__name__}: {exc}")
        raise
    upload.delete()
    Job.objects.filter(pk=job_id).update(status=Job.Status.DONE, finished=timezone.now(),
                                         message=f"Imported {summary.created:,} judgments "
                                                 f"({summary.skipped:,} already present).")


PLAN_KIND = "plan"


def start_plan(study: Study) -> Job:
    job = Job.objects.create(study=study, kind=PLAN_KIND, total=2,
                             message="Building the plan: embedding the outputs first")
    run_plan.enqueue(job.pk)
    return job


@task()
def run_plan(job_id: int) -> None:
    """A study's plan, built by the worker: the outputs embedded (outside any transaction, cached: the slow part),
    then the plan rebuilt from the study's current settings in one short transaction. A newer plan job of the same
    study makes this one needless."""
    from selection import services as selection_services

    job = Job.objects.select_related("study").get(pk=job_id)
    study = job.study
    if Job.objects.filter(study=study, kind=PLAN_KIND, pk__gt=job_id).exists():
        Job.objects.filter(pk=job_id).update(status=Job.Status.DONE, finished=timezone.now(),
                                             message="A newer change of the settings builds the plan.")
        return
    Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING, heartbeat=timezone.now())

    def progress(done: int, total: int) -> None:
        Job.objects.filter(pk=job_id).update(done=done, total=total + 1, heartbeat=timezone.now())

    try:
        selection_services.embed_study(study, progress=progress)
        Job.objects.filter(pk=job_id).update(message="Building the plan: choosing the items")
        tasks = services.rebuild_plan(study)
    except Exception as exc:  # the study page says what went wrong; saving the settings again retries
        Job.objects.filter(pk=job_id).update(status=Job.Status.FAILED, finished=timezone.now(),
                                             message=f"The plan could not be built: {exc}")
        raise
    Job.objects.filter(pk=job_id).update(status=Job.Status.DONE, finished=timezone.now(), done=1, total=1,
                                         message=f"Plan built: {tasks} rating tasks.")


@task()
def run_judge(job_id: int) -> None:
    """One run of an LLM judge (``annotation.judge_runner``): progress, tokens and cost on the judges page."""
    from annotation import judge_runner
    from annotation.models import Judge

    job = Job.objects.get(pk=job_id)
    judge = Judge.objects.select_related("study", "rater").get(pk=job.params["judge"])
    Job.objects.filter(pk=job_id).update(status=Job.Status.RUNNING, heartbeat=timezone.now(),
                                         message=f"Judge {judge} is judging")

    def progress(done: int, total: int) -> None:
        Job.objects.filter(pk=job_id).update(done=done, total=total, heartbeat=timezone.now())

    def should_stop() -> bool:
        return Judge.objects.filter(pk=judge.pk, stop_requested=True).exists()

    try:
        result = judge_runner.run(judge, progress=progress, should_stop=should_stop)
    except Exception as exc:  # the judges page shows what went wrong; resuming retries what is missing
        message = judge_runner.redact(f"{type(exc).__name__}: {exc}", judge)
        Job.objects.filter(pk=job_id).update(status=Job.Status.FAILED, finished=timezone.now(), message=message)
        # the task's result row (django-tasks: the admin, the worker's log) gets the redacted words only, without
        # the original exception's traceback, which may quote an endpoint echoing the key
        raise judge_runner.JudgeError(message) from None
    used = judge_runner.usage(judge)
    summary = (f"{used.judged} judged, {used.unparseable} unparseable, {used.failed} failed after retries; "
               f"{used.tokens:,} tokens, ${used.cost}.")
    if result.stopped:
        status, summary = Job.Status.STOPPED, f"Stopped: {summary} Resume to go on."
    elif result.sliced:
        status = Job.Status.DONE
        summary = (f"Paused after {settings.SEPLAB_JUDGE_SLICE_SECONDS:.0f} s so that other jobs can run: {summary} "
                   "It goes on by itself in the next job.")
        judge_runner.continue_later(judge)
    elif result.budget_reached:
        status, summary = Job.Status.DONE, f"Request budget reached: {summary}"
    else:
        status = Job.Status.DONE
    Job.objects.filter(pk=job_id).update(status=status, finished=timezone.now(), message=summary,
                                         heartbeat=timezone.now())
