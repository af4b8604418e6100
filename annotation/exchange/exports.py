"""Judgments out: each as a line of docs/interfaces.md#judgment-format, streamed as JSONL or CSV (the researcher
page, the API and ``export_judgments`` all read these)."""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from annotation import orientation
from annotation.exchange import judgment_files
from annotation.models import Judgment, Pair, Rater, Study


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
        ("item", ("input", "reference", "metadata")),
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
        .select_related("rater", "pair__item", "pair__generation_a__system", "pair__generation_b__system")
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


def _systems(j: Judgment) -> tuple[str, str]:
    return j.pair.generation_a.system.name, j.pair.generation_b.system.name


def _side(j: Judgment, side: str | None) -> str | None:
    return {"a": _systems(j)[0], "b": _systems(j)[1], "tie": "tie", None: None}[side]


# How each field of the judgment format (``judgment_files.JUDGMENT_SCHEMA``) is read off a stored judgment. A field
# added to the schema without a reader here is refused when the first judgment is exported, never silently left out.
READERS: dict[str, Callable[[Judgment], Any]] = {
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
}


def _answers(j: Judgment) -> dict[str, dict] | None:
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


def judgment_line(j: Judgment) -> dict[str, Any]:
    """A judgment as a JSONL object of docs/interfaces.md#judgment-format, field by field of
    ``judgment_files.JUDGMENT_SCHEMA``; unknown fields of an imported line come back as they were. A field that is
    not ``exported`` on every line appears when it has a value."""
    line: dict[str, Any] = dict(j.extra)
    # the ones that apply only sometimes last
    fields = sorted(judgment_files.JUDGMENT_SCHEMA, key=lambda f: not f.exported)
    for field in fields:
        try:
            read = READERS[field.name]
        except KeyError:
            raise ImproperlyConfigured(
                f"the judgment field {field.name!r} has no reader in "
                "annotation/exchange/exports.py: it would not be exported"
            ) from None
        value = read(j)
        if field.exported or value is not None:
            line[field.name] = value
    return line


_CHUNK = 2000


def _pairs(ids) -> dict[int, Pair]:
    """Pairs by id with what a line reads of them (their item's id, their outputs' systems and samples)."""
    related = Pair.objects.select_related("item", "generation_a__system", "generation_b__system")
    return related.defer(*(name.removeprefix("pair__") for name in _UNREAD)).in_bulk(ids)


def judgment_lines(study: Study) -> Iterator[dict[str, Any]]:
    """Every judgment of the study as a JSONL object (docs/interfaces.md#judgment-format), oldest first, streamed:
    the judgments' own rows read in chunks of ``_CHUNK``; the study's raters read once and each pair once, when a
    chunk first needs it (a row joined to its rater, pair, item, outputs and systems cost seven model instances per
    judgment: most of an export's time). The queries grow with the chunks, never with the rows."""
    raters = Rater.objects.filter(study=study).in_bulk()
    pairs: dict[int, Pair] = {}
    chunk: list[Judgment] = []
    rows = Judgment.objects.filter(study=study).order_by("created", "id").iterator(chunk_size=_CHUNK)
    for judgment in itertools.chain(rows, [None]):
        if judgment is not None:
            chunk.append(judgment)
            if len(chunk) < _CHUNK:
                continue
        missing = {j.pair_id for j in chunk} - pairs.keys()
        if missing:
            pairs.update(_pairs(missing))
        for j in chunk:
            j.rater = raters[j.rater_id]
            j.pair = pairs[j.pair_id]
            yield judgment_line(j)
        chunk = []
