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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

from annotation import jobs
from annotation.models import Job, Study, Upload

Result = TypeVar("Result")

# Per kind of file: its job's kind (the names jobs queued before the two shared one body still carry), what its
# records are, and its importer ``do_import_upload(study, data, filename, progress) -> str``, the job's summary.
# Keyed by ``Upload.Kind`` (a str, as an upload's ``kind`` reads back from the database).
JOB_KINDS: dict[str, str] = {Upload.Kind.STUDY: "import", Upload.Kind.JUDGMENTS: "judgments"}
RECORDS: dict[str, str] = {Upload.Kind.STUDY: "items", Upload.Kind.JUDGMENTS: "judgments"}
IMPORTERS: dict[str, str] = {
    Upload.Kind.STUDY: "annotation.studies.creation.do_import_upload",
    Upload.Kind.JUDGMENTS: "annotation.rating.imports.do_import_upload",
}


def in_one_step(records: int) -> bool:
    """Whether a file of ``records`` items or judgment lines is imported in one transaction."""
    return records <= settings.SEPLAB_IMPORT_STEP


def do_import_or_stage(
    study: Study, kind: str, data: bytes, filename: str | None, records: int, import_now: Callable[[], Result]
) -> tuple[Result | None, Job | None]:
    """The browser's import of a file already parsed and checked whole: one of ``records`` records at most
    ``SEPLAB_IMPORT_STEP`` is imported now by ``import_now`` (what was parsed, in this transaction) and gives
    (its result, None); a larger one's bytes are staged with ``study`` and a job of its kind queued to import them in
    steps: (None, the job). One transaction either way, so a failure leaves nothing."""
    with transaction.atomic():
        if in_one_step(records):
            return import_now(), None
        upload = Upload.objects.create(study=study, kind=kind, filename=filename or "", data=data)
        job = jobs.start(
            study,
            JOB_KINDS[kind],
            total=records,
            params={"upload": upload.pk},
            message=f"Importing {records:,} {RECORDS[kind]}",
        )
    return None, job


def upload_job(job: Job, progress: jobs.Progress) -> str:
    """The background import of a staged file, whichever its kind: its kind's importer, then the file is removed. A
    failed import keeps it (and a study file's unpublished study, which the researcher can delete)."""
    upload = Upload.objects.get(pk=job.params["upload"])
    importer = import_string(IMPORTERS[upload.kind])
    summary = importer(job.study, bytes(upload.data), upload.filename or None, progress)
    upload.delete()
    return summary
