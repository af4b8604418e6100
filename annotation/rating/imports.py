"""Where an imported judgments file (docs/interfaces.md#judgment-format: JSONL or the CSV export layout) is written:
all or nothing, a line already present (same id, or same content for a line without one) skipped. A small file is
imported in one transaction; from the browser a larger one is checked in the request and imported by a background
job in short steps (``annotation/uploads.py``), its earlier steps deleted again when one fails. Every other judgment
is written by ``annotation/rating/recording.py``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from annotation import jobs, questions, uploads
from annotation.exchange import judgment_files
from annotation.models import Generation, Job, Judgment, Pair, Rater, Study, Upload

IMPORT_QUERY_CHUNK = 5000  # keys per lookup query: PostgreSQL takes at most 65,535 parameters a query
IMPORT_INSERT_BATCH = 1000  # judgments per INSERT: 1,000 x 18 columns, far below PostgreSQL's 65,535 parameters


@dataclasses.dataclass
class ImportSummary:
    created: int
    skipped: int


def study_samples(study: Study) -> dict[str, dict[str, int]]:
    """How many samples each item's systems have, by item id and system name: what a judgment line may name."""
    samples: dict[str, dict[str, int]] = {}
    rows = (
        Generation.objects.filter(item__study=study).values("item__external_id", "system__name").annotate(k=Count("id"))
    )
    for row in rows:
        samples.setdefault(row["item__external_id"], {})[row["system__name"]] = row["k"]
    return samples


def check_judgment_file(study: Study, data: bytes, filename: str | None) -> list[judgment_files.ParsedJudgment]:
    """The file's judgments, read against the study (its items, samples, raters' kinds and further questions);
    ``FormatError`` listing every problem by line and field otherwise."""
    return judgment_files.parse_judgments(
        data,
        filename,
        study_samples(study),
        rater_kinds=dict(study.raters.values_list("external_id", "kind")),
        questions={q.key: q.how for q in questions.further(study)},
        max_bytes=settings.SEPLAB_MAX_IMPORT_BYTES,
    )


def do_import_judgments(study: Study, data: bytes, filename: str | None) -> ImportSummary:
    """Import a judgments file into a study here and now, in one transaction whatever its size (the command line,
    scripts). All or nothing; judgments already present are skipped."""
    return _import_at_once(study, check_judgment_file(study, data, filename))


def do_start_judgment_import(
    study: Study, data: bytes, filename: str | None
) -> tuple[ImportSummary | None, Job | None]:
    """The browser's import: the file is checked whole in the request (every problem listed, nothing saved); up to
    ``SEPLAB_IMPORT_STEP`` lines are imported at once (summary, None), a larger file by a background job in short
    steps (None, the job), so no request holds the database's write lock for seconds."""
    parsed = check_judgment_file(study, data, filename)
    return uploads.do_import_or_stage(
        study, Upload.Kind.JUDGMENTS, data, filename, len(parsed), lambda: _import_at_once(study, parsed)
    )


@transaction.atomic
def _import_at_once(study: Study, parsed: list[judgment_files.ParsedJudgment]) -> ImportSummary:
    new = _new_judgments(study, parsed)
    Judgment.objects.bulk_create(new, batch_size=IMPORT_INSERT_BATCH)
    return ImportSummary(created=len(new), skipped=len(parsed) - len(new))


def do_import_judgments_staged(
    study: Study, parsed: list[judgment_files.ParsedJudgment], progress: Callable[[int, int], None] | None = None
) -> ImportSummary:
    """A large judgments file, imported in steps of ``SEPLAB_IMPORT_STEP`` judgments, each its own short
    transaction. All or nothing still: when a step fails, the judgments of the earlier steps are deleted again."""
    step = settings.SEPLAB_IMPORT_STEP
    with transaction.atomic():
        new = _new_judgments(study, parsed)  # the raters and output pairs it needs, created once
    done: list[str] = []
    try:
        for start in range(0, len(new), step):
            chunk = new[start : start + step]
            with transaction.atomic():
                Judgment.objects.bulk_create(chunk, batch_size=IMPORT_INSERT_BATCH)
            done += [j.idempotency_key for j in chunk]
            if progress:
                progress(min(start + step, len(new)), len(new))
    except BaseException:
        for start in range(0, len(done), IMPORT_QUERY_CHUNK):
            Judgment.objects.filter(study=study, idempotency_key__in=done[start : start + IMPORT_QUERY_CHUNK]).delete()
        raise
    return ImportSummary(created=len(new), skipped=len(parsed) - len(new))


def do_import_upload(study: Study, data: bytes, filename: str | None, progress: Callable[[int, int], None]) -> str:
    """A staged judgments file's import (``uploads.upload_job``), checked again against the study as it is now, in
    short steps, all or nothing."""
    try:
        summary = do_import_judgments_staged(study, check_judgment_file(study, data, filename), progress)
    except Exception as exc:  # nothing of the file stays; the study page says why
        raise jobs.JobFailed(f"Nothing was imported: {type(exc).__name__}: {exc}") from exc
    return f"Imported {summary.created:,} judgments ({summary.skipped:,} already present)."


def _new_judgments(study: Study, parsed: list[judgment_files.ParsedJudgment]) -> list[Judgment]:
    """The judgments of ``parsed`` the study does not have yet (unsaved), with the raters and output pairs they
    need created."""
    raters = {r.external_id: r for r in study.raters.all()}
    keys = [p.key for p in parsed]
    present: set[str] = set()
    for start in range(0, len(keys), IMPORT_QUERY_CHUNK):
        present.update(
            Judgment.objects.filter(
                study=study, idempotency_key__in=keys[start : start + IMPORT_QUERY_CHUNK]
            ).values_list("idempotency_key", flat=True)
        )
    items = {i.external_id: i for i in study.items.all()}
    generations = {
        (g.item_id, g.system.name, g.sample_index): g
        for g in Generation.objects.filter(item__study=study).select_related("system")
    }
    pairs = {(p.generation_a_id, p.generation_b_id): p for p in Pair.objects.filter(item__study=study)}
    now = timezone.now()
    new: list[Judgment] = []
    for p in parsed:
        if p.key in present:
            continue
        rater = raters.get(p.rater)
        if rater is None:
            rater = raters[p.rater] = Rater.objects.create(
                study=study, external_id=p.rater, kind=p.rater_kind, source=Rater.Source.IMPORT
            )
        item = items[p.item]
        ga = generations[(item.pk, p.system_a, p.sample_a)]
        gb = generations[(item.pk, p.system_b, p.sample_b)]
        pair = pairs.get((ga.pk, gb.pk))
        if pair is None:
            pair = pairs[(ga.pk, gb.pk)] = Pair.objects.create(item=item, generation_a=ga, generation_b=gb)
        new.append(
            Judgment(
                study=study,
                rater=rater,
                pair=pair,
                a_shown_first=p.shown_first == p.system_a,
                choice=p.choice,
                response_set=p.response_set,
                probability_a=p.probability_a,
                strength=p.strength,
                comment=p.comment,
                created=p.created or now,
                time_on_task_ms=p.time_on_task_ms,
                client_time_ms=p.client_time_ms,
                idempotency_key=p.key,
                superseded=p.superseded,
                revised=p.revised,
                extra=p.extra,
                answers=p.answers,
            )
        )
    return new
