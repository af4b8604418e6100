from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
PRD = SHARED / "prd_vicuna80_human"


@pytest.fixture(scope="session")
def prd_battles():
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
