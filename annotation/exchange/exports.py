"""Judgments out: each as a line of docs/interfaces.md#judgment-format, streamed as JSONL or CSV (the researcher
page, the API and ``export_judgments`` all read these)."""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Exists, OuterRef
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from annotation import orientation
from annotation.exchange import judgment_files, ranking_files
from annotation.models import Generation, Judgment, Pair, Ranking, Rater, Study


def export_response(study: Study, fmt: str) -> StreamingHttpResponse:
    """Stream the study's judgments as JSONL (docs/interfaces.md#judgment-format) or as CSV (shared by the page and
    the API)."""
    if fmt == "csv":

        def rows():
            buffer = io.StringIO()
            writer = csv.writer(buffer)
            writer.writerow(judgment_files.JUDGMENT_CSV_COLUMNS)
            for line in judgment_lines(study):
                writer.writerow(judgment_files.judgment_csv_row(line))
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
            yield buffer.getvalue()

        response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    else:
        lines = (json.dumps(line, ensure_ascii=False) + "\n" for line in judgment_lines(study))
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
        fmt = "jsonl"
    disposition = content_disposition_header(True, f"{study.name}-judgments.{fmt}")
    # a str whenever as_attachment is True: the stub has one signature, returning str | None
    response["Content-Disposition"] = disposition  # type: ignore[assignment]
    return response


# What a line never reads of the rows joined to a judgment: the texts (an output may be long, and an export reads every
# judgment's two outputs and item).
_UNREAD = [
    f"pair__{relation}__{name}"
    for relation, names in (
        ("item", ("input", "messages", "reference", "metadata")),
        ("generation_a", ("text", "text_hash", "provenance")),
        ("generation_b", ("text", "text_hash", "provenance")),
    )
    for name in names
]


def judgment_queryset(study: Study):
    """The study's judgments, oldest first, with what ``judgment_line`` needs in one query (and none of the items'
    and outputs' texts, which no line holds)."""
    return (
        Judgment.objects.filter(study=study)
        .select_related("rater", "ranking", "pair__item", "pair__generation_a__system", "pair__generation_b__system")
        .defer(*_UNREAD)
        .order_by("created", "id")
    )


def judgment_ids(study: Study):
    """The ids of the study's judgments in the order of ``judgment_queryset``, read off the judgments' table alone
    (a page of them is cut out of the index, without the joins)."""
    return Judgment.objects.filter(study=study).order_by("created", "id").values_list("id", flat=True)


def judgments_by_ids(study: Study, ids) -> list[Judgment]:
    """The study's judgments of ``ids`` (a page of ``judgment_ids``), in the order of ``judgment_queryset``, in one
    query."""
    return list(judgment_queryset(study).filter(id__in=list(ids)))


def _systems(j: Any) -> tuple[str, str]:
    return j.pair.generation_a.system.name, j.pair.generation_b.system.name


def _side(j: Any, side: str | None) -> str | None:
    return {"a": _systems(j)[0], "b": _systems(j)[1], "tie": "tie", None: None}[side]


# How each field of the judgment format (``judgment_files.JUDGMENT_SCHEMA``) is read off a stored judgment (a
# ``Judgment``, or an export's row: its columns by name with its ``rater`` and ``pair`` as the same attributes). A field
# added to the schema without a reader here is refused when the first judgment is exported, never silently left out.
READERS: dict[str, Callable[[Any], Any]] = {
    "id": lambda j: j.idempotency_key,
    "item": lambda j: j.pair.item.external_id,
    "system_a": lambda j: _systems(j)[0],
    "sample_a": lambda j: j.pair.generation_a.sample_index,
    "system_b": lambda j: _systems(j)[1],
    "sample_b": lambda j: j.pair.generation_b.sample_index,
    "shown_first": lambda j: orientation.in_display_order(*_systems(j), j.a_shown_first)[0],
    "rater": lambda j: j.rater.external_id,
    "rater_kind": lambda j: j.rater.kind,
    "choice": lambda j: _side(j, j.choice),
    "response_set": lambda j: None if j.response_set is None else [_side(j, s) for s in j.response_set],
    "probability_a": lambda j: j.probability_a,
    "created": lambda j: judgment_files.format_timestamp(j.created),
    "time_on_task_ms": lambda j: j.time_on_task_ms,
    "client_time_ms": lambda j: j.client_time_ms,
    "assignment": lambda j: j.assignment_id,
    "superseded": lambda j: j.superseded,
    "strength": lambda j: j.strength,
    "comment": lambda j: j.comment or None,
    "revised": lambda j: j.revised,
    "answers": lambda j: _answers(j),
    "excluded": lambda j: j.pair.item.excluded,
    "ranking": lambda j: None if j.ranking is None else j.ranking.idempotency_key,
}


def _answers(j: Any) -> dict[str, dict] | None:
    """The further questions' answers in system names, as the main answer is exported (None without any)."""
    if not j.answers:
        return None
    out = {}
    for key, answer in j.answers.items():
        if "text" in answer:
            out[key] = {"text": answer["text"]}
        else:
            out[key] = {
                "choice": _side(j, answer.get("choice")),
                "response_set": (
                    None if answer.get("response_set") is None else [_side(j, s) for s in answer["response_set"]]
                ),
                "strength": answer.get("strength"),
            }
    return out


if set(READERS) != set(judgment_files.JUDGMENT_FIELDS):  # said at start-up, not when someone first exports
    raise ImproperlyConfigured(
        "annotation/exchange/exports.py reads the judgment fields "
        f"{sorted(set(judgment_files.JUDGMENT_FIELDS) ^ set(READERS))} wrongly: one reader per field "
        "of judgment_files.JUDGMENT_SCHEMA"
    )


def _reading() -> list[tuple[str, bool, Callable[[Any], Any]]]:
    """Each field of ``judgment_files.JUDGMENT_SCHEMA`` with whether every line has it and its reader, the ones that
    apply only sometimes last."""
    reading = []
    for field in sorted(judgment_files.JUDGMENT_SCHEMA, key=lambda f: not f.exported):
        try:
            read = READERS[field.name]
        except KeyError:
            raise ImproperlyConfigured(
                f"the judgment field {field.name!r} has no reader in "
                "annotation/exchange/exports.py: it would not be exported"
            ) from None
        reading.append((field.name, field.exported, read))
    return reading


def judgment_line(j: Any, reading: list[tuple[str, bool, Callable[[Any], Any]]] | None = None) -> dict[str, Any]:
    """A judgment (a ``Judgment`` or an export's row) as a JSONL object of docs/interfaces.md#judgment-format, field
    by field of ``judgment_files.JUDGMENT_SCHEMA``; unknown fields of an imported line come back as they were. A field
    that is not ``exported`` on every line appears when it has a value."""
    line: dict[str, Any] = dict(j.extra)
    for name, exported, read in reading if reading is not None else _reading():
        value = read(j)
        if exported or value is not None:
            line[name] = value
    return line


_CHUNK = 2000


def _pairs(ids) -> dict[int, SimpleNamespace]:
    """Pairs by id as a line reads them (``pair.item.external_id`` and ``.excluded``, ``pair.generation_a.system.name``,
    ``pair.generation_a.sample_index`` and the same of ``generation_b``), in one query."""
    columns = [f"generation_{side}__{name}" for side in "ab" for name in ("system__name", "sample_index")]
    return {
        pk: SimpleNamespace(
            item=SimpleNamespace(external_id=item, excluded=excluded),
            generation_a=SimpleNamespace(system=SimpleNamespace(name=system_a), sample_index=sample_a),
            generation_b=SimpleNamespace(system=SimpleNamespace(name=system_b), sample_index=sample_b),
        )
        for pk, item, excluded, system_a, sample_a, system_b, sample_b in Pair.objects.filter(id__in=ids).values_list(
            "id", "item__external_id", "item__excluded", *columns
        )
    }


def _raters(ids) -> dict[int, SimpleNamespace]:
    """Raters by id as a line reads them (``rater.external_id``, ``rater.kind``), in one query."""
    return {
        pk: SimpleNamespace(external_id=external_id, kind=kind)
        for pk, external_id, kind in Rater.objects.filter(id__in=ids).values_list("id", "external_id", "kind")
    }


def _rankings(ids) -> dict[int | None, SimpleNamespace | None]:
    """Rankings by id as a line reads them (``ranking.idempotency_key``), in one query."""
    return {
        pk: SimpleNamespace(idempotency_key=key)
        for pk, key in Ranking.objects.filter(id__in=ids).values_list("id", "idempotency_key")
    }


def judgment_lines(study: Study) -> Iterator[dict[str, Any]]:
    """Every judgment of the study as a JSONL object (docs/interfaces.md#judgment-format), oldest first, streamed:
    the judgments' own columns read in chunks of ``_CHUNK``, each with its rater and its pair (each read once, when a
    chunk first needs it), as plain rows: a judgment joined to its rater, pair, item, outputs and systems as model
    instances cost seven of them per line, most of an export's time. The queries grow with the chunks, never with
    the rows. A rater is read when a chunk first names it, never all of them up front: one who joins while the
    export streams (a new crowd worker, a judge, an import) is read with their first judgment."""
    reading = _reading()  # a field without a reader: refused before anything is read
    names = [f.attname for f in Judgment._meta.concrete_fields]
    rows = Judgment.objects.filter(study=study).order_by("created", "id").values_list(*names)
    raters: dict[int, SimpleNamespace] = {}
    pairs: dict[int, SimpleNamespace] = {}
    answers: dict[int | None, SimpleNamespace | None] = {None: None}
    stream = rows.iterator(chunk_size=_CHUNK)
    for chunk in iter(lambda: list(itertools.islice(stream, _CHUNK)), []):
        judgments = [SimpleNamespace(**dict(zip(names, values, strict=True))) for values in chunk]
        missing = {j.rater_id for j in judgments} - raters.keys()
        if missing:
            raters.update(_raters(missing))
        missing = {j.pair_id for j in judgments} - pairs.keys()
        if missing:
            pairs.update(_pairs(missing))
        missing = {j.ranking_id for j in judgments} - answers.keys()
        if missing:
            answers.update(dict(_rankings(missing)))
        for j in judgments:
            j.rater, j.pair, j.ranking = raters[j.rater_id], pairs[j.pair_id], answers[j.ranking_id]
            yield judgment_line(j, reading)


def ranking_ids(study: Study):
    """The ids of the study's rankings in the order of ``ranking_lines`` (a page of them, for the API)."""
    return Ranking.objects.filter(study=study).order_by("created", "id").values_list("id", flat=True)


def ranking_lines(study: Study, ids=None) -> Iterator[dict[str, Any]]:
    """Every ranking and best-worst answer of the study (or those of ``ids``) as a line of
    docs/interfaces.md#ranking-format, oldest first (the pairwise judgments each implies are in the judgments export,
    with its id in their ``ranking`` field)."""
    outputs = {
        pk: (system, sample)
        for pk, system, sample in Generation.objects.filter(item__study=study).values_list(
            "id", "system__name", "sample_index"
        )
    }

    def named(generation_id: int) -> str | dict[str, Any]:
        return ranking_files.output_json(outputs[generation_id])

    # an imported line's "excluded" keeps its judgments out of the analysis (stored superseded) in any study
    set_aside = Exists(Judgment.objects.filter(ranking=OuterRef("pk"), superseded=True))
    rows = (
        Ranking.objects.filter(study=study, **({} if ids is None else {"id__in": list(ids)}))
        .select_related("rater", "item")
        .annotate(set_aside=set_aside)
        .order_by("created", "id")
    )
    for r in rows.iterator(chunk_size=_CHUNK):
        line: dict[str, Any] = dict(r.extra)
        line.update(
            id=r.idempotency_key,
            item=r.item.external_id,
            rater=r.rater.external_id,
            rater_kind=r.rater.kind,
            kind=r.kind,
            shown=[named(g) for g in r.shown],
        )
        if r.order is not None:
            line["ranking"] = [named(g) for g in r.order]
        else:
            # a best-worst answer has both (the table's check constraint ranking_answer_of_its_kind)
            line["best"], line["worst"] = named(cast(int, r.best_id)), named(cast(int, r.worst_id))
        line.update(
            created=judgment_files.format_timestamp(r.created),
            comment=r.comment or None,
            time_on_task_ms=r.time_on_task_ms,
            excluded=r.item.excluded or r.set_aside,
        )
        yield line


def rankings_response(study: Study) -> StreamingHttpResponse:
    """Stream the study's rankings and best-worst answers as JSONL (docs/interfaces.md#ranking-format)."""
    lines = (json.dumps(line, ensure_ascii=False) + "\n" for line in ranking_lines(study))
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, f"{study.name}-rankings.jsonl")  # type: ignore[assignment]
    return response
