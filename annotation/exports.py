"""Judgment exports as HTTP responses (shared by the researcher page and the API)."""

from __future__ import annotations

import csv
import io
import json

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from annotation import formats, services
from annotation.models import Study


def export_response(study: Study, fmt: str) -> StreamingHttpResponse:
    """Stream the study's judgments as SPEC §8 JSONL or as CSV (shared by the page and the API)."""
    if fmt == "csv":
        def rows():
            buffer = io.StringIO()
            writer = csv.writer(buffer)
            writer.writerow(formats.JUDGMENT_CSV_COLUMNS)
            for line in services.judgment_lines(study):
                writer.writerow(formats.judgment_csv_row(line))
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
            yield buffer.getvalue()

        response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    else:
        lines = (json.dumps(line, ensure_ascii=False) + "\n" for line in services.judgment_lines(study))
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
        fmt = "jsonl"
    response["Content-Disposition"] = content_disposition_header(True, f"{study.name}-judgments.{fmt}")
    return response
