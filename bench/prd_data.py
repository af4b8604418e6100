"""The PRD Vicuna-80 data (../shared/data/prd_vicuna80_human) as arrays per system pair: the human votes' mean
score per question and the five LLM judges' verdicts (both presentation orders) on the same questions. Read by the
benchmarks (bench/hybrid_prd.py) and by the coverage suite (tests/analytics/core/test_coverage_prd.py).

Scores are for the pair's first system in sorted order: 1 a win, 1/2 a tie, 0 a loss, whichever system was shown
first (the files' score 1 = the first shown answer better, 2 = the second, 3 = a tie)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

PRD = Path(__file__).resolve().parents[2] / "shared" / "data" / "prd_vicuna80_human"
MODELS = ("bard", "claude", "gpt35", "gpt4", "vicuna-13b")
JUDGES = ("gpt4", "gpt35", "claude", "bard", "vicuna-13b")
SCORE_FOR_FIRST = {1: 1.0, 2: 0.0, 3: 0.5}
FILE = re.compile(r"answer_(?P<a>.+?)-vs-answer_(?P<b>.+?)-(?P<who>human|gpt4|gpt35|claude|bard|vicuna-13b)-reviewer")


def read(folder: Path, who: str) -> dict[tuple[str, str], dict[int, list[float]]]:
    """(first system, second system) of the sorted pair -> question -> the reviewer's scores for the first system,
    in file order (the ``answer_`` files only)."""
    out: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(folder.glob("*.jsonl")):
        match = FILE.match(path.name)
        if not match or match["who"] != who or match["a"] not in MODELS or match["b"] not in MODELS:
            continue
        a, b = match["a"], match["b"]
        pair = tuple(sorted((a, b)))
        for line in path.read_text().splitlines():
            row = json.loads(line)
            score = SCORE_FOR_FIRST.get(row.get("score"))
            if score is None:
                continue
            out[pair][row["question_id"]].append(score if a == pair[0] else 1 - score)
    return out


@dataclasses.dataclass(frozen=True)
class PairData:
    pair: tuple[str, str]
    questions: list[int]
    y: np.ndarray  # the human votes' mean score per question
    f: dict[str, np.ndarray]  # per judge: the mean of its two verdicts (one per order) per question
    verdicts: np.ndarray  # every judge's verdicts per question (rows), NaN-padded: what judge-disagreement reads

    @property
    def f_all(self) -> np.ndarray:
        """The mean of all judges' verdicts per question (the several-judges predictor)."""
        return np.nanmean(self.verdicts, axis=1)


def load(folder: Path = PRD) -> list[PairData]:
    """The 10 pairs among the five judged systems, each with the questions that have a human vote and a verdict
    of every judge."""
    humans = read(folder, "human")
    judges = {j: read(folder / f"ratings-{j}", j) for j in JUDGES}
    out = []
    for pair, by_question in sorted(humans.items()):
        questions = [q for q in sorted(by_question) if all(q in judges[j].get(pair, {}) for j in JUDGES)]
        if not questions:
            continue
        rows = [[v for j in JUDGES for v in judges[j][pair][q]] for q in questions]
        width = max(len(r) for r in rows)
        verdicts = np.full((len(rows), width), np.nan)
        for i, r in enumerate(rows):
            verdicts[i, : len(r)] = r
        out.append(PairData(pair, questions, np.array([np.mean(by_question[q]) for q in questions]),
                            {j: np.array([np.mean(judges[j][pair][q]) for q in questions]) for j in JUDGES},
                            verdicts))
    return out
