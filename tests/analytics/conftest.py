from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from annotation.exchange import exports
from annotation.rating import allocation, imports
from annotation.studies import enrolment
from tests.conftest import answer_all

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
PRD = SHARED / "prd_vicuna80_human"


@pytest.fixture(scope="session")
def prd_battles() -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], dict[str, Any]]:
    """The PRD human votes in file order, as (a, b, score, systems), and FastChat's reference outputs."""
    path = PRD / "battles_prd_human_individual_votes.csv"
    if not path.exists():
        pytest.skip(f"{path} is missing: the conformance data lives in ../shared/data (see shared/data/README.md)")
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    systems: list[str] = []
    for row in rows:  # FastChat's factorize order: model_a column first, then model_b
        if row["model_a"] not in systems:
            systems.append(row["model_a"])
    for row in rows:
        if row["model_b"] not in systems:
            systems.append(row["model_b"])
    index = {s: i for i, s in enumerate(systems)}
    a = np.array([index[r["model_a"]] for r in rows])
    b = np.array([index[r["model_b"]] for r in rows])
    score = np.array([{"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[r["winner"]] for r in rows])
    reference = json.loads((PRD / "fastchat_reference_outputs.json").read_text())
    return a, b, score, systems, reference


def judge_lines(study, judge: str, prefer: str, with_sets: bool) -> bytes:
    """A judge that prefers one system on every pair humans saw, with probabilities and response sets."""
    lines = []
    for line in exports.judgment_lines(study):
        if line["rater_kind"] != "human":
            continue
        for shown in (line["system_a"], line["system_b"]):
            lines.append(
                {
                    **{k: line[k] for k in ("item", "system_a", "sample_a", "system_b", "sample_b")},
                    "id": f"{judge}-{line['id']}-{shown}",
                    "shown_first": shown,
                    "rater": judge,
                    "rater_kind": "judge",
                    "choice": prefer,
                    "probability_a": 0.8 if prefer == "sys-a" else 0.2,
                    "response_set": [prefer] if with_sets else None,
                }
            )
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


@pytest.fixture
def judged_study(study):
    """Two human raters on the same items (forced choice), and two judges on the same pairs."""
    for name, choice in (("h1", "first"), ("h2", "second")):
        rater = enrolment.do_create_rater_link(study, name)
        while (assignment := allocation.do_start_assignment(rater)) is not None:
            answer_all(assignment, choice=choice)
    imports.do_import_judgments(study, judge_lines(study, "judge-a", "sys-a", True), "j.jsonl")
    imports.do_import_judgments(study, judge_lines(study, "judge-b", "sys-b", False), "j.jsonl")
    return study
