"""The ranking format (docs/interfaces.md#ranking-format): JSONL, one answer on several outputs of one item per line --
a ranking of them, or the best and the worst of those shown (best-worst scaling). Read here, pure Python (no ORM),
with the judgment format's rules for what the two share (rater, times, comment, id); stored by
``annotation/rating/rankings.py`` with the pairwise judgments each answer implies.

A line: ``item``, ``rater``, ``rater_kind``, ``shown`` (the outputs in display order, top or left first) and either
``ranking`` (the same outputs best first) or ``best`` and ``worst``; optionally ``id``, ``created``, ``comment``,
``time_on_task_ms`` and ``excluded``. An output is a system's name (its first sample) or ``{"system": name,
"sample": k}``. Any other field is kept and exported again."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from annotation.exchange import judgment_files
from annotation.exchange.rules import FormatError, Problem, decode_upload, detect_format, item_id, jsonl_objects

RANKING_FIELDS = (
    "id",
    "item",
    "rater",
    "rater_kind",
    "kind",
    "shown",
    "ranking",
    "best",
    "worst",
    "created",
    "comment",
    "time_on_task_ms",
    "excluded",
)
KINDS = {"rank": "ranking", "best_worst": "best and worst"}
MAX_SHOWN = 20  # outputs of one answer: 190 implied pairs at most

Output = tuple[str, int]  # (system name, sample index)


@dataclasses.dataclass(frozen=True)
class ParsedRanking:
    key: str
    item: str
    rater: str
    rater_kind: str
    kind: str  # rank | best_worst
    shown: list[Output]
    order: list[Output] | None  # rank: best first
    best: Output | None  # best_worst
    worst: Output | None
    comment: str
    created: datetime | None
    time_on_task_ms: int | None
    excluded: bool
    extra: dict[str, Any]
    line: int


def output_json(output: Output) -> str | dict[str, Any]:
    """An output as a line names it: the system's name for its first sample, else ``{"system", "sample"}``."""
    system, sample = output
    return system if sample == 0 else {"system": system, "sample": sample}


def parse_rankings(
    data: bytes,
    filename: str | None,
    samples: Mapping[str, Mapping[str, int]],
    *,
    rater_kinds: Mapping[str, str] | None = None,
    max_bytes: int = 50 * 1024 * 1024,
) -> list[ParsedRanking]:
    """Parse and validate a rankings file against a study: ``samples`` maps item id -> system name -> how many samples
    it has, ``rater_kinds`` the study's raters to their kind. Raises ``FormatError`` with every problem by line and
    field; nothing of a file with a problem is read as an answer."""
    text = decode_upload(data, max_bytes)
    problems: list[Problem] = []
    if detect_format(text, filename) != "jsonl":
        raise FormatError([Problem(None, None, "a rankings file is JSONL: one JSON object per line")])
    kinds = dict(rater_kinds or {})
    parsed: list[ParsedRanking] = []
    keys: dict[str, int] = {}
    for number, obj in jsonl_objects(text, problems):
        ranking = _parse_line(judgment_files.Line(number, obj, problems), samples, kinds)
        if ranking is None:
            continue
        if ranking.key in keys:
            problems.append(Problem(number, "id", f"same answer as line {keys[ranking.key]} (give each a distinct id)"))
            continue
        keys[ranking.key] = number
        parsed.append(ranking)
    if not parsed and not problems:
        problems.append(Problem(None, None, "the file contains no rankings"))
    if problems:
        raise FormatError(problems)
    return parsed


def _output(line: judgment_files.Line, field: str, value: Any, known: Mapping[str, int]) -> Output | None:
    """One output of the item: a system's name (sample 0) or {"system", "sample"}, checked against the item."""
    sample: Any = 0
    if isinstance(value, dict):
        system, sample = value.get("system"), value.get("sample", 0)
        if set(value) - {"system", "sample"}:
            line.problem(field, 'an output is a system\'s name or {"system": name, "sample": k}')
            return None
    else:
        system = value
    if not isinstance(system, str) or not system.strip():
        line.problem(field, 'an output is a system\'s name or {"system": name, "sample": k}')
        return None
    if system not in known:
        line.problem(field, f"unknown system '{system}'")
        return None
    if isinstance(sample, bool) or not isinstance(sample, int) or not 0 <= sample < known[system]:
        line.problem(field, f"the item has {known[system]} sample(s) of '{system}'; sample {sample!r} is out of range")
        return None
    return system, sample


def _outputs(line: judgment_files.Line, field: str, known: Mapping[str, int], least: int) -> list[Output] | None:
    value = line.obj.get(field)
    if not isinstance(value, list) or not least <= len(value) <= MAX_SHOWN:
        line.problem(field, f"{field} must be a list of {least} to {MAX_SHOWN} outputs")
        return None
    outputs = [_output(line, field, v, known) for v in value]
    if any(o is None for o in outputs):
        return None
    checked = [o for o in outputs if o is not None]
    if len(set(checked)) != len(checked):
        line.problem(field, f"{field} names an output twice")
        return None
    return checked


def _parse_line(
    line: judgment_files.Line, samples: Mapping[str, Mapping[str, int]], rater_kinds: dict[str, str]
) -> ParsedRanking | None:
    before = len(line.problems)
    item = item_id(line.obj.get("item"))
    if not item:
        line.problem("item", "missing item")
    elif item not in samples:
        line.problem("item", f"unknown item '{item}'")
    known = samples.get(item or "", {})
    rater, rater_kind = judgment_files.line_rater(line, rater_kinds)
    ranked, best_worst = "ranking" in line.obj, "best" in line.obj or "worst" in line.obj
    kind = "rank" if ranked else "best_worst"
    if ranked == best_worst:
        line.problem(None, "an answer has either a ranking or a best and a worst")
    elif line.obj.get("kind", kind) != kind:
        line.problem("kind", f"kind must be '{kind}' for {KINDS[kind]}")
    shown = _outputs(line, "shown", known, 2 if ranked else 3) if item in samples else None
    order = best = worst = None
    if shown is not None and ranked:
        order = _outputs(line, "ranking", known, 2)
        if order is not None and set(order) != set(shown):
            line.problem("ranking", "the ranking orders exactly the outputs shown")
    elif shown is not None and best_worst:
        best, worst = (_output(line, f, line.obj.get(f), known) for f in ("best", "worst"))
        for field, output in (("best", best), ("worst", worst)):
            if output is not None and output not in shown:
                line.problem(field, f"the {field} is one of the outputs shown")
        if best is not None and best == worst:
            line.problem("worst", "the worst is another output than the best")
    created, times, flags = judgment_files.line_times(line)
    comment = judgment_files.line_comment(line)
    for flag in ("superseded", "revised"):
        if flag in line.obj:
            line.problem(flag, f"{flag} is a judgment's flag; an answer on several outputs has none")
    key = judgment_files.judgment_key(line.obj)
    if len(key) > 64:
        line.problem("id", "id longer than 64 characters")
    if len(line.problems) != before or item is None or shown is None:
        return None
    return ParsedRanking(
        key=key,
        item=item,
        rater=rater,
        rater_kind=rater_kind,
        kind=kind,
        shown=shown,
        order=order,
        best=best,
        worst=worst,
        comment=comment,
        created=created,
        time_on_task_ms=times["time_on_task_ms"],
        excluded=flags["excluded"],
        extra={k: v for k, v in line.obj.items() if k not in RANKING_FIELDS},
        line=line.number,
    )
