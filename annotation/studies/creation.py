"""A study made from a study file (docs/interfaces.md#study-file): checked whole, imported in one transaction or,
when large, in short steps by a background job, published at the end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from annotation import jobs, study_settings
from annotation.exchange import study_files
from annotation.exchange.rules import FormatError, Problem
from annotation.models import (
    Generation,
    Item,
    Job,
    Study,
    StudyUpload,
    System,
    text_hash,
    word_count,
)
from annotation.plan import planning

# A study file with more items than this is imported in steps, each its own short transaction, into a study
# raters cannot see until the last step publishes it (from the browser: a background job with progress).
IMPORT_CHUNK = 2000


def do_create_study(
    owner: AbstractBaseUser,
    name: str,
    data: bytes,
    filename: str | None,
    description: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> Study:
    """Create a study from a study file (docs/interfaces.md#study-file). All or nothing: a bad file raises
    ``FormatError`` listing every problem and leaves the database untouched. Up to ``IMPORT_CHUNK`` items it is one
    transaction; a larger file is imported by ``import_staged`` (short transactions, published at the end, removed
    again if a step fails)."""
    name = check_study_name(owner, name)
    parsed = study_files.parse_study(data, filename, max_bytes=settings.SEPLAB_MAX_IMPORT_BYTES)
    fewer = None
    if len(parsed.items) <= IMPORT_CHUNK:
        with transaction.atomic():
            study = _new_study(owner, name, description, Study.Status.ACTIVE)
            _insert_items(study, parsed, 0, len(parsed.items))
            fewer = planning.fewer_system_pairs(study)
            planning.do_rebuild_plan(study)
    else:
        study = _new_study(owner, name, description, Study.Status.IMPORTING)
        try:
            import_staged(study, parsed, progress)
        except BaseException:
            study.delete()  # nothing of a failed import stays
            raise
    study.import_warnings = parsed.warnings + ([fewer] if fewer else [])  # for the page and the command; not stored
    return study


def do_start_study_import(
    owner: AbstractBaseUser, name: str, data: bytes, filename: str | None, description: str = ""
) -> tuple[Study, Any]:
    """The browser's import: the file is checked whole in the request (every problem listed, nothing saved);
    a file of up to ``IMPORT_CHUNK`` items is imported at once, a larger one by a background job with
    progress (returned; None otherwise), into a study raters cannot see until it is published."""
    name = check_study_name(owner, name)
    parsed = study_files.parse_study(data, filename, max_bytes=settings.SEPLAB_MAX_IMPORT_BYTES)
    if len(parsed.items) <= IMPORT_CHUNK:
        return do_create_study(owner, name, data, filename, description), None
    with transaction.atomic():
        study = _new_study(owner, name, description, Study.Status.IMPORTING)
        StudyUpload.objects.create(study=study, filename=filename or "", data=data)
        job = jobs.start(study, "import", total=1, message=f"Importing {len(parsed.items)} items")
    study.import_warnings = parsed.warnings
    return study, job


def check_study_name(owner: AbstractBaseUser, name: str) -> str:
    """The one check of a new study's name (an import, a duplicate): not empty, not one of the owner's studies
    already. Returns it stripped; ``FormatError`` on the field "name" otherwise."""
    name = name.strip()
    if not name:
        raise FormatError([Problem(None, "name", "a study needs a name")])
    if Study.objects.filter(owner=owner, name=name).exists():
        raise FormatError([Problem(None, "name", f"you already have a study named '{name}'; choose another name")])
    return name


@transaction.atomic
def _new_study(owner: AbstractBaseUser, name: str, description: str, status: str) -> Study:
    study = Study.objects.create(owner=owner, name=name, description=description, status=status)
    study_settings.create_for(study)
    return study


def _insert_items(study: Study, parsed: study_files.ParsedStudy, start: int, stop: int) -> None:
    """Items ``start``..``stop`` of the file, with their outputs (and the study's systems on first use)."""
    systems = {s.name: s for s in study.systems.all()}
    for name in parsed.systems:
        if name not in systems:
            systems[name] = System.objects.create(study=study, name=name)
    chunk = parsed.items[start:stop]
    items = Item.objects.bulk_create(
        Item(
            study=study,
            external_id=p.external_id,
            input=p.input,
            reference=p.reference,
            metadata=p.metadata,
            position=start + i,
        )
        for i, p in enumerate(chunk)
    )
    Generation.objects.bulk_create(
        (
            Generation(
                item=item,
                system=systems[name],
                sample_index=k,
                text=text,
                text_hash=text_hash(text),
                n_words=word_count(text),
            )
            for item, p in zip(items, chunk, strict=True)
            for name, samples in p.outputs.items()
            for k, text in enumerate(samples)
        ),
        batch_size=5000,
    )


def import_staged(
    study: Study, parsed: study_files.ParsedStudy, progress: Callable[[int, int], None] | None = None
) -> Study:
    """Import a large file into ``study`` (status importing: invisible to raters) in steps of ``IMPORT_CHUNK``
    items or tasks, each its own transaction, so no step holds the database for long; the last step makes
    it active. ``progress(done, total)`` is told after every step."""
    n_items = len(parsed.items)
    item_steps = range(0, n_items, IMPORT_CHUNK)
    total = len(item_steps) * 2 + 1  # item steps, about as many plan steps, and the publication
    done = 0
    for start in item_steps:
        with transaction.atomic():
            _insert_items(study, parsed, start, min(start + IMPORT_CHUNK, n_items))
            if start == 0:
                planning.fewer_system_pairs(study)
        done += 1
        if progress:
            progress(done, total)
    with transaction.atomic():
        releases, rng = planning.plan_releases(study)
    position = 0
    for start in range(0, len(releases), IMPORT_CHUNK):
        with transaction.atomic():
            _, position = planning.release_chunk(study, releases[start : start + IMPORT_CHUNK], rng, position)
        done = min(done + 1, total - 1)
        if progress:
            progress(done, total)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.ACTIVE)
    study.status = Study.Status.ACTIVE
    if progress:
        progress(total, total)
    return study


def import_job(job: Job, progress: jobs.Progress) -> str:
    """The background import of a large study file (``do_start_study_import``); a failed one leaves an unpublished
    study the researcher can delete."""
    upload = StudyUpload.objects.get(study=job.study)
    parsed = study_files.parse_study(bytes(upload.data), upload.filename or None)
    import_staged(job.study, parsed, progress)
    StudyUpload.objects.filter(study=job.study).delete()
    return f"Imported {len(parsed.items)} items."
