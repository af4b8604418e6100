"""Files that come into a study -- a study file (``annotation/studies/creation.py``) or a judgments file
(``annotation/rating/imports.py``) -- imported in the request when small, else staged and imported by a background
job in short steps.

One number decides both, ``SEPLAB_IMPORT_STEP``: a file of at most that many records (a study file's items, a
judgments file's lines) is imported in one transaction; a larger one in steps of that many, each its own short
transaction, so no request holds the database's write lock for long. The file is parsed once in the request, and
checked whole there (every problem listed, nothing saved); ``do_import_or_stage`` then imports what was parsed, or
stages the bytes as an ``Upload`` and queues its job. ``upload_job`` is the one body of both kinds of import job
("import" and "judgments"); it finds each kind's importer by dotted path (``IMPORTERS``), the way
``annotation/jobs.py`` finds job bodies, so this ground-floor module imports no wing.

A file is all or nothing whenever the worker stops (``kill -9``, a crash, the database away): nothing of it is seen
before it is published -- a study file's study is "importing", which raters and the study page do not open; a
judgments file's lines are staged apart from the judgments -- and the upload stays until then. A stopped import's
job is failed (by ``run_job``, or by the worker's stale-job sweep); the study page then offers ``do_resume_upload``,
which goes on after what was written, or discarding it (``do_discard_upload``, or deleting the unfinished study) --
for as long as the file waits, whatever other imports ran and finished since (``stopped_uploads``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

from annotation import jobs
from annotation.errors import ServiceError
from annotation.models import Job, Study, Upload

Result = TypeVar("Result")

# Per kind of file: its job's kind (the names jobs queued before the two shared one body still carry), what its
# records are, and its importer ``do_import_upload(upload, progress) -> str``, the job's summary.
# Keyed by ``Upload.Kind`` (a str, as an upload's ``kind`` reads back from the database).
JOB_KINDS: dict[str, str] = {
    Upload.Kind.STUDY: "import",
    Upload.Kind.JUDGMENTS: "judgments",
    Upload.Kind.RANKINGS: "rankings",
}
RECORDS: dict[str, str] = {
    Upload.Kind.STUDY: "items",
    Upload.Kind.JUDGMENTS: "judgments",
    Upload.Kind.RANKINGS: "rankings",
}
IMPORTERS: dict[str, str] = {
    Upload.Kind.STUDY: "annotation.studies.creation.do_import_upload",
    Upload.Kind.JUDGMENTS: "annotation.rating.imports.do_import_upload",
    # a rankings file: checked again and imported in one transaction (annotation/rating/rankings.py)
    Upload.Kind.RANKINGS: "annotation.rating.rankings.do_import_upload",
}


def in_one_step(records: int) -> bool:
    """Whether a file of ``records`` items or judgment lines is imported in one transaction."""
    return records <= settings.SEPLAB_IMPORT_STEP


def do_import_or_stage(
    study: Study,
    kind: str,
    data: bytes,
    filename: str | None,
    records: int,
    import_now: Callable[[], Result],
    rows: int | None = None,
) -> tuple[Result | None, Job | None]:
    """The browser's import of a file already parsed and checked whole: one whose ``rows`` (the rows it writes; its
    ``records`` when not given -- a rankings file writes each answer's implied judgments) are at most
    ``SEPLAB_IMPORT_STEP`` is imported now by ``import_now`` (what was parsed, in this transaction) and gives (its
    result, None); a larger one's bytes are staged with ``study`` and a job of its kind queued to import them: (None,
    the job). One transaction either way, so a failure leaves nothing."""
    with transaction.atomic():
        if in_one_step(records if rows is None else rows):
            return import_now(), None
        upload = Upload.objects.create(study=study, kind=kind, filename=filename or "", data=data, records=records)
        job = _start(upload, f"Importing {records:,} {RECORDS[kind]}")
    return None, job


def _start(upload: Upload, message: str) -> Job:
    return jobs.start(
        upload.study, JOB_KINDS[upload.kind], total=upload.records, params={"upload": upload.pk}, message=message
    )


def upload_job(job: Job, progress: jobs.Progress) -> str:
    """The background import of a staged file, whichever its kind: its kind's importer, which goes on after what a
    stopped run of the same file already wrote (a study's items, a judgments file's staged lines), publishes the
    file and removes it in one transaction."""
    upload = Upload.objects.filter(pk=job.params["upload"]).select_related("study").first()
    if upload is None:
        raise jobs.JobFailed("The file is no longer here: it was imported or discarded already.")
    return import_string(IMPORTERS[upload.kind])(upload, progress)


def _running(upload: Upload) -> bool:
    return Job.objects.filter(
        study_id=upload.study_id,
        kind=JOB_KINDS[upload.kind],
        params__upload=upload.pk,
        status__in=(Job.Status.QUEUED, Job.Status.RUNNING),
    ).exists()


def stopped_uploads(study: Study, kind: str) -> list[Upload]:
    """The study's files of ``kind`` whose import stopped before it was published -- its worker killed or crashed,
    the database away, a step that failed -- and that no job is importing now, newest first: the study page offers
    to resume or discard each, whatever became of the imports after it, until one is done. Their bytes are not
    read."""
    return [u for u in study.uploads.filter(kind=kind).defer("data").order_by("-created") if not _running(u)]


def stopped_upload(study: Study, kind: str) -> Upload | None:
    """The newest of ``stopped_uploads`` (a study file's study has one), or None."""
    return next(iter(stopped_uploads(study, kind)), None)


def do_resume_upload(study: Study, upload_id: int) -> Job:
    """Import a stopped file again, from where it stopped (what was written of it is kept and not written twice).
    ``ServiceError`` when it is gone or still being imported."""
    with transaction.atomic():
        upload = _locked(study, upload_id)
        return _start(upload, f"Resuming the import of {upload.records:,} {RECORDS[upload.kind]}")


def do_discard_upload(study: Study, upload_id: int) -> None:
    """Forget a stopped judgments or rankings file and every line staged of it (none of them is a judgment). A study
    file's unfinished study is deleted as a whole instead (the study's delete page)."""
    with transaction.atomic():
        upload = _locked(study, upload_id)
        if upload.kind == Upload.Kind.STUDY:
            raise ServiceError("An unfinished study is discarded by deleting the study.")
        upload.delete()


def _locked(study: Study, upload_id: int) -> Upload:
    upload = Upload.objects.select_for_update().defer("data").filter(study=study, pk=upload_id).first()
    if upload is None:
        raise ServiceError("This file is no longer waiting: it was imported or discarded already.")
    if _running(upload):
        raise ServiceError("This file is being imported right now; wait for the import to end.")
    return upload
