"""A study made from a study file (docs/interfaces.md#study-file): checked whole, imported in one transaction or,
when large, in short steps (from the browser: by a background job, ``annotation/uploads.py``) into a study no rater
or page opens until it is published at the end; a stopped background import goes on after the items it wrote."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from annotation import jobs, study_settings, uploads
from annotation.errors import ServiceError
from annotation.exchange import study_files
from annotation.exchange.rules import FormatError, Problem
from annotation.models import (
    Generation,
    Item,
    Job,
    Study,
    System,
    Upload,
    text_hash,
    word_count,
)
from annotation.plan import planning


def do_create_study(
    owner: User,
    name: str,
    data: bytes,
    filename: str | None,
    description: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> Study:
    """Create a study from a study file (docs/interfaces.md#study-file) here and now (the command line, scripts).
    All or nothing: a bad file raises ``FormatError`` listing every problem and leaves the database untouched. Up to
    ``SEPLAB_IMPORT_STEP`` items it is one transaction; a larger file is imported by ``_import_staged`` (short
    transactions, published at the end, removed again if a step fails)."""
    name = check_study_name(owner, name)
    parsed = _parse(data, filename)
    if uploads.in_one_step(len(parsed.items)):
        with transaction.atomic():
            study = _new_study(owner, name, description)
            fewer = _import_at_once(study, parsed)
    else:
        study = _new_study(owner, name, description)
        try:
            fewer = _import_staged(study, parsed, progress)
        except BaseException:
            study.delete()  # nothing of a failed import stays
            raise
    study.import_warnings = parsed.warnings + ([fewer] if fewer else [])  # for the page and the command; not stored
    return study


def do_start_study_import(
    owner: User, name: str, data: bytes, filename: str | None, description: str = ""
) -> tuple[Study, Job | None]:
    """The browser's import: the file is checked whole in the request (every problem listed, nothing saved); a file
    of up to ``SEPLAB_IMPORT_STEP`` items is imported at once, a larger one by a background job with progress
    (returned; None otherwise), into a study raters cannot see until it is published."""
    name = check_study_name(owner, name)
    parsed = _parse(data, filename)
    with transaction.atomic():
        study = _new_study(owner, name, description)
        fewer, job = uploads.do_import_or_stage(
            study, Upload.Kind.STUDY, data, filename, len(parsed.items), lambda: _import_at_once(study, parsed)
        )
    study.import_warnings = parsed.warnings + ([fewer] if fewer else [])
    return study, job


def check_study_name(owner: User, name: str) -> str:
    """The one check of a new study's name (an import, a duplicate): not empty, not one of the owner's studies
    already. Returns it stripped; ``FormatError`` on the field "name" otherwise."""
    name = name.strip()
    if not name:
        raise FormatError([Problem(None, "name", "a study needs a name")])
    if Study.objects.filter(owner=owner, name=name).exists():
        raise FormatError([Problem(None, "name", f"you already have a study named '{name}'; choose another name")])
    return name


def _parse(data: bytes, filename: str | None) -> study_files.ParsedStudy:
    return study_files.parse_study(
        data, filename, max_bytes=settings.SEPLAB_MAX_IMPORT_BYTES, max_text_chars=settings.SEPLAB_MAX_TEXT_CHARS
    )


@transaction.atomic
def _new_study(owner: User, name: str, description: str) -> Study:
    """A new study without items yet, importing: raters cannot see it until it is published."""
    study = Study.objects.create(owner=owner, name=name, description=description, status=Study.Status.IMPORTING)
    study_settings.do_create_defaults(study)
    return study


def _import_at_once(study: Study, parsed: study_files.ParsedStudy) -> Problem | None:
    """A small file into its new study, in the caller's transaction, then published; the warning of
    ``planning.do_limit_system_pairs``, if any."""
    _insert_items(study, parsed, 0, len(parsed.items))
    fewer = planning.do_limit_system_pairs(study)
    planning.do_rebuild_plan(study)
    _publish(study)
    return fewer


def _publish(study: Study) -> None:
    Study.objects.filter(pk=study.pk).update(status=Study.Status.ACTIVE)
    study.status = Study.Status.ACTIVE


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
            messages=p.messages,
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


def _import_staged(
    study: Study,
    parsed: study_files.ParsedStudy,
    progress: Callable[[int, int], None] | None = None,
    upload: Upload | None = None,
) -> Problem | None:
    """Import a large file into ``study`` (status importing: invisible to raters) in steps of ``SEPLAB_IMPORT_STEP``
    items or tasks, each its own transaction, so no step holds the database for long; the last step makes it
    active (and removes ``upload``, the staged file, in the same transaction). A study that has items already -- a
    run of the same file that stopped -- goes on after them; the plan is made afresh. ``progress(done, total)`` is
    told after every step. Returns the warning of ``planning.do_limit_system_pairs``, if any."""
    step = settings.SEPLAB_IMPORT_STEP
    n_items = len(parsed.items)
    first = _items_present(study, parsed)
    item_steps = range(first, n_items, step)
    total = len(range(0, n_items, step)) * 2 + 1  # item steps, about as many plan steps, and the publication
    done = len(range(0, first, step))
    fewer = None
    for start in item_steps:
        with transaction.atomic():
            _insert_items(study, parsed, start, min(start + step, n_items))
            if start == 0:
                fewer = planning.do_limit_system_pairs(study)
        done += 1
        if progress:
            progress(done, total)
    with transaction.atomic():
        releases, rng = planning.do_plan_releases(study)
    position = 0
    for start in range(0, len(releases), step):
        with transaction.atomic():
            _, position = planning.do_release_chunk(study, releases[start : start + step], rng, position)
        done = min(done + 1, total - 1)
        if progress:
            progress(done, total)
    with transaction.atomic():
        _publish(study)
        if upload is not None:
            upload.delete()
    if progress:
        progress(total, total)
    return fewer


def _items_present(study: Study, parsed: study_files.ParsedStudy) -> int:
    """How many of the file's items the study has already (a stopped run's steps), checked to be the file's first
    ones in its order; ``ServiceError`` when they are not."""
    present = list(study.items.order_by("position").values_list("external_id", flat=True))
    if present != [item.external_id for item in parsed.items[: len(present)]]:
        raise ServiceError(
            "The unfinished study's items are not the first items of its file, so its import cannot go on; "
            "delete the study and import the file again."
        )
    return len(present)


def do_import_upload(upload: Upload, progress: Callable[[int, int], None]) -> str:
    """A staged study file's import (``uploads.upload_job``), in steps, after the items a stopped run already wrote;
    a failed one leaves an unpublished study (and its file) the researcher can resume or delete."""
    parsed = _parse(bytes(upload.data), upload.filename or None)
    try:
        _import_staged(upload.study, parsed, progress, upload)
    except ServiceError as exc:
        raise jobs.JobFailed(str(exc)) from exc
    return f"Imported {len(parsed.items):,} items."
