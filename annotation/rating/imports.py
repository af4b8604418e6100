"""Where an imported judgments file (docs/interfaces.md#judgment-format: JSONL or the CSV export layout) is written:
all or nothing, a line already present (same id, or same content for a line without one) skipped. A small file is
imported in one transaction; from the browser a larger one is checked in the request and imported by a background
job (``annotation/uploads.py``): its lines are staged in short steps (``StagedJudgment``, which nothing reads as a
judgment) and published in one transaction at the end, so a report, an export or the plan never counts part of a
file, whenever the worker stops; a stopped import resumes after the lines already staged, or is discarded. Every
other judgment is written by ``annotation/rating/recording.py``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from annotation import jobs, questions, uploads
from annotation.exchange import judgment_files
from annotation.exchange.rules import FormatError
from annotation.models import Generation, Job, Judgment, Pair, Rater, StagedJudgment, Study, Upload

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
        implied=set(
            Judgment.objects.filter(study=study, ranking__isnull=False).values_list("idempotency_key", flat=True)
        ),
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


def do_import_upload(upload: Upload, progress: Callable[[int, int], None]) -> str:
    """A staged judgments file's import (``uploads.upload_job``): checked again against the study as it is now, its
    lines staged in short steps after those a crashed run already staged, then published in one transaction (the
    upload removed with it). A file that no longer fits the study is removed with what was staged of it; any other
    failure keeps both, so the study page can resume the import or discard it. Nothing of the file is a judgment
    until it is published."""
    study = upload.study
    try:
        parsed = check_judgment_file(study, bytes(upload.data), upload.filename or None)
    except FormatError as exc:
        upload.delete()  # nothing to resume: the study changed under the file
        raise jobs.JobFailed(f"Nothing was imported: the file no longer fits the study.\n{exc}") from exc
    try:
        _stage(upload, parsed, progress)
        created = _publish(upload)
    except Exception as exc:
        if jobs.is_outage(exc):
            raise  # run_job says the database was away; the staged lines wait for a resume
        raise jobs.JobFailed(
            f"The import stopped ({type(exc).__name__}: {exc}). None of the file's judgments is in the study yet: "
            "resume the import from the study page, or discard it."
        ) from exc
    progress(len(parsed), len(parsed))
    return f"Imported {created:,} judgments ({len(parsed) - created:,} already present)."


def _stage(upload: Upload, parsed: list[judgment_files.ParsedJudgment], progress: Callable[[int, int], None]) -> None:
    """The file's lines not staged yet, in steps of ``SEPLAB_IMPORT_STEP``, each its own short transaction."""
    step = settings.SEPLAB_IMPORT_STEP
    staged = set(upload.staged_judgments.values_list("idempotency_key", flat=True))
    items = dict(upload.study.items.values_list("external_id", "pk"))
    generations = {
        (g.item_id, g.system.name, g.sample_index): g.pk
        for g in Generation.objects.filter(item__study=upload.study)
        .select_related("system")
        .only("id", "item_id", "sample_index", "system__name")
    }
    todo = [p for p in parsed if p.key not in staged]
    done = len(parsed) - len(todo)
    now = timezone.now()
    progress(done, len(parsed))
    for start in range(0, len(todo), step):
        chunk = todo[start : start + step]
        rows = []
        for p in chunk:
            item = items[p.item]
            rows.append(
                StagedJudgment(
                    upload=upload,
                    rater_external_id=p.rater,
                    rater_kind=p.rater_kind,
                    generation_a_id=generations[(item, p.system_a, p.sample_a)],
                    generation_b_id=generations[(item, p.system_b, p.sample_b)],
                    **_columns(p, now),
                )
            )
        with transaction.atomic():
            StagedJudgment.objects.bulk_create(rows, batch_size=IMPORT_INSERT_BATCH)
        done += len(chunk)
        progress(done, len(parsed))


def _columns(p: judgment_files.ParsedJudgment, now: datetime) -> dict[str, Any]:
    """A parsed line's own columns, the same in its judgment (imported at once) and in its staged line (published
    later): every column but who rated it and which outputs (a judgment's study, rater and pair; a staged line's
    upload, rater name and kind, and generations). ``now`` is the time of a line without one."""
    return {
        "a_shown_first": p.shown_first == p.system_a,
        "choice": p.choice,
        "response_set": p.response_set,
        "strength": p.strength,
        "probability_a": p.probability_a,
        "comment": p.comment,
        "created": p.created or now,
        "time_on_task_ms": p.time_on_task_ms,
        "client_time_ms": p.client_time_ms,
        "idempotency_key": p.key,
        "superseded": p.superseded,
        "revised": p.revised,
        "extra": p.extra,
        "answers": p.answers,
    }


# The columns a staged line gives its judgment: every column both tables have (the staging table's own -- upload,
# rater and generations -- become the judgment's study, rater and pair).
_COPIED = tuple(
    f.column
    for f in StagedJudgment._meta.concrete_fields
    if f.name not in ("id", "upload", "rater_external_id", "rater_kind", "generation_a", "generation_b")
)


def _publish(upload: Upload) -> int:
    """Every staged line of ``upload`` made a judgment, in one transaction with the raters and output pairs they
    need; a line whose id the study has already is skipped. The upload and its staged lines go in the same
    transaction. Returns how many judgments were created. A second publisher of the same upload waits for the first,
    then finds nothing to publish."""
    q = connection.ops.quote_name
    if connection.vendor == "postgresql":
        # the planner's statistics of the lines just staged: without them it joins 100,000 lines row by row (24 s
        # in one transaction, against 2.5 s)
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {q(StagedJudgment._meta.db_table)}")
    with transaction.atomic():
        upload = Upload.objects.select_for_update().defer("data").get(pk=upload.pk)
        study = upload.study
        known = set(study.raters.values_list("external_id", flat=True))
        wanted = dict(upload.staged_judgments.values_list("rater_external_id", "rater_kind").distinct())
        Rater.objects.bulk_create(
            [
                Rater(study=study, external_id=name, kind=kind, source=Rater.Source.IMPORT)
                for name, kind in wanted.items()
                if name not in known
            ],
            batch_size=IMPORT_INSERT_BATCH,
        )
        staged, pair, generation = (q(m._meta.db_table) for m in (StagedJudgment, Pair, Generation))
        judgment, rater = q(Judgment._meta.db_table), q(Rater._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {pair} ({q('item_id')}, {q('generation_a_id')}, {q('generation_b_id')}) "
                f"SELECT DISTINCT g.{q('item_id')}, s.{q('generation_a_id')}, s.{q('generation_b_id')} "
                f"FROM {staged} s JOIN {generation} g ON g.{q('id')} = s.{q('generation_a_id')} "
                f"WHERE s.{q('upload_id')} = %s ON CONFLICT DO NOTHING",
                [upload.pk],
            )
            columns = ", ".join(q(c) for c in _COPIED)
            copied = ", ".join(f"s.{q(c)}" for c in _COPIED)
            cursor.execute(
                f"INSERT INTO {judgment} ({q('study_id')}, {q('rater_id')}, {q('pair_id')}, {q('recorded')}, "
                f"{columns}) "
                f"SELECT %s, r.{q('id')}, p.{q('id')}, %s, {copied} FROM {staged} s "
                f"JOIN {rater} r ON r.{q('study_id')} = %s AND r.{q('external_id')} = s.{q('rater_external_id')} "
                f"JOIN {pair} p ON p.{q('generation_a_id')} = s.{q('generation_a_id')} "
                f"AND p.{q('generation_b_id')} = s.{q('generation_b_id')} "
                f"WHERE s.{q('upload_id')} = %s ORDER BY s.{q('id')} ON CONFLICT DO NOTHING",
                [study.pk, connection.ops.adapt_datetimefield_value(timezone.now()), study.pk, upload.pk],
            )
            created = cursor.rowcount
        upload.delete()  # and its staged lines (one DELETE: nothing hangs off them)
    return created


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
        new.append(Judgment(study=study, rater=rater, pair=pair, **_columns(p, now)))
    return new
