"""Security pass, M9: export -> import is lossless for arbitrary Unicode in every free-text field, JSONL and CSV
(U+2028, U+2029, U+0085 and the other characters str.splitlines breaks at; values starting with ' and a
formula character), property-tested with hypothesis; every field of the format comes back; and what the first
import accepts, a re-import of its export accepts (a system named "\tTAB" is refused at once)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotation.exchange import exports, judgment_files, rules
from annotation.models import Study, System
from annotation.rating import imports, rankings
from annotation.studies import creation, lifecycle

# An id is used as it is unless blank (then a content hash stands in, documented), so ids are not blank.
# Every character a database text column stores: no NUL (refused with its line), no lone surrogates
# (not encodable as UTF-8, so no file can hold them).
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40)
NAME = TEXT.map(str.strip).filter(lambda s: 0 < len(s) <= 60)
KEY = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=60).filter(
    lambda s: s.strip() == s and s
)
TRICKY = st.sampled_from(
    [
        "\u2028",
        "\u2029",
        "\x85",
        "\x1c",
        "\x1d",
        "\x1e",
        "\x0b",
        "\x0c",
        "\r",
        "'=1+1",
        "'+x",
        "''",
        "'",
        "=cmd",
        "@sum",
        "-2",
        "\t=x",
    ]
)
SYSTEMS = ("sys\u2028a", "=sys b")
ITEM = "item\u2029\x85"


@pytest.fixture
def studies(researcher):
    lines = [{"id": ITEM, "input": "In\u2028put", "outputs": {SYSTEMS[0]: ["a 0", "a 1"], SYSTEMS[1]: ["b 0", "b 1"]}}]
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    return (
        creation.do_create_study(researcher, "from", data, "s.jsonl"),
        creation.do_create_study(researcher, "to", data, "s.jsonl"),
    )


def exported(study, fmt: str) -> bytes:
    lines = list(exports.judgment_lines(study))
    if fmt == "jsonl":
        return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(judgment_files.JUDGMENT_CSV_COLUMNS)
    writer.writerows(judgment_files.judgment_csv_row(line) for line in lines)
    return buffer.getvalue().encode()


def judgment(key, rater, comment, extra_value) -> dict:
    return {
        "id": key,
        "item": ITEM,
        "system_a": SYSTEMS[0],
        "sample_a": 1,
        "system_b": SYSTEMS[1],
        "sample_b": 0,
        "shown_first": SYSTEMS[1],
        "rater": rater,
        "rater_kind": "human",
        "choice": SYSTEMS[0],
        "comment": comment or None,
        "created": "2026-01-02T03:04:05Z",
        "note": extra_value,
    }


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    key=st.one_of(KEY, TRICKY.map(lambda t: f"k{t}k")),
    rater=st.one_of(NAME, TRICKY.map(lambda t: f"r{t}x")),
    comment=st.one_of(TEXT, TRICKY),
    extra=st.one_of(TEXT, TRICKY),
)
def test_export_then_import_gives_every_value_back(studies, fmt, key, rater, comment, extra):
    source, target = studies
    with transaction.atomic():
        imports.do_import_judgments(
            source, (json.dumps(judgment(key, rater, comment, extra)) + "\n").encode(), "j.jsonl"
        )
        original = list(exports.judgment_lines(source))
        imports.do_import_judgments(target, exported(source, fmt), f"j.{fmt}")
        again = list(exports.judgment_lines(target))
        assert again == original
        assert again[0]["comment"] == (comment or None) and again[0]["rater"] == rater and again[0]["id"] == key
        assert again[0]["note"] == extra
        transaction.set_rollback(True)


@pytest.mark.parametrize("value", ["'=1+1", "''", "'", "=x", "'tis", "\t=x", "plain", "'+", "'''a"])
def test_the_csv_formula_escape_is_invertible(value):
    assert rules.csv_unsafe(rules.csv_safe(value)) == value
    assert not rules.csv_safe(value).startswith(rules.FORMULA_PREFIXES)


# Every field of the judgment format, each with a value that has tripped a reader: a system named like a formula,
# with a quote, a tab inside or a leading minus; a created time with microseconds and an offset; 0.1 + 0.2.
EVERY_FIELD_SYSTEMS = ("=SUM(A1)", "'quoted", "tab\tinside", "-1")
FURTHER = "clarity | forced_choice | Which output is clearer?\nwhy | rationale | Why?"


def every_field_lines() -> list[dict]:
    a, b, c, d = EVERY_FIELD_SYSTEMS
    return [
        {
            "id": "=first",
            "item": "+q1",
            "system_a": a,
            "sample_a": 1,
            "system_b": b,
            "sample_b": 0,
            "shown_first": b,
            "rater": "@rater",
            "rater_kind": "human",
            "choice": a,
            "response_set": [a, b],
            "probability_a": 0.1 + 0.2,
            "created": "2026-01-02T03:04:05.123456+02:00",
            "time_on_task_ms": 2_147_483_647,
            "client_time_ms": 0,
            "assignment": 7,
            "superseded": True,
            "strength": 2,
            "comment": '\t=HYPERLINK("x")\u2028\'',
            "revised": True,
            "answers": {"clarity": {"choice": b, "response_set": None, "strength": None}, "why": {"text": "-because"}},
            "note": {"nested": ["=1", None, 1.5]},
        },
        {
            "id": "second",
            "item": "+q1",
            "system_a": c,
            "sample_a": 0,
            "system_b": d,
            "sample_b": 1,
            "shown_first": c,
            "rater": "judge 'x'",
            "rater_kind": "judge",
            "choice": "tie",
            "response_set": [],
            "probability_a": None,
            "created": "2026-01-02T03:04:05Z",
            "time_on_task_ms": None,
            "client_time_ms": None,
            "superseded": False,
            "strength": None,
            "comment": None,
            "revised": False,
        },
    ]


@pytest.fixture
def every_field_studies(researcher):
    line = {"id": "+q1", "input": "In", "outputs": {s: [f"{s} 0", f"{s} 1"] for s in EVERY_FIELD_SYSTEMS}}
    data = (json.dumps(line) + "\n").encode()
    made = []
    for name in ("from", "to"):
        study = creation.do_create_study(researcher, name, data, "s.jsonl")
        made.append(lifecycle.do_update_settings(study, {"further_questions": FURTHER}, None))
    return made


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_every_exported_field_comes_back_on_import(every_field_studies, fmt):
    source, target = every_field_studies
    data = "".join(json.dumps(line) + "\n" for line in every_field_lines()).encode()
    imports.do_import_judgments(source, data, "j.jsonl")
    # and a ranking of three outputs: its three implied judgments carry the field "ranking" and come back with their
    # answer, from the rankings file imported first (docs/interfaces.md#ranking-format)
    three = list(EVERY_FIELD_SYSTEMS[:3])
    ranked = {
        "id": "=rank",
        "item": "+q1",
        "rater": "r,1",
        "rater_kind": "human",
        "shown": three,
        "ranking": three[::-1],
    }
    rankings.do_import_rankings(source, (json.dumps(ranked) + "\n").encode(), "r.jsonl")
    original = list(exports.judgment_lines(source))
    assert {field for line in original for field in line} >= set(judgment_files.JUDGMENT_FIELDS) - {"assignment"}
    answers = "".join(json.dumps(line) + "\n" for line in exports.ranking_lines(source)).encode()
    assert rankings.do_import_rankings(target, answers, "r.jsonl").created == 1
    summary = imports.do_import_judgments(target, exported(source, fmt), f"j.{fmt}")
    assert (summary.created, summary.skipped) == (2, 3)
    assert list(exports.judgment_lines(target)) == original
    again = imports.do_import_judgments(target, exported(target, fmt), f"j.{fmt}")
    assert (again.created, again.skipped) == (0, 5)  # the same lines: skipped, never refused


def test_a_system_name_with_white_space_at_an_end_is_refused_on_the_first_import(researcher):
    """A system named "\\tTAB" was accepted on import and its exported judgments refused on re-import (the judgment
    file's names are read without white space at their ends): now the study file is refused, with its line."""
    line = {"id": "q", "input": "In", "outputs": {"\tTAB": ["x"], "ok": ["y"]}}
    with pytest.raises(rules.FormatError) as refused:
        creation.do_create_study(researcher, "tab", (json.dumps(line) + "\n").encode(), "s.jsonl")
    assert refused.value.messages() == [
        "line 1, field 'outputs.\tTAB': system name '\\tTAB' starts or ends with white space (a space, tab or line "
        "break); write it as 'TAB'"
    ]
    assert not Study.objects.filter(name="tab").exists()


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_study_holding_such_a_name_from_before_still_round_trips(researcher, fmt):
    """A study imported before the rule holds "\\tTAB" already: its exports import as they are (a name the study
    has is matched as written)."""
    data = (json.dumps({"id": "q", "input": "In", "outputs": {"TAB": ["x"], "ok": ["y"]}}) + "\n").encode()
    source, target = (creation.do_create_study(researcher, name, data, "s.jsonl") for name in ("from", "to"))
    System.objects.filter(name="TAB").update(name="\tTAB")  # as the older import stored it
    line = {"id": "j", "item": "q", "system_a": "\tTAB", "system_b": "ok", "shown_first": "\tTAB", "rater": "r",
            "rater_kind": "human", "choice": "\tTAB", "response_set": ["\tTAB"]}  # fmt: skip
    imports.do_import_judgments(source, (json.dumps(line) + "\n").encode(), "j.jsonl")
    imports.do_import_judgments(target, exported(source, fmt), f"j.{fmt}")
    assert list(exports.judgment_lines(target)) == list(exports.judgment_lines(source))
    assert list(exports.judgment_lines(target))[0]["choice"] == "\tTAB"
