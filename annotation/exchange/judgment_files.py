"""The judgment file (docs/interfaces.md#judgment-format): its one table of fields (``JUDGMENT_SCHEMA``), parsing
a judgments file (JSONL, or the CSV export layout) against a study with complete validation, and each exported line
as a CSV row.

Pure Python (no ORM): ``parse_judgments`` takes bytes and returns either the parsed judgments or the full list of
problems, each with its line number and field, so a bad file is rejected as a whole and the user can fix every
problem in one go."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from annotation import elicitation
from annotation import questions as question_kinds
from annotation.exchange.rules import (
    MAX_STORED_INT,
    FormatError,
    NotJSON,
    Problem,
    csv_rows,
    csv_safe,
    csv_unsafe,
    decode_upload,
    detect_format,
    item_id,
    jsonl_objects,
    stored_json,
)

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
    # true: a researcher excluded the item in the data manager (analytics/curation.py): kept, never analysed; an
    # imported line with it is kept and not counted (stored superseded: the report counts it among those)
    JudgmentField("excluded", "flag"),
    # the id of the ranking or best-worst answer the judgment is implied by (docs/interfaces.md#ranking-format): the
    # pairs of one answer share it. Such a line is imported with its answer, from the rankings file, never alone.
    JudgmentField("ranking", "text", nullable=True, exported=False),
)
COMMENT_MAX_CHARS = 2000  # a rater's comment, in the form and in imported files
STRENGTHS = tuple(elicitation.STRENGTHS)
JUDGMENT_FIELDS = tuple(f.name for f in JUDGMENT_SCHEMA)
# Fields stored in their own columns on import; any other field of a line is kept verbatim in
# ``Judgment.extra`` (the assignment id of another study is only meaningful as such a note).
PARSED_JUDGMENT_FIELDS = frozenset(JUDGMENT_FIELDS) - {"assignment"}
# The CSV layout of judgments: the JSONL fields in order, lists and extra fields as JSON text.
JUDGMENT_CSV_COLUMNS = JUDGMENT_FIELDS + ("extra",)


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
    implied: Collection[str] = (),
) -> list[ParsedJudgment]:
    """Parse and validate a judgments file (JSONL, or the CSV export layout) against a study.

    ``samples`` maps item id -> system name -> number of samples K; ``rater_kinds`` maps the
    study's existing raters to their kind; ``questions`` maps the study's further questions' keys to how each is
    answered (``annotation/questions.py``: a mode's name, or a rationale); ``implied`` the ids of the study's
    judgments implied by its rankings (a judgments export's lines of them are present already). Raises
    ``FormatError`` with every problem.
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
        judgment = _parse_judgment(line, obj, samples, rater_kinds, problems, dict(questions or {}), implied)
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
    header, rows = csv_rows(text, problems)
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
            elif column in ("superseded", "revised", "excluded"):
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
class Line:
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

    def name(self, field: str, known: Mapping[str, object]) -> str:
        """A name the study has, as written (a system stored with white space at an end by an older import); any
        other name as ``string`` reads it."""
        value = self.obj.get(field)
        return value if isinstance(value, str) and value.strip() and value in known else self.string(field)

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


def _judged_pair(line: Line, samples: Mapping[str, Mapping[str, int]]) -> tuple[str | None, str, str, dict]:
    """The item, both systems and both sample indices, checked against the study."""
    item = item_id(line.obj.get("item"))
    if not item:
        line.problem("item", "missing item")
    elif item not in samples:
        line.problem("item", f"unknown item '{item}'")
        item = None
    known = samples.get(item or "", {})
    system_a, system_b = line.name("system_a", known), line.name("system_b", known)
    for field, system in (("system_a", system_a), ("system_b", system_b)):
        if system and item and system not in known:
            line.problem(field, f"unknown system '{system}'")
    if system_a and system_a == system_b:
        line.problem("system_b", "system_b must differ from system_a")
    sample_idx = {}
    for field, system in (("sample_a", system_a), ("sample_b", system_b)):
        before = len(line.problems)
        value = line.count(field, 0)
        if len(line.problems) == before and value is not None and system in known and value >= known[system]:
            line.problem(field, f"item '{item}' has {known[system]} sample(s) of '{system}'; {value} is out of range")
        sample_idx[field] = value
    return item, system_a, system_b, sample_idx


def judging_rater(line: Line, system_a: str, system_b: str, rater_kinds: dict[str, str]) -> tuple[str, str, str]:
    """Which system was shown first, the rater and its kind (one kind per rater across the file)."""
    shown_first = line.name("shown_first", {system_a: 1, system_b: 1})
    if shown_first and shown_first not in (system_a, system_b):
        line.problem("shown_first", "shown_first must be system_a or system_b")
    rater, rater_kind = line_rater(line, rater_kinds)
    return shown_first, rater, rater_kind


def line_rater(line: Line, rater_kinds: dict[str, str]) -> tuple[str, str]:
    """The rater and its kind (one kind per rater across the file and the study: ``rater_kinds`` learns each)."""
    rater, rater_kind = line.string("rater"), line.string("rater_kind")
    if len(rater) > 200:
        line.problem("rater", "rater longer than 200 characters")
    if rater_kind and rater_kind not in RATER_KINDS:
        line.problem("rater_kind", "rater_kind must be 'human' or 'judge'")
    elif rater and rater_kind and rater_kinds.setdefault(rater, rater_kind) != rater_kind:
        line.problem("rater_kind", f"rater '{rater}' is already a {rater_kinds[rater]}, not a {rater_kind}")
    return rater, rater_kind


def _answer(line: Line, code_of: dict[str, str]) -> tuple[Any, Any, Any, Any]:
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


def _further_answers(line: Line, code_of: dict[str, str], questions: dict[str, str]) -> dict[str, dict]:
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
        inner = Line(line.number, answer, [])
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


def line_comment(line: Line) -> str:
    comment = line.obj.get("comment")
    if comment is None:
        return ""
    if not isinstance(comment, str) or len(comment) > COMMENT_MAX_CHARS:
        line.problem("comment", f"comment must be text of at most {COMMENT_MAX_CHARS} characters, or null")
        return ""
    return comment


def line_times(line: Line) -> tuple[datetime | None, dict[str, int | None], Any]:
    """The creation time (ISO 8601 with a time zone), the time-on-task fields and the superseded, revised and excluded
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
    flags = {name: line.obj.get(name, False) for name in ("superseded", "revised", "excluded")}
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
    implied: Collection[str] = (),
) -> ParsedJudgment | None:
    """One judgment line in the judgment format (docs/interfaces.md#judgment-format), every problem reported with
    its line and field. A line of a judgment implied by a ranking (its ``ranking`` field) is read only when its id is
    among ``implied``: the study has its answer already, so the line is skipped as present; alone it is refused."""
    before = len(problems)
    line = Line(number, obj, problems)
    item, system_a, system_b, sample_idx = _judged_pair(line, samples)
    shown_first, rater, rater_kind = judging_rater(line, system_a, system_b, rater_kinds)
    code_of = {system_a: "a", system_b: "b"}
    choice, response_set, probability_a, strength = _answer(line, code_of)
    further = _further_answers(line, code_of, questions or {})
    created, times, flags = line_times(line)
    key = judgment_key(obj)
    if obj.get("ranking") is not None and key not in (implied or ()):
        line.problem(
            "ranking",
            "this judgment is implied by a ranking or best-worst answer the study does not have: import the "
            "rankings file first (docs/interfaces.md#ranking-format), which stores it with the answer",
        )
    if len(key) > 64:
        line.problem("id", "id longer than 64 characters")
    if len(problems) != before or item is None:  # a missing or unknown item is one of the problems already
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
        comment=line_comment(line),
        created=created,
        time_on_task_ms=times["time_on_task_ms"],
        client_time_ms=times["client_time_ms"],
        superseded=flags["superseded"] or flags["excluded"],
        revised=flags["revised"],
        extra={k: v for k, v in obj.items() if k not in PARSED_JUDGMENT_FIELDS},
        line=number,
        answers=further,
    )


def format_timestamp(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


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
