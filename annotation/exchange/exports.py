"""Judgments out: each as a SPEC §8 line, streamed as JSONL or CSV (the researcher page, the API and
``export_judgments`` all read these)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from annotation import orientation
from annotation.exchange import formats
from annotation.models import Judgment, Study


def export_response(study: Study, fmt: str) -> StreamingHttpResponse:
    """Stream the study's judgments as SPEC §8 JSONL or as CSV (shared by the page and the API)."""
    if fmt == "csv":
        def rows():
            buffer = io.StringIO()
            writer = csv.writer(buffer)
            writer.writerow(formats.JUDGMENT_CSV_COLUMNS)
            for line in judgment_lines(study):
                writer.writerow(formats.judgment_csv_row(line))
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
            yield buffer.getvalue()

        response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    else:
        lines = (json.dumps(line, ensure_ascii=False) + "\n" for line in judgment_lines(study))
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
        fmt = "jsonl"
    response["Content-Disposition"] = content_disposition_header(True, f"{study.name}-judgments.{fmt}")
    return response


def judgment_queryset(study: Study):
    """The study's judgments, oldest first, with what ``judgment_line`` needs in one query."""
    return (
        Judgment.objects.filter(study=study)
        .select_related("rater", "pair__item", "pair__generation_a__system", "pair__generation_b__system")
        .order_by("created", "id")
    )


def judgment_line(j: Judgment) -> dict[str, Any]:
    """A judgment as a SPEC §8 JSONL object; unknown fields of an imported line come back as they were."""
    system_a = j.pair.generation_a.system.name
    system_b = j.pair.generation_b.system.name
    name = {"a": system_a, "b": system_b, "tie": "tie", None: None}
    line: dict[str, Any] = dict(j.extra)
    line.update({
        "id": j.idempotency_key,
        "item": j.pair.item.external_id,
        "system_a": system_a,
        "sample_a": j.pair.generation_a.sample_index,
        "system_b": system_b,
        "sample_b": j.pair.generation_b.sample_index,
        "shown_first": orientation.in_display_order(system_a, system_b, j.a_shown_first)[0],
        "rater": j.rater.external_id,
        "rater_kind": j.rater.kind,
        "choice": name[j.choice],
        "response_set": None if j.response_set is None else [name[s] for s in j.response_set],
        "probability_a": j.probability_a,
        "created": formats.format_timestamp(j.created),
        "time_on_task_ms": j.time_on_task_ms,
        "client_time_ms": j.client_time_ms,
        "superseded": j.superseded,
        "strength": j.strength,
        "comment": j.comment or None,
        "revised": j.revised,
    })
    if j.assignment_id is not None:
        line["assignment"] = j.assignment_id
    return line


def judgment_lines(study: Study) -> Iterator[dict[str, Any]]:
    """Every judgment of the study as a SPEC §8 JSONL object, oldest first."""
    for judgment in judgment_queryset(study).iterator(chunk_size=2000):
        yield judgment_line(judgment)

