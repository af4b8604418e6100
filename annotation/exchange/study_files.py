"""The study file (docs/interfaces.md#study-file: JSONL, or the long CSV form; or inputs alone, for outputs generated
from endpoints): parsing with complete validation.

Pure Python (no ORM): ``parse_study`` takes bytes and returns either the parsed study or the full list of
problems, each with its line number and field, so a bad file is rejected as a whole and the user can fix every
problem in one go."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from annotation import conversations
from annotation.exchange.rules import (
    MAX_STORED_INT,
    FormatError,
    NotJSON,
    Problem,
    csv_rows,
    decode_upload,
    detect_format,
    item_id,
    jsonl_objects,
    stored_json,
)
from annotation.text import newlines

STUDY_FIELDS = ("id", "input", "messages", "reference", "outputs", "metadata")
STUDY_CSV_REQUIRED = ("item_id", "input", "system", "sample", "output")  # "messages" may stand for "input"
STUDY_CSV_OUTPUT_COLUMNS = ("system", "sample", "output")  # none of them: a file of inputs alone
STUDY_CSV_OPTIONAL = ("reference", "metadata")
MAX_TEXT_CHARS = 100_000  # an input, reference or output, in characters (the default of SEPLAB_MAX_TEXT_CHARS)


def _check_length(text: object, limit: int, line: int, field: str, problems: list[Problem]) -> None:
    """A text longer than ``limit`` characters is a problem of its line and field."""
    if isinstance(text, str) and len(text) > limit:
        what = "output" if field.startswith("output") else field
        problems.append(
            Problem(
                line,
                field,
                f"{what} is {len(text):,} characters long; the limit is {limit:,} (SEPLAB_MAX_TEXT_CHARS): "
                "shorten it or leave the item out",
            )
        )


@dataclasses.dataclass
class ParsedItem:
    external_id: str
    input: str
    reference: str
    metadata: dict[str, Any]
    outputs: dict[str, list[str]]
    line: int
    messages: list[dict[str, str]] | None = (
        None  # a conversation (annotation/conversations.py); input is its transcript
    )


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


def parse_study(
    data: bytes,
    filename: str | None = None,
    *,
    max_bytes: int = 50 * 1024 * 1024,
    max_text_chars: int = MAX_TEXT_CHARS,
) -> ParsedStudy:
    """Parse a study file (JSONL or the long CSV form) and validate it completely: every input, reference and output
    at most ``max_text_chars`` characters.

    Raises ``FormatError`` listing every problem (line, field, reason); returns a ``ParsedStudy``
    only when the whole file is valid.
    """
    text = decode_upload(data, max_bytes)
    problems: list[Problem] = []
    if detect_format(text, filename) == "jsonl":
        items = _parse_study_jsonl(text, problems, max_text_chars)
    else:
        items = _parse_study_csv(text, problems, max_text_chars)
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
        if item.messages:
            item.messages = [{"role": t["role"], "content": newlines(t["content"])} for t in item.messages]
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


def _parse_study_jsonl(text: str, problems: list[Problem], limit: int) -> list[ParsedItem]:
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
            external_id = item_id(obj["id"])
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
        source, messages = obj.get("input"), None
        if "messages" in obj:
            if "input" in obj:
                problems.append(Problem(line, "messages", "give input or messages (a conversation), not both"))
            else:
                messages, found = conversations.check_messages(obj["messages"], limit)
                problems += [Problem(line, field, reason) for field, reason in found]
                source = conversations.transcript(messages) if messages else ""
        elif source is None:
            problems.append(Problem(line, "input", "missing input (or messages, a conversation)"))
        elif not isinstance(source, str):
            problems.append(Problem(line, "input", "input must be a string"))
        elif not source.strip():
            problems.append(Problem(line, "input", "empty input"))
        _check_length(source, limit, line, "input", problems)
        reference = obj.get("reference") or ""
        if not isinstance(reference, str):
            problems.append(Problem(line, "reference", "reference must be a string"))
        _check_length(reference, limit, line, "reference", problems)
        metadata = obj.get("metadata") or {}
        if not isinstance(metadata, dict):
            problems.append(Problem(line, "metadata", "metadata must be a JSON object"))
        outputs = _validate_outputs(obj["outputs"], line, problems, limit) if "outputs" in obj else None
        if len(problems) == before:
            items.append(ParsedItem(external_id, source, reference, metadata, outputs, line, messages or None))  # type: ignore[arg-type]
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


def _validate_outputs(outputs: Any, line: int, problems: list[Problem], limit: int) -> dict[str, list[str]]:
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
        if system != system.strip():
            # a judgments file names systems without it (its names are read stripped), so export -> import would
            # no longer find this one
            problems.append(
                Problem(
                    line,
                    field,
                    f"system name {system!r} starts or ends with white space (a space, tab or line break); "
                    f"write it as {system.strip()!r}",
                )
            )
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
            _check_length(sample, limit, line, f"{field}[{index}]", problems)
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


def _row_input(row: dict, line: int, problems: list[Problem], limit: int) -> tuple[str, list[dict[str, str]] | None]:
    """A CSV row's input: its ``input`` column, or its ``messages`` column (a conversation as JSON text, checked by
    ``conversations.check_messages``) read as the conversation's transcript; ("", None) with the problems said."""
    if "messages" not in row:
        if not row["input"].strip():
            problems.append(Problem(line, "input", "empty input"))
        return row["input"], None
    try:
        value = stored_json(row["messages"])
    except json.JSONDecodeError as exc:
        problems.append(Problem(line, "messages", f"malformed JSON: {exc.msg}"))
        return "", None
    except NotJSON as exc:
        problems.append(Problem(line, "messages", str(exc)))
        return "", None
    messages, found = conversations.check_messages(value, limit)
    problems += [Problem(line, field, reason) for field, reason in found]
    return (conversations.transcript(messages), messages) if messages else ("", None)


def _input_columns(header: list[str], problems: list[Problem]) -> list[str]:
    """The header with ``messages`` standing for ``input`` (a file of conversations); both at once is a problem."""
    if "messages" in header and "input" in header:
        problems.append(Problem(1, "messages", "give an input column or a messages column (conversations), not both"))
    return [("input" if c == "messages" else c) for c in header]


def _parse_inputs_csv(header: list[str], rows, problems: list[Problem], limit: int) -> list[ParsedItem]:
    """A CSV of inputs alone (``item_id``, ``input`` or ``messages``, optional ``reference`` and ``metadata``; no
    system, sample or output columns): one item per row, its outputs generated from endpoints later."""
    for column in header:
        if column not in ("item_id", "input", "messages", "reference", "metadata"):
            problems.append(
                Problem(
                    1,
                    column,
                    "unknown column (a file of inputs alone has item_id, input or messages, reference, metadata)",
                )
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
        text, messages = _row_input(row, line, problems, limit)
        for column in ("input", "reference"):
            _check_length(row.get(column), limit, line, column, problems)
        metadata = _csv_metadata(row, line, problems)
        if len(problems) == before:
            items.append(ParsedItem(external_id, text, row.get("reference", ""), metadata, {}, line, messages))
    return items


def _parse_study_csv(text: str, problems: list[Problem], limit: int) -> list[ParsedItem]:
    header, rows = csv_rows(text, problems)
    if not header:
        return []
    columns = _input_columns(header, problems)
    if not any(c in header for c in STUDY_CSV_OUTPUT_COLUMNS) and all(c in columns for c in ("item_id", "input")):
        return _parse_inputs_csv(header, rows, problems, limit)
    missing = [c for c in STUDY_CSV_REQUIRED if c not in columns]
    unknown = [c for c in header if c not in STUDY_CSV_REQUIRED + STUDY_CSV_OPTIONAL + ("messages",)]
    for column in missing:
        problems.append(Problem(1, column, "missing column (required: " + ", ".join(STUDY_CSV_REQUIRED) + ")"))
    for column in unknown:
        problems.append(Problem(1, column, "unknown column"))
    if missing:
        return []
    by_id: dict[str, ParsedItem] = {}
    indexed: dict[str, dict[str, list[tuple[int, str]]]] = {}  # item id -> system -> (sample, output) as read
    sample_lines: dict[tuple[str, str], dict[int, int]] = {}
    for line, row in rows:
        external_id = row["item_id"].strip()
        system = row["system"].strip()
        ok = True
        if not external_id:
            problems.append(Problem(line, "item_id", "missing id"))
            ok = False
        before = len(problems)
        text, messages = _row_input(row, line, problems, limit)
        ok = ok and len(problems) == before
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
        for column in ("input", "reference", "output"):
            _check_length(row.get(column), limit, line, column, problems)
        metadata = _csv_metadata(row, line, problems)
        if not ok or len(problems) > before:
            continue
        item = by_id.get(external_id)
        if item is None:
            item = by_id[external_id] = ParsedItem(
                external_id, text, row.get("reference", ""), metadata, {}, line, messages
            )
        elif item.input != text or item.messages != messages:
            field = "input" if messages is None else "messages"
            problems.append(Problem(line, field, f"differs from line {item.line} for item '{external_id}'"))
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
        indexed.setdefault(external_id, {}).setdefault(system, []).append((sample, row["output"]))
    items = list(by_id.values())
    for item in items:
        for system, outputs in indexed.get(item.external_id, {}).items():
            indices = sorted(i for i, _ in outputs)
            if indices != list(range(len(indices))):
                problems.append(
                    Problem(
                        item.line,
                        "sample",
                        f"samples of '{system}' for item '{item.external_id}' are "
                        f"{indices}; expected 0..{len(indices) - 1} without gaps",
                    )
                )
            item.outputs[system] = [text for _, text in sorted(outputs)]
    return items
