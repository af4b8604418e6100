"""Security pass, L1: every input to the importers gets either success or a message with its line and field; none
is a crash, none half-imports. The cases the adversarial pass found, then hypothesis over JSON lines and CSV
rows built from the fields the formats know, with hostile values."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotation.exchange import judgment_files
from annotation.exchange.rules import FormatError
from annotation.models import Judgment, Study
from annotation.rating import imports
from annotation.studies import creation

JUDGMENT = {
    "item": "item-0",
    "system_a": "sys-a",
    "sample_a": 0,
    "system_b": "sys-b",
    "sample_b": 0,
    "shown_first": "sys-a",
    "rater": "h",
    "rater_kind": "human",
    "choice": "sys-a",
}
CSV_HEADER = "item,system_a,sample_a,system_b,sample_b,shown_first,rater,rater_kind,choice"


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"id": "x", "input": "in", "outputs": {"a": ["1"], "b": ["2"]}, "metadata": {"v": NaN}}',
            "NaN is not a JSON",
        ),
        (
            '{"id": "x", "input": "in", "outputs": {"a": ["1"], "b": ["2"]}, "metadata": {"v": -Infinity}}',
            "-Infinity is not a JSON",
        ),
        ('{"id": "x", "input": "in\\ud800", "outputs": {"a": ["1"], "b": ["2"]}}', "unpaired surrogate"),
        (
            '{"id": "x", "input": "in", "outputs": {"a": ["1"], "b": ["2"]}, "metadata": {"v": ' + "9" * 5000 + "}}",
            "more than 4,300 digits",
        ),
        ('{"id": "x", "input": "in", "outputs": {"a": ["1"], "b": ["2"]}, "metadata": {"v": 1e400}}', "too large"),
    ],
)
def test_the_study_files_that_crashed_now_name_their_line(researcher, text, message):
    with pytest.raises(FormatError, match=f"line 1: .*{message}"):
        creation.do_create_study(researcher, "bad", (text + "\n").encode(), "s.jsonl")
    assert not Study.objects.exists()


@pytest.mark.parametrize(
    "data, filename, message",
    [
        (json.dumps({**JUDGMENT, "note": float("nan")}), "j.jsonl", "line 1: NaN"),
        (json.dumps({**JUDGMENT, "rater": "r" * 201}), "j.jsonl", "line 1, field 'rater': rater longer than 200"),
        (f"{CSV_HEADER}\nitem-0,sys-a,--5,sys-b,0,sys-a,h,human,sys-a", "j.csv", "line 2, field 'sample_a'"),
        (f"{CSV_HEADER}\nitem-0,sys-a,²,sys-b,0,sys-a,h,human,sys-a", "j.csv", "line 2, field 'sample_a'"),
        (
            f'{CSV_HEADER},extra\nitem-0,sys-a,0,sys-b,0,sys-a,h,human,sys-a,"{{""v"": NaN}}"',
            "j.csv",
            "line 2, field 'extra': NaN",
        ),
    ],
)
def test_the_judgment_files_that_crashed_now_name_their_line(study, data, filename, message):
    with pytest.raises(FormatError, match=message):
        imports.do_import_judgments(study, (data + "\n").encode(), filename)
    assert not Judgment.objects.exists()


HOSTILE_JSON = [  # (a JSON cell, words of the refusal)
    ('{"v": NaN}', "NaN is not a JSON"),
    ('{"v": Infinity}', "Infinity is not a JSON"),
    ('{"v": 1e999}', "too large"),
    ('{"v": ' + "9" * 5000 + "}", "more than 4,300 digits"),
    ("[" * 3000 + "]" * 3000, "nested too deeply"),
    ('{"v": "\\ud800"}', "unpaired surrogate"),
    ('{"v": "a\\u0000b"}', "NUL character"),
]


def _csv_cell(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


@pytest.mark.parametrize(("cell", "message"), HOSTILE_JSON)
def test_json_in_a_study_csvs_metadata_is_held_to_the_jsonl_rules(researcher, cell, message):
    """The study CSV's metadata once went through plain json.loads -- NaN, Infinity, 1e999, 5,000 digits and
    3,000-deep nesting gave 500s, a lone surrogate or NUL broke PostgreSQL (and, stored on SQLite, the item's page
    for ever). Now each is refused with its line and field, and nothing is stored."""
    text = (
        f"item_id,input,system,sample,output,metadata\nx,in,a,0,one,{_csv_cell(cell)}\nx,in,b,0,two,{_csv_cell(cell)}\n"
    )
    with pytest.raises(FormatError, match=f"line 2, field 'metadata': .*{message}"):
        creation.do_create_study(researcher, "bad", text.encode(), "s.csv")
    assert not Study.objects.exists()


@pytest.mark.parametrize("column", ["extra", "response_set"])
@pytest.mark.parametrize(("cell", "message"), HOSTILE_JSON)
def test_json_in_a_judgment_csv_is_held_to_the_jsonl_rules(study, column, cell, message):
    text = f"{CSV_HEADER},{column}\nitem-0,sys-a,0,sys-b,0,sys-a,h,human,sys-a,{_csv_cell(cell)}\n"
    with pytest.raises(FormatError, match=f"line 2, field '{column}': .*{message}"):
        imports.do_import_judgments(study, text.encode(), "j.csv")
    assert not Judgment.objects.exists()


def test_a_csv_field_as_long_as_jsonl_accepts_is_read(study):
    long_comment = "x" * 1999
    text = f"{CSV_HEADER},comment\nitem-0,sys-a,0,sys-b,0,sys-a,h,human,sys-a,{long_comment}\n"
    imports.do_import_judgments(study, text.encode(), "j.csv")
    huge = f"{CSV_HEADER},note\nitem-0,sys-a,0,sys-b,0,sys-a,h,human,sys-a,{'y' * 200_000}\n"
    imports.do_import_judgments(study, huge.encode(), "j2.csv")  # an unknown column of 200,000 characters
    assert Judgment.objects.count() == 2


HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        [
            "sys-a",
            "sys-b",
            "item-0",
            "tie",
            "human",
            "judge",
            "",
            " ",
            "\x00",
            "\u2028",
            "2026-01-01T00:00:00Z",
            "9999-12-31T23:59:59-01:00",
            "0001-01-01T00:00:00+01:00",
            "--5",
            "²",
            "r" * 250,
        ]
    ),
    st.lists(st.sampled_from(["sys-a", "sys-b", "x", 1]), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
FIELDS = st.sampled_from([*judgment_files.JUDGMENT_CSV_COLUMNS, "note", "created"])
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def attempt(study, data: bytes, filename: str) -> None:
    """Success, or a FormatError whose every message names a line; nothing stored on error."""
    before = Judgment.objects.count()
    with transaction.atomic():
        try:
            imports.do_import_judgments(study, data, filename)
        except FormatError as exc:
            assert all(m.startswith(("line ", "...")) or "file" in m for m in exc.messages()), exc.messages()
            assert Judgment.objects.count() == before
        transaction.set_rollback(True)


@SETTINGS
@given(changes=st.dictionaries(FIELDS, HOSTILE, max_size=5), allow_nan=st.booleans())
def test_any_judgment_line_is_imported_or_named(study, changes, allow_nan):
    obj = {**JUDGMENT, **changes}
    try:
        line = json.dumps(obj, allow_nan=allow_nan)
    except ValueError:  # NaN refused by the encoder itself: write the tokens raw, as a hostile file would
        line = json.dumps(obj, allow_nan=True)
    attempt(study, (line + "\n").encode(), "j.jsonl")


@SETTINGS
@given(changes=st.dictionaries(st.sampled_from(judgment_files.JUDGMENT_CSV_COLUMNS), HOSTILE, max_size=5))
def test_any_judgment_csv_row_is_imported_or_named(study, changes):
    row = {**{c: "" for c in judgment_files.JUDGMENT_CSV_COLUMNS}, **JUDGMENT, **changes}
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(judgment_files.JUDGMENT_CSV_COLUMNS)
    writer.writerow(
        [
            "" if row[c] is None else (json.dumps(row[c]) if isinstance(row[c], list | dict) else row[c])
            for c in judgment_files.JUDGMENT_CSV_COLUMNS
        ]
    )
    attempt(study, buffer.getvalue().encode("utf-8", "replace"), "j.csv")


@SETTINGS
@given(
    item=st.dictionaries(st.sampled_from(["id", "input", "reference", "metadata", "outputs", "x"]), HOSTILE, max_size=4)
)
def test_any_study_line_is_imported_or_named(researcher, item):
    obj = {"id": "q", "input": "in", "outputs": {"a": ["1"], "b": ["2"]}, **item}
    with transaction.atomic():
        try:
            creation.do_create_study(researcher, "fuzz", (json.dumps(obj, allow_nan=True) + "\n").encode(), "s.jsonl")
        except FormatError as exc:
            assert all(m.startswith("line ") or "file" in m or "study needs" in m for m in exc.messages()), (
                exc.messages()
            )
            assert not Study.objects.filter(name="fuzz").exists()
        transaction.set_rollback(True)
