"""Battles files: the two fast readers accept exactly what the row-by-row definition accepts, with the same
systems, order and values, and anything else is named by line through the definition."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics import battles
from annotation.exchange.rules import FormatError

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None)
NAMES = ["gpt-4", "claude", "x", "", " ", "a,b", 'say "hi"', "ünï", "model-01", "model-0l", "\t"]
WINNERS = ["model_a", "model_b", "tie", "tie (bothbad)", "draw", "", "Model_A"]
SEPARABILITY = ["0.5", "1", "", "nan", " 0.25", "abc", "-0.1", "1e-3", "1_0"]


def same(got: battles.Battles, expected: battles.Battles) -> None:
    assert got.systems == expected.systems
    for field in ("a", "b", "score"):
        np.testing.assert_array_equal(getattr(got, field), getattr(expected, field))
    np.testing.assert_array_equal(got.separability, expected.separability)  # NaN equals NaN here


def definition(data: bytes) -> battles.Battles | FormatError:
    try:
        return battles.checked_battles(data.decode("utf-8").removeprefix("\ufeff"), "battles.csv")
    except FormatError as exc:
        return exc


@st.composite
def csv_files(draw) -> bytes:
    columns = draw(st.permutations(["question_id", "model_a", "model_b", "winner", "separability"]))
    columns = columns[: draw(st.integers(3, 5))] if draw(st.booleans()) else columns
    pools = {
        "question_id": st.sampled_from(["q1", "q2", "", "9"]),
        "model_a": st.sampled_from(NAMES),
        "model_b": st.sampled_from(NAMES),
        "winner": st.sampled_from(WINNERS),
        "separability": st.sampled_from(SEPARABILITY),
    }
    clean = draw(st.booleans())  # mostly valid files, so the fast readers' accepting side is exercised too
    rows = []
    for _ in range(draw(st.integers(0, 12))):
        if clean:
            a, b = draw(st.sampled_from([("gpt-4", "claude"), ("claude", "x"), ("x", "gpt-4"), ("model-01", "x")]))
            row = {
                "question_id": "q",
                "model_a": a,
                "model_b": b,
                "winner": draw(st.sampled_from(WINNERS[:4])),
                "separability": draw(st.sampled_from(["0.5", "", "1e-3"])),
            }
        else:
            row = {c: draw(pools[c]) for c in columns}
        rows.append([row.get(c, "") for c in columns])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow(columns)
    for fields in rows:
        shape = draw(st.sampled_from(["row"] * 8 + ["blank", "short", "long", "raw"]))
        if shape == "blank":
            out.write("\n")
        if shape == "short":
            fields = fields[:-1]
        if shape == "long":
            fields = [*fields, "extra"]
        if shape == "raw":  # written without the csv module's quoting
            out.write(",".join(fields) + "\n")
        else:
            writer.writerow(fields)
    text = out.getvalue()
    if draw(st.booleans()):
        text = text.rstrip("\r\n")  # no line feed after the last line
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + text.encode()


@SETTINGS
@given(csv_files())
def test_the_fast_readers_accept_exactly_what_the_definition_accepts(data):
    expected = definition(data)
    body = data.removeprefix(battles.BOM)
    fast = {
        "plain": battles._plain_columns(body),
        "csv module": battles._csv_columns(io.TextIOWrapper(io.BytesIO(body), encoding="utf-8", newline="")),
    }
    for name, got in fast.items():
        if got is not None:
            assert not isinstance(expected, FormatError), f"the {name} reader accepted a file with problems"
            same(got, expected)
    try:
        parsed = battles.parse_battles(data, "battles.csv")
    except FormatError as exc:
        assert isinstance(expected, FormatError) and exc.problems == expected.problems
    else:
        assert not isinstance(expected, FormatError)
        same(parsed, expected)


def test_a_file_programs_write_takes_the_plain_reader():
    lines = [
        "question_id,model_a,model_b,winner,separability",
        "q1,gpt-4,claude,model_a,0.5",
        "q2,claude,x,tie (bothbad),",
        "q3,x,gpt-4,model_b,1e-3",
        "",
    ]
    data = "\n".join(lines).encode()
    got = battles._plain_columns(data)
    assert got is not None
    assert got.systems == ["gpt-4", "claude", "x"]
    assert got.a.tolist() == [0, 1, 2] and got.b.tolist() == [1, 2, 0]
    assert got.score.tolist() == [1.0, 0.5, 0.0]
    np.testing.assert_array_equal(got.separability, [0.5, np.nan, 1e-3])


def test_names_that_differ_in_one_byte_stay_apart():
    # names longer than one 8-byte word that differ only past it, and names that are each other's prefix
    names = ["model-aaaaaaaaaaaaaaa-1", "model-aaaaaaaaaaaaaaa-2", "model", "model-", "m" * 200]
    lines = ["model_a,model_b,winner"] + [f"{a},{b},tie" for a in names for b in names if a != b]
    got = battles._plain_columns(("\n".join(lines) + "\n").encode())
    assert got is not None and got.systems == names
    pairs = [(got.systems[i], got.systems[j]) for i, j in zip(got.a, got.b, strict=True)]
    assert pairs == [(a, b) for a in names for b in names if a != b]


def test_quotes_non_ascii_and_crlf_go_to_the_csv_module_with_the_same_result():
    text = 'model_a,model_b,winner\r\n"a,b",ünï,model_a\r\nünï,"say ""hi""",tie\r\n'
    data = text.encode()
    assert battles._plain_columns(data) is None
    got = battles.parse_battles(data, "f.csv")
    assert got.systems == ["a,b", "ünï", 'say "hi"'] and got.score.tolist() == [1.0, 0.5]


def test_problems_are_named_by_line_whichever_reader_saw_the_file_first():
    data = b"model_a,model_b,winner\nx,y,model_a\n\nx,x,model_a\nx,y,draw\n"
    with pytest.raises(FormatError) as exc:
        battles.parse_battles(data, "f.csv")
    assert [(p.line, p.field) for p in exc.value.problems] == [(4, "model_b"), (5, "winner")]


def test_a_jsonl_file_is_read_by_the_definition(tmp_path):
    path = tmp_path / "battles.jsonl"
    path.write_text(
        json.dumps({"model_a": "x", "model_b": "y", "winner": "model_b", "separability": 0.2})
        + "\n"
        + json.dumps({"model_a": "y", "model_b": "x", "winner": ["a list"]})
        + "\n"
    )
    with pytest.raises(FormatError) as exc:  # a list where the winner goes is a problem, not a crash
        battles.read_battles(str(path), 1 << 20)
    assert [(p.line, p.field) for p in exc.value.problems] == [(2, "winner")]


def test_a_file_over_the_limit_is_refused_before_it_is_read_whole(tmp_path):
    path = tmp_path / "big.csv"
    path.write_bytes(b"model_a,model_b,winner\n" + b"x,y,tie\n" * 1000)
    with pytest.raises(FormatError, match="file too large"):
        battles.read_battles(str(path), 1000)


def test_the_fast_style_reader_agrees_with_the_checking_reader():
    """analytics/battles.py: plain digits are read at once; any other spelling of a count ("12.0", "1e3") goes to
    the checking reader, which reads it as the number it is; a bad count is named there by line and field."""
    from analytics.battles import STYLE_COLUMNS, _plain_style_counts, style_counts

    rng = np.random.default_rng(5)
    counts = rng.integers(0, 3000, (500, 8))
    header = "model_a,model_b,winner," + ",".join(STYLE_COLUMNS) + "\n"
    body = "".join(
        f"m{i % 3},m{(i + 1) % 3},tie," + ",".join(str(v) for v in row) + "\n" for i, row in enumerate(counts)
    )
    data = (header + body).encode()
    np.testing.assert_array_equal(_plain_style_counts(data), counts)
    a, b = style_counts(data, "x.csv", len(counts))
    np.testing.assert_array_equal(a, counts[:, 0::2])
    np.testing.assert_array_equal(b, counts[:, 1::2])
    first = body.splitlines()[0].split(",")
    spelled = (
        header + ",".join(first[:3] + ["12.0", "1e3"] + first[5:]) + "\n" + "".join(body.splitlines(keepends=True)[1:])
    ).encode()
    assert _plain_style_counts(spelled) is None
    a, b = style_counts(spelled, "x.csv", len(counts))
    assert (a[0, 0], b[0, 0]) == (12.0, 1000.0)
    np.testing.assert_array_equal(a[1:], counts[1:, 0::2])
    negative = spelled.replace(b"12.0", b"-2", 1)
    with pytest.raises(FormatError) as caught:
        style_counts(negative, "x.csv", len(counts))
    assert (caught.value.problems[0].line, caught.value.problems[0].field) == (2, "sum_assistant_tokens_a")
