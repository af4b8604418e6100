"""Security pass, H3 and M2: timestamps and whole numbers outside what the database holds are refused with their
line and field (imports) or a clear error (the rating form); nothing is narrowed on the way in; a file export
is written whole or not at all."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation import elicitation
from annotation.errors import ServiceError
from annotation.exchange import judgment_files
from annotation.exchange.rules import MAX_STORED_INT, FormatError
from annotation.models import Judgment
from annotation.rating import allocation, imports, recording


def line(**fields) -> bytes:
    base = {
        "id": "x1",
        "item": "item-0",
        "system_a": "sys-a",
        "sample_a": 0,
        "system_b": "sys-b",
        "sample_b": 0,
        "shown_first": "sys-a",
        "rater": "h1",
        "rater_kind": "human",
        "choice": "sys-a",
    }
    return (json.dumps({**base, **fields}) + "\n").encode()


@pytest.mark.parametrize("created", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
def test_a_timestamp_outside_utc_range_is_refused_with_its_line(study, created):
    with pytest.raises(FormatError) as caught:
        imports.do_import_judgments(study, line(created=created), "j.jsonl")
    assert "line 1, field 'created'" in str(caught.value.messages()) and "representable range" in str(
        caught.value.messages()
    )
    assert not Judgment.objects.exists()


def test_the_last_representable_instant_imports_and_exports(study, researcher_client):
    imports.do_import_judgments(study, line(created="9999-12-31T22:59:59-01:00"), "j.jsonl")
    exported = researcher_client.get(reverse("judgments_export", args=[study.pk, "jsonl"]))
    [row] = [json.loads(x) for x in b"".join(exported.streaming_content).decode().splitlines()]
    assert row["created"] == "9999-12-31T23:59:59Z"


@pytest.mark.parametrize("value", [2**31, 2**40 + 5, 4294967303])
def test_whole_numbers_beyond_the_column_are_refused_not_wrapped(study, value):
    with pytest.raises(FormatError) as caught:
        imports.do_import_judgments(study, line(time_on_task_ms=value), "j.jsonl")
    assert f"must be a whole number from 0 to {MAX_STORED_INT}" in str(caught.value.messages())
    assert not Judgment.objects.exists()


def test_the_largest_whole_number_round_trips_exactly(study):
    imports.do_import_judgments(study, line(time_on_task_ms=MAX_STORED_INT, client_time_ms=MAX_STORED_INT), "j.jsonl")
    stored = Judgment.objects.get()
    assert stored.time_on_task_ms == stored.client_time_ms == MAX_STORED_INT


def test_the_rating_form_refuses_a_client_time_beyond_the_column(client, study, rater):
    assignment = allocation.do_start_assignment(rater)
    url = reverse("rate", args=[rater.token(), assignment.pk])
    pair = re.search(r'name="pair" value="(\d+)"', client.get(url).content.decode()).group(1)
    refused = client.post(url + "submit/", {"pair": pair, "key": "k1", "choice": "first", "client_ms": 4294967303})
    assert refused.status_code == 400 and not Judgment.objects.exists()
    client.post(url + "submit/", {"pair": pair, "key": "k2", "choice": "first", "client_ms": MAX_STORED_INT})
    assert Judgment.objects.get().client_time_ms == MAX_STORED_INT
    second = assignment.pairs.all()[1]
    allocation.do_mark_shown(second)
    with pytest.raises(ServiceError, match="client_ms"):
        recording.do_record_judgment(
            second, idempotency_key="k3", answer=elicitation.Answer(choice="first"), client_time_ms=2**31
        )


def test_an_export_to_a_file_is_whole_or_not_at_all(study, tmp_path, monkeypatch):
    imports.do_import_judgments(study, line() + line(id="x2"), "j.jsonl")
    target = tmp_path / "out.csv"
    target.write_text("an earlier export\n")
    calls = {"n": 0}
    real = judgment_files.judgment_csv_row

    def failing(row):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the database went away")
        return real(row)

    monkeypatch.setattr(judgment_files, "judgment_csv_row", failing)
    with pytest.raises(RuntimeError):
        call_command(
            "export_judgments", "--study", study.name, "--format", "csv", "--output", str(target), stderr=StringIO()
        )
    assert target.read_text() == "an earlier export\n" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]
    monkeypatch.setattr(judgment_files, "judgment_csv_row", real)
    call_command(
        "export_judgments", "--study", study.name, "--format", "csv", "--output", str(target), stderr=StringIO()
    )
    assert len(target.read_text().splitlines()) == 3
    with pytest.raises(CommandError, match="Cannot write"):
        call_command(
            "export_judgments", "--study", study.name, "--output", str(tmp_path / "no" / "such.csv"), stderr=StringIO()
        )
