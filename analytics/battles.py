"""Chatbot-Arena battles files (SPEC §8): CSV or JSONL rows with model_a, model_b and winner in
{model_a, model_b, tie, tie (bothbad)}, optionally question_id and (for sep-ELO) separability."""

from __future__ import annotations

import csv
import dataclasses
import io

import numpy as np

from annotation.formats import FormatError, Problem, decode_upload, detect_format, jsonl_objects

WINNERS = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5, "tie (bothbad)": 0.5}


@dataclasses.dataclass
class Battles:
    systems: list[str]
    a: np.ndarray
    b: np.ndarray
    score: np.ndarray
    separability: np.ndarray  # NaN where the file gives none


def parse_battles(data: bytes, filename: str | None, max_bytes: int = 500 * 1024 * 1024) -> Battles:
    text = decode_upload(data, max_bytes)
    problems: list[Problem] = []
    rows: list[tuple[int, dict]] = []
    if detect_format(text, filename) == "jsonl":
        rows = list(jsonl_objects(text, problems))
    else:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        for column in ("model_a", "model_b", "winner"):
            if reader.fieldnames is None or column not in reader.fieldnames:
                problems.append(Problem(1, column, "missing column"))
        if not problems:
            rows = [(reader.line_num, row) for row in reader]
    systems: list[str] = []
    index: dict[str, int] = {}
    a, b, score, sep = [], [], [], []
    for number, row in rows:
        model_a, model_b, winner = row.get("model_a"), row.get("model_b"), row.get("winner")
        before = len(problems)
        for field, value in (("model_a", model_a), ("model_b", model_b)):
            if not isinstance(value, str) or not value.strip():
                problems.append(Problem(number, field, f"missing {field}"))
        if model_a and model_a == model_b:
            problems.append(Problem(number, "model_b", "a model cannot battle itself"))
        if winner not in WINNERS:
            problems.append(Problem(number, "winner", f"winner must be one of {sorted(WINNERS)}, not {winner!r}"))
        value = row.get("separability")
        delta = float("nan")
        if value not in (None, ""):
            try:
                delta = float(value)
            except (TypeError, ValueError):
                problems.append(Problem(number, "separability", f"separability must be a number, not {value!r}"))
        if len(problems) != before:
            continue
        for model in (model_a, model_b):
            if model not in index:
                index[model] = len(systems)
                systems.append(model)
        a.append(index[model_a])
        b.append(index[model_b])
        score.append(WINNERS[winner])
        sep.append(delta)
    if not a and not problems:
        problems.append(Problem(None, None, "the file contains no battles"))
    if problems:
        raise FormatError(problems)
    return Battles(systems, np.array(a), np.array(b), np.array(score), np.array(sep))
