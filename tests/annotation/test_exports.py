"""Judgments out (annotation/exchange/exports.py): every exported line is read field by field off the judgment
format's one table, so a field added to the table is exported or refused loudly (the export once listed the fields
by hand beside a comment saying it read them off the table)."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from annotation.exchange import exports, judgment_files
from annotation.rating import imports


def imported(study):
    line = {
        "id": "j1",
        "item": "item-0",
        "system_a": "sys-a",
        "sample_a": 0,
        "system_b": "sys-b",
        "sample_b": 1,
        "shown_first": "sys-b",
        "rater": "r1",
        "rater_kind": "human",
        "choice": "sys-a",
        "created": "2026-01-01T00:00:00Z",
        "note": "kept",
    }
    imports.do_import_judgments(study, (json.dumps(line) + "\n").encode(), "j.jsonl")
    return next(exports.judgment_lines(study))


def test_an_exported_line_has_every_field_of_the_judgment_format(study):
    line = imported(study)
    exported = [f.name for f in judgment_files.JUDGMENT_SCHEMA if f.exported]
    assert [k for k in line if k in judgment_files.JUDGMENT_FIELDS] == exported  # in the table's order
    assert (line["choice"], line["shown_first"], line["sample_b"], line["note"]) == ("sys-a", "sys-b", 1, "kept")
    assert "assignment" not in line  # not collected here: the field that applies only then is left out


def test_a_field_added_to_the_format_is_exported(study, monkeypatch):
    added = judgment_files.JudgmentField("confidence", "probability", nullable=True)
    monkeypatch.setattr(judgment_files, "JUDGMENT_SCHEMA", (*judgment_files.JUDGMENT_SCHEMA, added))
    monkeypatch.setitem(exports.READERS, "confidence", lambda j: 0.75)
    assert imported(study)["confidence"] == 0.75


def test_a_field_added_without_a_reader_is_refused_not_left_out(study, monkeypatch):
    added = judgment_files.JudgmentField("confidence", "probability", nullable=True)
    monkeypatch.setattr(judgment_files, "JUDGMENT_SCHEMA", (*judgment_files.JUDGMENT_SCHEMA, added))
    with pytest.raises(ImproperlyConfigured, match="'confidence' has no reader"):
        imported(study)


def test_a_collected_judgment_ends_with_its_assignment(study, rater):
    from annotation.rating import allocation
    from tests.conftest import answer_all

    answer_all(allocation.do_start_assignment(rater))
    line = next(exports.judgment_lines(study))
    assert list(line)[-1] == "assignment" and line["assignment"] == rater.assignments.get().pk


def test_a_rater_who_joins_while_the_export_streams_is_exported_not_a_break(researcher_client, study, monkeypatch):
    """The export read the study's raters once, before the judgments' query ran: a rater created in between (a crowd
    worker's first answer, a judge, an import finishing) broke the download part-way with a KeyError. Here an import
    by a new rater finishes exactly then -- the moment the judgments' query is sent -- and, chunks of two lines, its
    judgment comes in the last chunk: the download is whole, the new rater's line among them."""
    from django.db import connection
    from django.urls import reverse

    def line(k: int, rater: str, created: str) -> str:
        return json.dumps(
            {
                "id": f"j{k}",
                "item": f"item-{k % 4}",
                "system_a": "sys-a",
                "sample_a": 0,
                "system_b": "sys-b",
                "sample_b": 0,
                "shown_first": "sys-a",
                "rater": rater,
                "rater_kind": "human",
                "choice": "sys-a",
                "created": created,
            }
        )

    first = "\n".join(line(k, f"r{k % 2}", f"2026-01-01T00:00:0{k}Z") for k in range(5)) + "\n"
    imports.do_import_judgments(study, first.encode(), "first.jsonl")
    monkeypatch.setattr(exports, "_CHUNK", 2)
    joined = []

    def a_rater_joins(execute, sql, params, many, context):
        if not joined and "ORDER BY" in sql and '"created"' in sql and "annotation_judgment" in sql:
            joined.append(sql)
            late = line(9, "newcomer", "2026-01-02T00:00:00Z") + "\n"
            imports.do_import_judgments(study, late.encode(), "late.jsonl")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(a_rater_joins):
        response = researcher_client.get(reverse("judgments_export", args=[study.pk, "jsonl"]))
        lines = [json.loads(text) for text in b"".join(response.streaming_content).decode().splitlines()]
    assert joined, "the judgments' query was never sent"
    assert [(x["id"], x["rater"]) for x in lines] == [(f"j{k}", f"r{k % 2}") for k in range(5)] + [("j9", "newcomer")]
