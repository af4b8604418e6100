"""Security pass, M9: export -> import is lossless for arbitrary Unicode in every free-text field, JSONL and CSV
(U+2028, U+2029, U+0085 and the other characters str.splitlines breaks at; values starting with ' and a
formula character), property-tested with hypothesis."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotation.exchange import exports, judgment_files, rules
from annotation.rating import imports
from annotation.studies import creation

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
