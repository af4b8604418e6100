"""Chatbot-Arena battles files (docs/interfaces.md#battles-file): CSV or JSONL rows with model_a, model_b and winner in
{model_a, model_b, tie, tie (bothbad)}, optionally question_id and (for sep-ELO) separability.

Three readers, one set of rules. ``checked_battles`` is the definition: it reads row by row and names every
problem with its line and field. Two faster readers go first and accept only files the definition accepts;
anything else (a problem, a ragged row, a repeated column, a quote where the plain reader splits at commas)
goes to the definition, so every message comes from one place, and tests/analytics/test_battles.py checks
that the three agree on generated files:
- ``_plain_columns``: the CSV files programs write (ASCII, no quote characters, line feeds): split at line
  feeds and commas with numpy, each column's distinct values found once per chunk;
- ``_csv_columns``: any other CSV file, through the csv module a chunk of rows at a time into columns.
10^6 battles on this machine: plain ~0.5 s, csv module ~1.7 s, row by row ~6 s and ~1 GB (bench/README.md).
"""

from __future__ import annotations

import array
import csv
import dataclasses
import io
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Any, cast

import numpy as np

from analytics.core import style
from annotation.exchange.rules import FormatError, Problem, check_size, decode_upload, detect_format, jsonl_objects

WINNERS = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5, "tie (bothbad)": 0.5}
COLUMNS = ("model_a", "model_b", "winner")
ROWS_PER_CHUNK = 8192
LINES_PER_CHUNK = 1 << 16  # the plain reader's chunk of lines
MATRIX_BYTES = 4 << 20  # and of fields: its largest matrix (byte positions) stays at 4 MB
LONGEST_PLAIN_FIELD = 256  # longer model names or winners go to the csv module
BOM = b"\xef\xbb\xbf"


@dataclasses.dataclass
class Battles:
    systems: list[str]
    a: np.ndarray  # (n,) int64 index into systems
    b: np.ndarray
    score: np.ndarray  # (n,) float64: 1 model_a won, 0.5 tie, 0 model_b won
    separability: np.ndarray  # (n,) float64, NaN where the file gives none


def parse_battles(data: bytes, filename: str | None, max_bytes: int = 500 * 1024 * 1024) -> Battles:
    """The battles of a file's bytes; FormatError naming every problem by line and field."""
    check_size(len(data), max_bytes)
    if _is_csv(data, filename):
        body = data.removeprefix(BOM)
        fast = _plain_columns(body)
        if fast is None:
            try:
                fast = _csv_columns(io.TextIOWrapper(io.BytesIO(body), encoding="utf-8", newline=""))
            except (UnicodeDecodeError, csv.Error):  # told precisely by checked_battles
                fast = None
        if fast is not None:
            return fast
    return checked_battles(decode_upload(data, max_bytes), filename)


def read_battles(path: str, max_bytes: int) -> Battles:
    """The battles of a file on disk (OSError if it cannot be read)."""
    with open(path, "rb") as handle:
        return parse_battles(handle.read(max_bytes + 1), path, max_bytes)


def _is_csv(data: bytes, filename: str | None) -> bool:
    """``detect_format``'s answer without decoding the whole file."""
    # \s* matches at any position (the empty string at worst)
    start = cast(re.Match[bytes], re.compile(rb"\s*").match(data, len(BOM) if data.startswith(BOM) else 0)).end()
    return detect_format(data[start : start + 1].decode("latin-1"), filename) == "csv"


def checked_battles(text: str, filename: str | None) -> Battles:
    """The definition: row by row, every problem with its line number and field."""
    problems: list[Problem] = []
    index: dict[str, int] = {}
    a, b, score, sep = array.array("q"), array.array("q"), array.array("d"), array.array("d")
    rows: Iterable[tuple[int, dict]] = ()
    if detect_format(text, filename) == "jsonl":
        rows = jsonl_objects(text, problems)
    else:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        try:
            fieldnames = reader.fieldnames
        except csv.Error as exc:
            raise FormatError([Problem(reader.line_num, None, f"malformed CSV: {exc}")]) from None
        for column in COLUMNS:
            if fieldnames is None or column not in fieldnames:
                problems.append(Problem(1, column, "missing column"))
        if not problems:
            rows = _csv_records(reader, problems)
    for number, row in rows:
        model_a, model_b, winner = row.get("model_a"), row.get("model_b"), row.get("winner")
        before = len(problems)
        for field, value in (("model_a", model_a), ("model_b", model_b)):
            if not isinstance(value, str) or not value.strip():
                problems.append(Problem(number, field, f"missing {field}"))
        if model_a and model_a == model_b:
            problems.append(Problem(number, "model_b", "a model cannot battle itself"))
        if not isinstance(winner, str) or winner not in WINNERS:
            problems.append(Problem(number, "winner", f"winner must be one of {sorted(WINNERS)}, not {winner!r}"))
        separability = row.get("separability")
        delta = float("nan")
        if separability is not None and separability != "":
            try:
                delta = float(separability)
            except (TypeError, ValueError):
                problems.append(Problem(number, "separability", f"separability must be a number, not {separability!r}"))
        if len(problems) != before:
            continue
        # a row without problems has its two models and its winner as strings (checked above)
        a.append(index.setdefault(cast(str, model_a), len(index)))
        b.append(index.setdefault(cast(str, model_b), len(index)))
        score.append(WINNERS[cast(str, winner)])
        sep.append(delta)
    if not a and not problems:
        problems.append(Problem(None, None, "the file contains no battles"))
    if problems:
        raise FormatError(problems)
    return Battles(
        list(index),
        np.frombuffer(a, dtype=np.int64),
        np.frombuffer(b, dtype=np.int64),
        np.frombuffer(score, dtype=np.float64),
        np.frombuffer(sep, dtype=np.float64),
    )


def _plain_columns(data: bytes) -> Battles | None:
    """The battles of a CSV file with only ASCII, no quote characters, no carriage returns and no NUL, which
    the csv module would split exactly at line feeds and commas; None for any other file or any row
    ``checked_battles`` would refuse. Empty lines are skipped, as csv.DictReader skips them."""
    if b'"' in data or b"\r" in data or b"\x00" in data or not data.isascii():
        return None
    header_end = data.find(b"\n")
    if header_end < 0:
        return None
    header = data[:header_end].decode("ascii").split(",")
    if len(set(header)) != len(header) or not all(c in header for c in COLUMNS):
        return None
    width = len(header)
    ia, ib, iw = (header.index(c) for c in COLUMNS)
    isep = header.index("separability") if "separability" in header else None
    buf = np.frombuffer(data, dtype=np.uint8)
    index: dict[bytes, int] = {}
    winners: dict[bytes, int] = {}
    parts = []
    for field in _plain_chunks(buf, width):
        if field is None:
            return None
        (a_from, a_to), (b_from, b_to), (w_from, w_to) = field(ia), field(ib), field(iw)
        pairs = _distinct_values(
            buf, np.column_stack([a_from, b_from]).ravel(), np.column_stack([a_to, b_to]).ravel(), index
        )
        outcome = _distinct_values(buf, w_from, w_to, winners)
        sep: np.ndarray | None = np.full(len(a_from), np.nan)
        if isep is not None:
            sep = _floats([data[i:j] for i, j in zip(*(f.tolist() for f in field(isep)), strict=True)])
        if pairs is None or outcome is None or sep is None:
            return None
        parts.append((pairs[0::2], pairs[1::2], outcome, sep))
    systems = [name.decode() for name in index]
    if not parts or any(v.decode() not in WINNERS for v in winners) or any(not n.strip() for n in systems):
        return None
    a, b, outcome, sep = (np.concatenate(c) for c in zip(*parts, strict=True))
    if (a == b).any():
        return None
    return Battles(systems, a, b, np.array([WINNERS[v.decode()] for v in winners])[outcome], sep)


def _plain_chunks(buf: np.ndarray, width: int) -> Iterator[Callable[[int], tuple[np.ndarray, np.ndarray]] | None]:
    """A plain CSV file's rows after the header, LINES_PER_CHUNK lines at a time, as a function from a column number
    to the (start, end) byte positions of that column's fields; None for a chunk with a ragged row. Empty lines are
    skipped, as csv.DictReader skips them."""
    ends = np.concatenate(
        [np.flatnonzero(buf[i : i + (8 << 20)] == ord("\n")) + i for i in range(0, len(buf), 8 << 20)]
    )
    if len(buf) > ends[-1] + 1:  # the last line without a line feed
        ends = np.append(ends, len(buf))
    starts, ends = ends[:-1] + 1, ends[1:]
    starts, ends = starts[ends > starts], ends[ends > starts]
    for lo in range(0, len(starts), LINES_PER_CHUNK):
        s, e = starts[lo : lo + LINES_PER_CHUNK], ends[lo : lo + LINES_PER_CHUNK]
        commas = np.flatnonzero(buf[s[0] : e[-1]] == ord(",")) + s[0]
        if (np.searchsorted(commas, e) - np.searchsorted(commas, s) != width - 1).any():  # a ragged row
            yield None
            return
        commas = commas.reshape(len(s), width - 1)

        def field(k: int, s=s, e=e, commas=commas) -> tuple[np.ndarray, np.ndarray]:
            return (s if k == 0 else commas[:, k - 1] + 1), (e if k == width - 1 else commas[:, k])

        yield field


def _plain_counts(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """Fields of decimal digits only (1 to 15 of them) as numbers, all at once; None if any field is anything
    else (empty, a sign, a decimal point, an exponent, too long): the checking reader takes the file then."""
    length = end - start
    if len(length) == 0 or length.min() < 1 or length.max() > 15:
        return None
    width = int(length.max())
    offsets = np.arange(width)
    inside = offsets[None, :] < length[:, None]
    digits = buf[np.minimum(start[:, None] + offsets[None, :], len(buf) - 1)].astype(np.int64) - ord("0")
    if ((digits < 0) | (digits > 9))[inside].any():
        return None
    power = np.where(inside, length[:, None] - 1 - offsets[None, :], 0)
    return (np.where(inside, digits, 0) * 10**power).sum(axis=1).astype(np.float64)


def _distinct_values(buf: np.ndarray, start: np.ndarray, end: np.ndarray, index: dict[bytes, int]) -> np.ndarray | None:
    """The number of each field buf[start:end] in ``index`` (distinct values numbered in order of first
    appearance, new ones added), a chunk of fields at a time: each field's bytes, zero-padded to the chunk's
    longest, are hashed to one integer, and every field is compared byte for byte with the first field of its
    hash, so a hash collision cannot merge two values. None if a field is longer than LONGEST_PLAIN_FIELD."""
    out = np.empty(len(start), dtype=np.int64)
    width = max(8, -(-int((end - start).max()) // 8) * 8)  # bytes per field, a whole number of 8-byte words
    if width > LONGEST_PLAIN_FIELD:
        return None
    rows = max(1, MATRIX_BYTES // (8 * width))
    offsets = np.arange(width)
    for lo in range(0, len(start), rows):
        s, e = start[lo : lo + rows], end[lo : lo + rows]
        length = e - s
        inside = offsets[None, :] < length[:, None]
        matrix = np.where(inside, buf[np.minimum(s[:, None] + offsets[None, :], len(buf) - 1)], 0).astype(np.uint8)
        words = matrix.view(np.uint64)
        multipliers = (np.arange(1, words.shape[1] + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)
        key = (words * multipliers).sum(axis=1, dtype=np.uint64) ^ length.astype(np.uint64)
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        if not (matrix == matrix[first[inverse]]).all():  # a collision: two values share a key
            return None
        numbers = np.empty(len(first), dtype=np.int64)
        for group in np.argsort(first, kind="stable"):  # new values in order of first appearance
            row = first[group]
            numbers[group] = index.setdefault(buf[s[row] : e[row]].tobytes(), len(index))
        out[lo : lo + len(s)] = numbers[inverse]
    return out


def _csv_records(reader: csv.DictReader, problems: list[Problem]) -> Iterator[tuple[int, dict]]:
    """(line number, row) of each record; a record the csv module cannot read ends the file as a problem."""
    try:
        for row in reader:
            yield reader.line_num, row
    except csv.Error as exc:
        problems.append(Problem(reader.line_num, None, f"malformed CSV: {exc}"))


def _csv_columns(lines: Iterable[str]) -> Battles | None:
    """The battles of a CSV file that ``checked_battles`` would accept, read a chunk of rows at a time into
    columns; None as soon as anything needs the row-by-row reading (a problem, a ragged row, a repeated
    column name). Systems are numbered in order of first appearance, model_a before model_b in a row."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if not header or len(set(header)) != len(header) or not all(c in header for c in COLUMNS):
        return None
    width = len(header)
    ia, ib, iw = (header.index(c) for c in COLUMNS)
    isep = header.index("separability") if "separability" in header else None
    index: dict[str, int] = {}
    columns: list[tuple[np.ndarray, ...]] = []
    for chunk in _chunks(reader):
        if set(map(len, chunk)) != {width}:
            chunk = [row for row in chunk if row]  # empty lines are skipped, as csv.DictReader skips them
            if not chunk:
                continue
            if set(map(len, chunk)) != {width}:  # a ragged row
                return None
        first, second = list(map(itemgetter(ia), chunk)), list(map(itemgetter(ib), chunk))
        _number_new_systems(first, second, index)
        a = np.fromiter(map(index.__getitem__, first), dtype=np.int64, count=len(chunk))
        b = np.fromiter(map(index.__getitem__, second), dtype=np.int64, count=len(chunk))
        score = np.fromiter(
            map(WINNERS.get, map(itemgetter(iw), chunk), itertools.repeat(-1.0)), dtype=np.float64, count=len(chunk)
        )
        sep = _floats(list(map(itemgetter(isep), chunk))) if isep is not None else np.full(len(chunk), np.nan)
        if sep is None or (score < 0).any() or (a == b).any():
            return None
        columns.append((a, b, score, sep))
    systems = list(index)
    if not columns or any(not s.strip() for s in systems):
        return None
    a, b, score, sep = (np.concatenate(c) for c in zip(*columns, strict=True))
    return Battles(systems, a, b, score, sep)


def _chunks(reader: Iterator[list[str]]) -> Iterator[list[list[str]]]:
    while chunk := list(itertools.islice(reader, ROWS_PER_CHUNK)):
        yield chunk


def _number_new_systems(first: list[str], second: list[str], index: dict[str, int]) -> None:
    """Number the names not seen before in order of first appearance, model_a before model_b in a row (as
    the row-by-row reading does); most chunks bring none, and are checked by two set operations."""
    if (set(first) | set(second)) - index.keys():
        for name in itertools.chain.from_iterable(zip(first, second, strict=True)):
            index.setdefault(name, len(index))


def _floats(values: list[str] | list[bytes]) -> np.ndarray | None:
    """float() of each value (str or ASCII bytes, which float() reads alike), NaN for an empty one; None if
    any is not a number."""
    try:
        return np.fromiter(map(float, values), dtype=np.float64, count=len(values))
    except ValueError:
        pass
    try:
        return np.array([float(v) if v not in ("", b"") else np.nan for v in values], dtype=np.float64)
    except ValueError:
        return None


STYLE_COLUMNS = tuple(f"{feature}_{side}" for feature in style.FEATURES for side in ("a", "b"))


def style_counts(
    data: bytes, filename: str | None, battles: int, max_bytes: int = 500 * 1024 * 1024
) -> tuple[np.ndarray, np.ndarray]:
    """Arena's style columns of a battles file (``sum_assistant_tokens_a``/``_b``, ``header_count_a``/``_b``,
    ``list_count_a``/``_b``, ``bold_count_a``/``_b``) as counts of each side, (battles, 4) each, in the order the
    battles were read; every missing column and every value that is not a count of zero or more is named by line and
    field. Read after ``parse_battles`` accepted the file (its rows are the battles). A plain CSV file (ASCII, no
    quote characters, line feeds) whose counts are all plain digits is read by splitting it with numpy as
    ``parse_battles`` does and turning each column's digits into numbers at once (10^6 rows: ~0.3 s, against 1.7 s
    with numpy.loadtxt and 5.4 s through the csv module); anything else goes to the checking reader, which reads
    decimals such as "12.0" too and names the problems."""
    fast = _plain_style_counts(data.removeprefix(BOM)) if _is_csv(data, filename) else None
    if fast is not None and len(fast) == battles:
        return fast[:, 0::2], fast[:, 1::2]
    text = decode_upload(data, max_bytes)
    problems: list[Problem] = []
    rows: Iterable[tuple[int, dict]] = ()
    if detect_format(text, filename) == "jsonl":
        rows = jsonl_objects(text, problems)
    else:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        missing = [c for c in STYLE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise FormatError(
                [Problem(1, c, "missing column (style control needs Arena's style columns)") for c in missing]
            )
        rows = _csv_records(reader, problems)
    values = array.array("d")
    for number, row in rows:
        for column in STYLE_COLUMNS:
            value: Any = row.get(column)  # any JSON value or CSV field, None if missing: float() refuses a non-number
            try:
                count = float(value)
            except (TypeError, ValueError):
                count = float("nan")
            if not count >= 0 or count == float("inf"):
                problems.append(Problem(number, column, f"{column} must be a count of zero or more, not {value!r}"))
                count = 0.0
            values.append(count)
    if problems:
        raise FormatError(problems[:50])
    counts = np.frombuffer(values, dtype=np.float64).reshape(-1, 4, 2)
    if len(counts) != battles:
        raise FormatError([Problem(None, None, f"{len(counts)} rows with style columns for {battles} battles")])
    return counts[:, :, 0], counts[:, :, 1]


def _plain_style_counts(data: bytes) -> np.ndarray | None:
    """The style columns of a plain CSV file as (rows, 8) in ``STYLE_COLUMNS`` order, or None (to be read and
    checked row by row)."""
    if b'"' in data or b"\r" in data or b"\x00" in data or not data.isascii():
        return None
    if b"\n" not in data:
        return None
    header = data[: data.find(b"\n")].decode("ascii").split(",")
    if len(set(header)) != len(header) or not all(c in header for c in STYLE_COLUMNS):
        return None
    columns = [header.index(c) for c in STYLE_COLUMNS]
    buf = np.frombuffer(data, dtype=np.uint8)
    parts = []
    for field in _plain_chunks(buf, len(header)):
        if field is None:
            return None
        chunk = [_plain_counts(buf, *field(k)) for k in columns]
        counted = [c for c in chunk if c is not None]
        if len(counted) != len(chunk):
            return None
        parts.append(np.column_stack(counted))
    return np.concatenate(parts) if parts else None
