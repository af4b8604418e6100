"""What every public file (docs/interfaces.md) shares: reading an upload (size, encoding, lines, JSON held to the
standard, CSV rows), the problems a file can have (``FormatError`` lists them all), the limits of what is stored,
and the spreadsheet-formula guard of exported text.

Pure Python (no ORM), like the study files (``study_files.py``) and judgment files (``judgment_files.py``) built
on it."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections.abc import Iterable
from typing import Any

from annotation.text import UNSTORABLE

# The largest whole number every integer column holds on every supported database (PostgreSQL's int4):
# every input is checked against it (imports, forms, the services), so no database driver ever narrows a
# value on the way in.
MAX_STORED_INT = 2_147_483_647

MAX_REPORTED_PROBLEMS = 200


@dataclasses.dataclass(frozen=True)
class Problem:
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field '{self.field}'")
        return f"{', '.join(where)}: {self.message}" if where else self.message


class FormatError(Exception):
    """A file failed validation; ``problems`` lists every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        shown = [str(p) for p in problems[:MAX_REPORTED_PROBLEMS]]
        if len(problems) > MAX_REPORTED_PROBLEMS:
            shown.append(f"... and {len(problems) - MAX_REPORTED_PROBLEMS} more problems")
        super().__init__("\n".join(shown))

    def messages(self) -> list[str]:
        return str(self).split("\n")


def decode_upload(data: bytes, max_bytes: int) -> str:
    """Check size and encoding; return the text without a byte-order mark."""
    check_size(len(data), max_bytes)
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data[:nul].count(b"\n") + 1
        raise FormatError([Problem(line, None, "the file contains a NUL byte; is it a text file (JSONL or CSV)?")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise FormatError(
            [
                Problem(
                    line,
                    None,
                    f"wrong encoding: byte 0x{data[exc.start]:02x} at column {column} is not valid UTF-8; "
                    "save the file as UTF-8",
                )
            ]
        ) from None
    return text.removeprefix("\ufeff")


def detect_format(text: str, filename: str | None) -> str:
    """'jsonl' or 'csv', from the file name when it says, else from the first character."""
    name = (filename or "").lower()
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    return "jsonl" if text.lstrip().startswith("{") else "csv"


MAX_DEPTH = 20


def _depth_and_nul(value: Any, depth: int = 0) -> tuple[int, bool]:
    """(nesting depth, whether any string -- key or value -- holds a character no database can store: NUL or a
    lone surrogate) of a parsed JSON value."""
    if depth > MAX_DEPTH:
        return depth, False
    if isinstance(value, str):
        return depth, UNSTORABLE.search(value) is not None
    if isinstance(value, dict):
        children = [_depth_and_nul(x, depth + 1) for pair in value.items() for x in pair]
    elif isinstance(value, list):
        children = [_depth_and_nul(v, depth + 1) for v in value]
    else:
        return depth, False
    return max([depth, *(d for d, _ in children)]), any(n for _, n in children)


class NotJSON(ValueError):
    """Python's json module accepts it, standard JSON does not (or nothing can store it)."""


def _no_constant(name: str):
    raise NotJSON(f"{name} is not a JSON number (write null, or a finite number)")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NotJSON(f"the number {text[:20]} is too large to store")
    return value


def strict_json(text: str) -> Any:
    """``json.loads`` holding to standard JSON: NaN and Infinity are refused, a float too large to store is
    refused, and a number of more digits than Python converts (4,300) is a clear problem, not a crash."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError | NotJSON):
            raise
        raise NotJSON("a number has more than 4,300 digits") from None


TOO_DEEP = f"JSON nested too deeply (more than {MAX_DEPTH} levels)"
UNSTORABLE_TEXT = (
    "text contains a NUL character (\\u0000) or an unpaired surrogate (\\ud800-\\udfff), which cannot be stored"
)


def stored_json(text: str) -> Any:
    """The one reader of JSON written by people, in a JSONL line or a CSV cell: ``strict_json``, and refused (as
    ``NotJSON`` with the reason) when nested deeper than ``MAX_DEPTH`` (however deep: Python's own recursion limit
    included) or holding a string no database stores (NUL, a lone surrogate). ``json.JSONDecodeError`` for
    malformed JSON."""
    try:
        value = strict_json(text)
    except RecursionError:
        raise NotJSON(TOO_DEEP) from None
    depth, unstorable = _depth_and_nul(value)
    if depth > MAX_DEPTH:
        raise NotJSON(TOO_DEEP)
    if unstorable:
        raise NotJSON(UNSTORABLE_TEXT)
    return value


def file_lines(text: str) -> list[str]:
    """A text file's lines, split at line feeds only (with an optional carriage return before): U+2028,
    U+2029, U+0085 and the other characters ``str.splitlines`` also breaks at are valid inside a JSON string
    and stay in their line."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def jsonl_objects(text: str, problems: list[Problem]) -> Iterable[tuple[int, dict[str, Any]]]:
    """(line number, object) for every JSON-object line; every other line becomes a Problem."""
    for number, raw in enumerate(file_lines(text), start=1):
        if not raw.strip():
            continue
        try:
            value = stored_json(raw)
        except json.JSONDecodeError as exc:
            problems.append(Problem(number, None, f"malformed JSON: {exc.msg} (column {exc.colno})"))
            continue
        except NotJSON as exc:
            problems.append(Problem(number, None, str(exc)))
            continue
        if not isinstance(value, dict):
            problems.append(Problem(number, None, f"each line must be a JSON object, not {type(value).__name__}"))
            continue
        yield number, value


def csv_rows(text: str, problems: list[Problem]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    # A field may be as long as the file (the upload limit caps it): the csv module's own 131,072-character
    # limit would refuse an output JSONL accepts. The limit is process-wide and only ever raised here.
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        first = next(reader, None)
        if first is None:
            return [], []
        header = [h.strip() for h in first]
        start = reader.line_num + 1
        for values in reader:
            line = start
            start = reader.line_num + 1
            if not any(v.strip() for v in values):
                continue
            if len(values) != len(header):
                problems.append(Problem(line, None, f"expected {len(header)} columns, found {len(values)}"))
                continue
            rows.append((line, dict(zip(header, values, strict=True))))
    except csv.Error as exc:
        problems.append(Problem(reader.line_num, None, f"malformed CSV: {exc}"))
    return header, rows


def item_id(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value.strip()
    return None


def check_size(n_bytes: int, max_bytes: int) -> None:
    if n_bytes > max_bytes:
        raise FormatError(
            [Problem(None, None, f"file too large: {n_bytes / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.1f} MB")]
        )


FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _escaped(value: str) -> bool:
    """What ``csv_safe`` produces by adding an apostrophe: one, then a formula character or another one."""
    return value.startswith("'") and value[1:].startswith((*FORMULA_PREFIXES, "'"))


def csv_safe(value: str) -> str:
    """Neutralise spreadsheet formulas in exported text (CSV injection): a cell that starts with
    = + - @ (or a tab / carriage return) gets a leading apostrophe, which spreadsheets show as text. A value
    that would read as already escaped (an apostrophe, then one of those or another apostrophe) gets one too,
    so ``csv_unsafe`` gives every value back exactly."""
    return "'" + value if value.startswith(FORMULA_PREFIXES) or _escaped(value) else value


def csv_unsafe(value: str) -> str:
    """Undo ``csv_safe`` on import, so export -> import stays lossless."""
    return value[1:] if _escaped(value) else value
