"""The public file formats (docs/interfaces.md): parsing with complete validation, and serialisation.

Pure Python (no ORM): parsers take bytes and return either the parsed content or the full list of
problems, each with its line number and field, so a bad file is rejected as a whole and the user
can fix every problem in one go.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from annotation import elicitation
from annotation import questions as question_kinds
from annotation.text import UNSTORABLE, newlines

# The largest whole number every integer column holds on every supported database (PostgreSQL's int4):
# every input is checked against it (imports, forms, the services), so no database driver ever narrows a
# value on the way in.
MAX_STORED_INT = 2_147_483_647

STUDY_FIELDS = ("id", "input", "reference", "outputs", "metadata")
STUDY_CSV_REQUIRED = ("item_id", "input", "system", "sample", "output")
STUDY_CSV_OUTPUT_COLUMNS = ("system", "sample", "output")  # none of them: a file of inputs alone
STUDY_CSV_OPTIONAL = ("reference", "metadata")
RATER_KINDS = ("human", "judge")


@dataclasses.dataclass(frozen=True)
class JudgmentField:
    """One field of the judgment format (docs/interfaces.md#judgment-format). ``kind`` is its type: text, count
    (whole number >= 0), rater_kind, systems (a list of system names), probability, timestamp (ISO 8601), flag
    (true/false) or strength (1 = better, 2 = much better).
    ``nullable``: null is a value; ``exported``: every exported line has it (else only when it applies)."""

    name: str
    kind: str
    nullable: bool = False
    exported: bool = True


# The judgment format, once: import, the JSONL/CSV export (``annotation/exchange/exports.py`` reads each field with
# the reader it names there), the API serializer and the OpenAPI schema all go field by field of this table.
JUDGMENT_SCHEMA = (
    JudgmentField("id", "text"),
    JudgmentField("item", "text"),
    JudgmentField("system_a", "text"),
    JudgmentField("sample_a", "count"),
    JudgmentField("system_b", "text"),
    JudgmentField("sample_b", "count"),
    JudgmentField("shown_first", "text"),
    JudgmentField("rater", "text"),
    JudgmentField("rater_kind", "rater_kind"),
    JudgmentField("choice", "text", nullable=True),  # system_a, system_b or "tie"
    JudgmentField("response_set", "systems", nullable=True),  # [] = no output acceptable ("both are bad")
    JudgmentField("probability_a", "probability", nullable=True),
    JudgmentField("created", "timestamp"),
    JudgmentField("time_on_task_ms", "count", nullable=True),
    JudgmentField("client_time_ms", "count", nullable=True),
    JudgmentField("assignment", "count", exported=False),  # the SepLab assignment, for judgments collected here
    JudgmentField("superseded", "flag"),
    # Extensions after the format's original fields (docs/interfaces.md#extensions; CSV columns are appended, so
    # readers by position keep working):
    # the 5-point preference scale's strength of the choice.
    JudgmentField("strength", "strength", nullable=True),
    # the rater's optional comment on the pair (null without one)
    JudgmentField("comment", "text", nullable=True),
    # true: the rater replaced this answer with a later one on the same pair (kept, not analysed)
    JudgmentField("revised", "flag"),
    # the answers to the study's further questions (annotation/questions.py), by question key: a preference as
    # {"choice", "response_set", "strength"} in system names like the main answer, a rationale as {"text"}
    JudgmentField("answers", "answers", nullable=True, exported=False),
)
COMMENT_MAX_CHARS = 2000  # a rater's comment, in the form and in imported files
STRENGTHS = tuple(elicitation.STRENGTHS)
JUDGMENT_FIELDS = tuple(f.name for f in JUDGMENT_SCHEMA)
# Fields stored in their own columns on import; any other field of a line is kept verbatim in
# ``Judgment.extra`` (the assignment id of another study is only meaningful as such a note).
PARSED_JUDGMENT_FIELDS = frozenset(JUDGMENT_FIELDS) - {"assignment"}
# The CSV layout of judgments: the JSONL fields in order, lists and extra fields as JSON text.
JUDGMENT_CSV_COLUMNS = JUDGMENT_FIELDS + ("extra",)
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


@dataclasses.dataclass
class ParsedItem:
    external_id: str
    input: str
    reference: str
    metadata: dict[str, Any]
    outputs: dict[str, list[str]]
    line: int


@dataclasses.dataclass
class ParsedStudy:
    systems: list[str]
    items: list[ParsedItem]

    @property
    def warnings(self) -> list[Problem]:
        """What imports but deserves a look: empty outputs (a model that answered nothing is real data; it
        loses its comparisons, and raters see it marked "(empty output)")."""
        return [
            Problem(item.line, f"outputs.{system}[{k}]", f"empty output of item {item.external_id}")
            for item in self.items
            for system, samples in item.outputs.items()
            for k, text in enumerate(samples)
            if not text.strip()
        ]


# --------------------------------------------------------------------------------------------
# Shared helpers


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


def _csv_rows(text: str, problems: list[Problem]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    # A field may be as long as the file (the upload limit caps it): the csv module's own 131,072-character
    # limit would refuse an output JSONL accepts. The limit is process-wide and only ever raised here.
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, dict[str, str]]] = []
    try:
        header = next(reader, None)
        if header is None:
            return [], []
        header = [h.strip() for h in header]
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


def _item_id(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value.strip()
    return None


# --------------------------------------------------------------------------------------------
# Study import


def parse_study(data: bytes, filename: str | None = None, *, max_bytes: int = 50 * 1024 * 1024) -> ParsedStudy:
    """Parse a study file (JSONL or the long CSV form) and validate it completely.

    Raises ``FormatError`` listing every problem (line, field, reason); returns a ``ParsedStudy``
    only when the whole file is valid.
    """
    text = decode_upload(data, max_bytes)
    problems: list[Problem] = []
    if detect_format(text, filename) == "jsonl":
        items = _parse_study_jsonl(text, problems)
    else:
        items = _parse_study_csv(text, problems)
    if not items and not problems:
        problems.append(Problem(None, None, "the file contains no items"))
    systems = _study_systems(items, problems)
    if problems:
        # what would import with a warning is listed too, so a file is fixed in one go
        problems += [
            Problem(w.line, w.field, f"{w.message} (a warning only: this alone would import)")
            for w in ParsedStudy(systems, items).warnings
        ]
        problems.sort(key=lambda p: (p.line is None, p.line or 0))  # file-wide problems last
        raise FormatError(problems)
    for item in items:  # one line ending (annotation/text.py): "\r\n" from a Windows file is the same text
        item.input, item.reference = newlines(item.input), newlines(item.reference)
        item.outputs = {system: [newlines(t) for t in samples] for system, samples in item.outputs.items()}
    return ParsedStudy(systems=systems, items=items)


def _study_systems(items: list[ParsedItem], problems: list[Problem]) -> list[str]:
    """The study's systems: those that at least half of the items have outputs from. A system only a
    minority of items mention is reported on those lines as unknown (usually a typo), rather than as
    missing from every other line."""
    counts: dict[str, int] = {}
    for item in items:
        for name in item.outputs:
            counts[name] = counts.get(name, 0) + 1
    systems = [name for name, n in counts.items() if 2 * n >= len(items)]
    for item in items:
        for name in item.outputs:
            if name not in systems:
                problems.append(
                    Problem(
                        item.line, f"outputs.{name}", f"unknown system '{name}' (most items use: {', '.join(systems)})"
                    )
                )
        for name in systems:
            if item.outputs and name not in item.outputs:  # none at all: said once, as missing outputs
                problems.append(
                    Problem(item.line, "outputs", f"missing system '{name}' (other items have outputs from it)")
                )
    if items and not counts:
        return []  # a file of inputs alone: the systems come from endpoints (annotation/generating)
    if items and len(systems) < 2:
        problems.append(
            Problem(None, None, f"a study needs outputs of at least two systems; found {len(systems)}: {systems}")
        )
    return systems


def check_size(n_bytes: int, max_bytes: int) -> None:
    if n_bytes > max_bytes:
        raise FormatError(
            [Problem(None, None, f"file too large: {n_bytes / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.1f} MB")]
        )


def _parse_study_jsonl(text: str, problems: list[Problem]) -> list[ParsedItem]:
    items: list[ParsedItem] = []
    seen: dict[str, int] = {}
    for line, obj in jsonl_objects(text, problems):
        before = len(problems)
        for key in obj:
            if key not in STUDY_FIELDS:
                problems.append(Problem(line, key, f"unknown field (allowed: {', '.join(STUDY_FIELDS)})"))
        external_id = None
        if "id" not in obj or obj["id"] is None:
            problems.append(Problem(line, "id", "missing id"))
        else:
            external_id = _item_id(obj["id"])
            if external_id is None:
                problems.append(Problem(line, "id", "id must be a string or an integer"))
            elif not external_id:
                problems.append(Problem(line, "id", "empty id"))
            elif len(external_id) > 200:
                problems.append(Problem(line, "id", "id longer than 200 characters"))
            elif external_id in seen:
                first = seen[external_id]
                problems.append(Problem(line, "id", f"duplicate id '{external_id}' (first on line {first})"))
            else:
                seen[external_id] = line
        source = obj.get("input")
        if source is None:
            problems.append(Problem(line, "input", "missing input"))
        elif not isinstance(source, str):
            problems.append(Problem(line, "input", "input must be a string"))
        elif not source.strip():
            problems.append(Problem(line, "input", "empty input"))
        reference = obj.get("reference") or ""
        if not isinstance(reference, str):
            problems.append(Problem(line, "reference", "reference must be a string"))
        metadata = obj.get("metadata") or {}
        if not isinstance(metadata, dict):
            problems.append(Problem(line, "metadata", "metadata must be a JSON object"))
        outputs = _validate_outputs(obj["outputs"], line, problems) if "outputs" in obj else None
        if len(problems) == before:
            items.append(ParsedItem(external_id, source, reference, metadata, outputs, line))  # type: ignore[arg-type]
    without = [item for item in items if item.outputs is None]
    if len(without) < len(items):  # some items have outputs: every item needs them
        problems += [
            Problem(
                item.line,
                "outputs",
                "missing outputs (other items have them; a file of inputs alone, "
                "for outputs generated from endpoints, has none)",
            )
            for item in without
        ]
    for item in without:
        item.outputs = {}
    return items


def _validate_outputs(outputs: Any, line: int, problems: list[Problem]) -> dict[str, list[str]]:
    if outputs is None:
        problems.append(Problem(line, "outputs", "outputs is null: leave the field out for a file of inputs alone"))
        return {}
    if not isinstance(outputs, dict) or not outputs:
        problems.append(Problem(line, "outputs", 'outputs must be a non-empty object {"system": ["sample 0", ...]}'))
        return {}
    clean: dict[str, list[str]] = {}
    for system, samples in outputs.items():
        field = f"outputs.{system}"
        if not system.strip():
            problems.append(Problem(line, "outputs", "empty system name"))
            continue
        if len(system) > 200:
            problems.append(Problem(line, field, "system name longer than 200 characters"))
            continue
        if not isinstance(samples, list) or not samples:
            problems.append(Problem(line, field, "must be a non-empty list of output strings"))
            continue
        for index, sample in enumerate(samples):
            if not isinstance(sample, str):
                problems.append(Problem(line, f"{field}[{index}]", "output must be a string"))
        clean[system] = samples
    return clean


def _csv_metadata(row: dict, line: int, problems: list[Problem]) -> Any:
    """A CSV row's optional ``metadata`` column: a JSON object, or the problem with it."""
    metadata: Any = {}
    if row.get("metadata", "").strip():
        try:
            metadata = stored_json(row["metadata"])
        except json.JSONDecodeError as exc:
            problems.append(Problem(line, "metadata", f"malformed JSON: {exc.msg}"))
        except NotJSON as exc:
            problems.append(Problem(line, "metadata", str(exc)))
        else:
            if not isinstance(metadata, dict):
                problems.append(Problem(line, "metadata", "metadata must be a JSON object"))
    return metadata


def _parse_inputs_csv(header: list[str], rows, problems: list[Problem]) -> list[ParsedItem]:
    """A CSV of inputs alone (``item_id``, ``input``, optional ``reference`` and ``metadata``; no system, sample or
    output columns): one item per row, its outputs generated from endpoints later."""
    for column in header:
        if column not in ("item_id", "input", "reference", "metadata"):
            problems.append(
                Problem(1, column, "unknown column (a file of inputs alone has item_id, input, reference, metadata)")
            )
    items: list[ParsedItem] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        before = len(problems)
        external_id = row["item_id"].strip()
        if not external_id:
            problems.append(Problem(line, "item_id", "missing id"))
        elif len(external_id) > 200:
            problems.append(Problem(line, "item_id", "id longer than 200 characters"))
        elif external_id in seen:
            problems.append(
                Problem(line, "item_id", f"duplicate id '{external_id}' (first on line {seen[external_id]})")
            )
        else:
            seen[external_id] = line
        if not row["input"].strip():
            problems.append(Problem(line, "input", "empty input"))
        metadata = _csv_metadata(row, line, problems)
        if len(problems) == before:
            items.append(ParsedItem(external_id, row["input"], row.get("reference", ""), metadata, {}, line))
    return items


def _parse_study_csv(text: str, problems: list[Problem]) -> list[ParsedItem]:
    header, rows = _csv_rows(text, problems)
    if not header:
        return []
    if not any(c in header for c in STUDY_CSV_OUTPUT_COLUMNS) and all(c in header for c in ("item_id", "input")):
        return _parse_inputs_csv(header, rows, problems)
    missing = [c for c in STUDY_CSV_REQUIRED if c not in header]
    unknown = [c for c in header if c not in STUDY_CSV_REQUIRED + STUDY_CSV_OPTIONAL]
    for column in missing:
        problems.append(Problem(1, column, "missing column (required: " + ", ".join(STUDY_CSV_REQUIRED) + ")"))
    for column in unknown:
        problems.append(Problem(1, column, "unknown column"))
    if missing:
        return []
    by_id: dict[str, ParsedItem] = {}
    sample_lines: dict[tuple[str, str], dict[int, int]] = {}
    for line, row in rows:
        external_id = row["item_id"].strip()
        system = row["system"].strip()
        ok = True
        if not external_id:
            problems.append(Problem(line, "item_id", "missing id"))
            ok = False
        if not row["input"].strip():
            problems.append(Problem(line, "input", "empty input"))
            ok = False
        if not system:
            problems.append(Problem(line, "system", "missing system"))
            ok = False
        try:
            sample = int(row["sample"])
            if not 0 <= sample <= MAX_STORED_INT:
                raise ValueError
        except ValueError:
            problems.append(
                Problem(
                    line, "sample", f"sample must be a whole number from 0 to {MAX_STORED_INT}, not '{row['sample']}'"
                )
            )
            ok = False
        before = len(problems)
        metadata = _csv_metadata(row, line, problems)
        if not ok or len(problems) > before:
            continue
        item = by_id.get(external_id)
        if item is None:
            item = by_id[external_id] = ParsedItem(
                external_id, row["input"], row.get("reference", ""), metadata, {}, line
            )
        elif item.input != row["input"]:
            problems.append(Problem(line, "input", f"differs from line {item.line} for item '{external_id}'"))
            continue
        samples = sample_lines.setdefault((external_id, system), {})
        if sample in samples:
            problems.append(
                Problem(
                    line,
                    "sample",
                    f"duplicate sample {sample} of '{system}' for item '{external_id}' "
                    f"(first on line {samples[sample]})",
                )
            )
            continue
        samples[sample] = line
        item.outputs.setdefault(system, []).append((sample, row["output"]))  # type: ignore[arg-type]
    items = list(by_id.values())
    for item in items:
        for system, indexed in list(item.outputs.items()):
            indices = sorted(i for i, _ in indexed)  # type: ignore[misc]
            if indices != list(range(len(indices))):
                problems.append(
                    Problem(
                        item.line,
                        "sample",
                        f"samples of '{system}' for item '{item.external_id}' are "
                        f"{indices}; expected 0..{len(indices) - 1} without gaps",
                    )
                )
            item.outputs[system] = [text for _, text in sorted(indexed)]  # type: ignore[misc]
    return items


# --------------------------------------------------------------------------------------------
# Judgment import / export


@dataclasses.dataclass
class ParsedJudgment:
    key: str
    item: str
    system_a: str
    sample_a: int
    system_b: str
    sample_b: int
    shown_first: str
    rater: str
    rater_kind: str
    choice: str | None
    response_set: list[str] | None
    probability_a: float | None
    strength: int | None
    comment: str
    created: datetime | None
    time_on_task_ms: int | None
    client_time_ms: int | None
    superseded: bool
    revised: bool
    extra: dict[str, Any]
    line: int
    answers: dict[str, dict] = dataclasses.field(default_factory=dict)


def judgment_key(obj: Mapping[str, Any]) -> str:
    """Idempotency key of a judgment line: its ``id``, else a hash of its canonical JSON, so that
    importing the same file twice adds nothing."""
    if isinstance(obj.get("id"), str) and obj["id"].strip():
        return obj["id"].strip()
    canonical = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:57]


def parse_judgments(
    data: bytes,
    filename: str | None,
    samples: Mapping[str, Mapping[str, int]],
    *,
    rater_kinds: Mapping[str, str] | None = None,
    questions: Mapping[str, str] | None = None,
    max_bytes: int = 50 * 1024 * 1024,
) -> list[ParsedJudgment]:
    """Parse and validate a judgments file (JSONL, or the CSV export layout) against a study.

    ``samples`` maps item id -> system name -> number of samples K; ``rater_kinds`` maps the
    study's existing raters to their kind; ``questions`` maps the study's further questions' keys to how each is
    answered (``annotation/questions.py``: a mode's name, or a rationale). Raises ``FormatError`` with every
    problem.
    """
    text = decode_upload(data, max_bytes)
    problems: list[Problem] = []
    if detect_format(text, filename) == "jsonl":
        lines = list(jsonl_objects(text, problems))
    else:
        lines = _judgment_csv_lines(text, problems)
    rater_kinds = dict(rater_kinds or {})
    parsed: list[ParsedJudgment] = []
    keys: dict[str, int] = {}
    for line, obj in lines:
        judgment = _parse_judgment(line, obj, samples, rater_kinds, problems, dict(questions or {}))
        if judgment is None:
            continue
        if judgment.key in keys:
            message = f"same judgment as line {keys[judgment.key]} (give each a distinct id)"
            problems.append(Problem(line, "id", message))
            continue
        keys[judgment.key] = line
        parsed.append(judgment)
    if not parsed and not problems:
        problems.append(Problem(None, None, "the file contains no judgments"))
    if problems:
        raise FormatError(problems)
    return parsed


CSV_INTEGER = re.compile(r"-?[0-9]{1,18}")


def _judgment_csv_lines(text: str, problems: list[Problem]) -> list[tuple[int, dict[str, Any]]]:
    header, rows = _csv_rows(text, problems)
    out: list[tuple[int, dict[str, Any]]] = []
    for line, row in rows:
        obj: dict[str, Any] = {}
        for column, value in row.items():
            value = csv_unsafe(value)
            if value == "":
                continue
            if column in ("response_set", "extra", "answers"):
                try:
                    obj[column] = stored_json(value)
                except json.JSONDecodeError as exc:
                    problems.append(Problem(line, column, f"malformed JSON: {exc.msg}"))
                except NotJSON as exc:
                    problems.append(Problem(line, column, str(exc)))
            elif column in ("sample_a", "sample_b", "time_on_task_ms", "client_time_ms", "assignment", "strength"):
                # ASCII digits only (int() would also take '²' or '٣'); anything else stays text, and the field's
                # own check names it
                obj[column] = int(value) if CSV_INTEGER.fullmatch(value.strip()) else value
            elif column == "probability_a":
                try:
                    obj[column] = float(value)
                except ValueError:
                    obj[column] = value
            elif column in ("superseded", "revised"):
                obj[column] = value.strip().lower() in ("true", "1", "yes")
            else:
                obj[column] = value
        extra = obj.pop("extra", None)
        if isinstance(extra, dict):
            obj = {**extra, **obj}
        elif extra is not None:
            problems.append(Problem(line, "extra", "extra must be a JSON object"))
        out.append((line, obj))
    return out


@dataclasses.dataclass
class _Line:
    """One judgment line being checked: its number, its object, and the problems found so far."""

    number: int
    obj: dict[str, Any]
    problems: list[Problem]

    def problem(self, field: str | None, message: str) -> None:
        self.problems.append(Problem(self.number, field, message))

    def string(self, field: str) -> str:
        value = self.obj.get(field)
        if value is None or (isinstance(value, str) and not value.strip()):
            self.problem(field, f"missing {field}")
            return ""
        if not isinstance(value, str):
            self.problem(field, f"{field} must be a string")
            return ""
        return value.strip()

    def count(self, field: str, default: int | None = None) -> int | None:
        """A whole number >= 0; ``default`` when the field is absent. An explicit null is allowed only
        where the default is None."""
        value = self.obj.get(field, default)
        if (value is None and default is not None) or (
            value is not None
            and (isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > MAX_STORED_INT)
        ):
            self.problem(field, f"{field} must be a whole number from 0 to {MAX_STORED_INT}")
        return value


def _judged_pair(line: _Line, samples: Mapping[str, Mapping[str, int]]) -> tuple[str | None, str, str, dict]:
    """The item, both systems and both sample indices, checked against the study."""
    item = _item_id(line.obj.get("item"))
    if not item:
        line.problem("item", "missing item")
    elif item not in samples:
        line.problem("item", f"unknown item '{item}'")
        item = None
    system_a, system_b = line.string("system_a"), line.string("system_b")
    known = samples.get(item or "", {})
    for field, system in (("system_a", system_a), ("system_b", system_b)):
        if system and item and system not in known:
            line.problem(field, f"unknown system '{system}'")
    if system_a and system_a == system_b:
        line.problem("system_b", "system_b must differ from system_a")
    sample_idx = {}
    for field, system in (("sample_a", system_a), ("sample_b", system_b)):
        before = len(line.problems)
        value = line.count(field, 0)
        if len(line.problems) == before and system in known and value >= known[system]:
            line.problem(field, f"item '{item}' has {known[system]} sample(s) of '{system}'; {value} is out of range")
        sample_idx[field] = value
    return item, system_a, system_b, sample_idx


def _judging_rater(line: _Line, system_a: str, system_b: str, rater_kinds: dict[str, str]) -> tuple[str, str, str]:
    """Which system was shown first, the rater and its kind (one kind per rater across the file)."""
    shown_first = line.string("shown_first")
    if shown_first and shown_first not in (system_a, system_b):
        line.problem("shown_first", "shown_first must be system_a or system_b")
    rater, rater_kind = line.string("rater"), line.string("rater_kind")
    if len(rater) > 200:
        line.problem("rater", "rater longer than 200 characters")
    if rater_kind and rater_kind not in RATER_KINDS:
        line.problem("rater_kind", "rater_kind must be 'human' or 'judge'")
    elif rater and rater_kind and rater_kinds.setdefault(rater, rater_kind) != rater_kind:
        line.problem("rater_kind", f"rater '{rater}' is already a {rater_kinds[rater]}, not a {rater_kind}")
    return shown_first, rater, rater_kind


def _answer(line: _Line, code_of: dict[str, str]) -> tuple[Any, Any, Any, Any]:
    """The choice, response set, P(A) and strength as given (system names), each checked; one of the first
    three is needed."""
    choice, response_set, probability_a, strength = (
        line.obj.get(f) for f in ("choice", "response_set", "probability_a", "strength")
    )
    chosen_system = isinstance(choice, str) and choice in code_of
    if choice is not None and not (chosen_system or choice == "tie"):
        line.problem("choice", "choice must be system_a, system_b, 'tie' or null")
    if response_set is not None and (
        not isinstance(response_set, list)
        or any(not isinstance(s, str) or s not in code_of for s in response_set)
        or len(set(response_set)) != len(response_set)
    ):
        line.problem(
            "response_set",
            "response_set must be a list of distinct systems of the pair ([] when neither is acceptable), or null",
        )
    if strength is not None and (
        not isinstance(strength, int) or isinstance(strength, bool) or strength not in STRENGTHS
    ):
        line.problem("strength", "strength must be 1 (better), 2 (much better) or null")
    elif strength is not None and not chosen_system:
        line.problem("strength", "strength needs a choice of system_a or system_b")
    if probability_a is not None and (
        isinstance(probability_a, bool) or not isinstance(probability_a, int | float) or not 0 <= probability_a <= 1
    ):
        line.problem("probability_a", "probability_a must be a number from 0 to 1, or null")
    if choice is None and response_set is None and probability_a is None:
        line.problem(None, "a judgment needs a choice, a response_set or a probability_a")
    return choice, response_set, probability_a, strength


def _further_answers(line: _Line, code_of: dict[str, str], questions: dict[str, str]) -> dict[str, dict]:
    """The answers to the study's further questions (``answers``: key -> answer), checked and in model
    coordinates. A preference is given like the main answer (``choice``, ``response_set``, ``strength`` with system
    names), a rationale as ``{"text": ...}``. A line may leave any question out (judges answer only the main one)."""
    given = line.obj.get("answers")
    if given is None:
        return {}
    if not isinstance(given, dict):
        line.problem("answers", "answers must be an object: question key -> answer")
        return {}
    out: dict[str, dict] = {}
    for key, answer in given.items():
        field = f"answers.{key}"
        if key not in questions:
            asked = ", ".join(sorted(questions)) or "none"
            line.problem(field, f"this study asks no further question '{key}' (its further questions: {asked})")
            continue
        if not isinstance(answer, dict):
            line.problem(field, f"{field} must be an object")
            continue
        if questions[key] in (question_kinds.RATIONALE, question_kinds.OPTIONAL_RATIONALE):
            text = answer.get("text")
            if (
                set(answer) != {"text"}
                or not isinstance(text, str)
                or not text.strip()
                or len(text) > question_kinds.RATIONALE_MAX_CHARS
            ):
                line.problem(
                    field, f'{field} must be {{"text": ...}} with 1 to {question_kinds.RATIONALE_MAX_CHARS} characters'
                )
                continue
            out[key] = {"text": text.strip()}
            continue
        unknown = set(answer) - {"choice", "response_set", "strength"}
        if unknown:
            line.problem(field, f"{field} has unknown fields: {', '.join(sorted(unknown))}")
            continue
        inner = _Line(line.number, answer, [])
        choice, response_set, probability_a, strength = _answer(inner, code_of)
        for problem in inner.problems:
            line.problem(
                f"{field}.{problem.field}" if problem.field else field,
                problem.message.replace(
                    "a judgment needs a choice, a response_set or a probability_a",
                    "an answer needs a choice or a response_set",
                ),
            )
        if not inner.problems:
            out[key] = {
                "choice": None if choice is None else ("tie" if choice == "tie" else code_of[choice]),
                "response_set": None if response_set is None else [code_of[s] for s in response_set],
                "strength": strength,
            }
    return out


def _comment(line: _Line) -> str:
    comment = line.obj.get("comment")
    if comment is None:
        return ""
    if not isinstance(comment, str) or len(comment) > COMMENT_MAX_CHARS:
        line.problem("comment", f"comment must be text of at most {COMMENT_MAX_CHARS} characters, or null")
        return ""
    return comment


def _when(line: _Line) -> tuple[datetime | None, dict[str, int | None], Any]:
    """The creation time (ISO 8601 with a time zone), the time-on-task fields and the superseded and revised
    flags."""
    created = None
    if line.obj.get("created") is not None:
        try:
            created = datetime.fromisoformat(str(line.obj["created"]))
            if created.tzinfo is None:
                line.problem("created", "created needs a time zone, e.g. 2026-01-01T12:00:00Z")
            else:
                created.astimezone(UTC)  # stored in UTC: it must be a date-time there too
        except ValueError:
            line.problem("created", "created must be an ISO 8601 date-time, e.g. 2026-01-01T12:00:00Z")
        except OverflowError:
            line.problem(
                "created",
                "created is outside the representable range: in UTC it must fall between 0001-01-01 and 9999-12-31",
            )
    times = {field: line.count(field) for field in ("time_on_task_ms", "client_time_ms")}
    flags = {name: line.obj.get(name, False) for name in ("superseded", "revised")}
    for name, value in flags.items():
        if not isinstance(value, bool):
            line.problem(name, f"{name} must be true or false")
    return created, times, flags


def _parse_judgment(
    number: int,
    obj: dict[str, Any],
    samples: Mapping[str, Mapping[str, int]],
    rater_kinds: dict[str, str],
    problems: list[Problem],
    questions: dict[str, str] | None = None,
) -> ParsedJudgment | None:
    """One judgment line in the judgment format (docs/interfaces.md#judgment-format), every problem reported with
    its line and field."""
    before = len(problems)
    line = _Line(number, obj, problems)
    item, system_a, system_b, sample_idx = _judged_pair(line, samples)
    shown_first, rater, rater_kind = _judging_rater(line, system_a, system_b, rater_kinds)
    code_of = {system_a: "a", system_b: "b"}
    choice, response_set, probability_a, strength = _answer(line, code_of)
    further = _further_answers(line, code_of, questions or {})
    created, times, flags = _when(line)
    key = judgment_key(obj)
    if len(key) > 64:
        line.problem("id", "id longer than 64 characters")
    if len(problems) != before:
        return None
    return ParsedJudgment(
        key=key,
        item=item,
        system_a=system_a,
        sample_a=sample_idx["sample_a"],
        system_b=system_b,
        sample_b=sample_idx["sample_b"],
        shown_first=shown_first,
        rater=rater,
        rater_kind=rater_kind,
        choice=None if choice is None else ("tie" if choice == "tie" else code_of[choice]),
        response_set=None if response_set is None else [code_of[s] for s in response_set],
        probability_a=None if probability_a is None else float(probability_a),
        strength=strength,
        comment=_comment(line),
        created=created,
        time_on_task_ms=times["time_on_task_ms"],
        client_time_ms=times["client_time_ms"],
        superseded=flags["superseded"],
        revised=flags["revised"],
        extra={k: v for k, v in obj.items() if k not in PARSED_JUDGMENT_FIELDS},
        line=number,
        answers=further,
    )


def format_timestamp(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


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


def judgment_csv_row(line: Mapping[str, Any]) -> list[str]:
    """One exported judgment (the JSONL object) as a CSV row in ``JUDGMENT_CSV_COLUMNS`` order."""
    extra = {k: v for k, v in line.items() if k not in JUDGMENT_FIELDS}
    row = []
    for column in JUDGMENT_FIELDS:
        value = line.get(column)
        if value is None:
            row.append("")
        elif column in ("response_set", "answers"):
            row.append(json.dumps(value, ensure_ascii=False))
        elif isinstance(value, bool):
            row.append("true" if value else "false")
        elif isinstance(value, str):
            row.append(csv_safe(value))
        else:
            row.append(str(value))
    row.append(csv_safe(json.dumps(extra, ensure_ascii=False, sort_keys=True)) if extra else "")
    return row
