"""The PRD Vicuna-80 data (../shared/data/prd_vicuna80_human) as arrays per system pair: the human votes' mean
score per question and the five LLM judges' verdicts (both presentation orders) on the same questions. Read by the
benchmarks (bench/hybrid_prd.py) and by the coverage suite (tests/analytics/core/test_coverage_prd.py).

Scores are for the pair's first system in sorted order: 1 a win, 1/2 a tie, 0 a loss, whichever system was shown
first (the files' score 1 = the first shown answer better, 2 = the second, 3 = a tie)."""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
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
        first, second = sorted((a, b))
        pair = (first, second)
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
        out.append(
            PairData(
                pair,
                questions,
                np.array([np.mean(by_question[q]) for q in questions]),
                {j: np.array([np.mean(judges[j][pair][q]) for q in questions]) for j in JUDGES},
                verdicts,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------------------------
# The simulation behind the coverage suite and bench/hybrid_prd.py: each pair's ~80 questions stand for the
# population the questions come from. For *items like these*, a study is POOL questions drawn from them at random
# (with replacement) and the target the mean of Y over the 80; for *these items*, the study is the 80 questions and
# the target their mean. People label n questions by each design; every estimate is the product's
# (analytics/core/ppi.py) on the product's designs (selection/core/sampling.py).

POOL = 64


def design_estimates(
    pair: PairData, n: int, rounds: int, rng: np.random.Generator, finite: bool, judges: tuple[str, ...] = ("gpt4",)
) -> dict[str, list]:
    """Estimator name -> its estimate in each of ``rounds`` simulated studies of ``pair`` with n labels: people
    alone, people + each of ``judges`` and + all judges (a uniform sample), the judge-disagreement design and the
    judges' strata with proportional and defensive Neyman allocation (all judges' mean verdict)."""
    from analytics.core import ppi
    from selection.core.sampling import (
        active_inclusion,
        judge_disagreement,
        judge_stratified_selection,
        systematic_pps,
    )

    out: dict[str, list] = defaultdict(list)
    size = POOL if not finite else len(pair.y)
    fixed_pi = None if not finite else active_inclusion(judge_disagreement(pair.verdicts), n, 0.5)
    for _ in range(rounds):
        if finite:
            index = np.arange(size)
            labelled = np.zeros(size, dtype=bool)
            labelled[rng.choice(size, n, replace=False)] = True
        else:
            index = rng.integers(0, len(pair.y), size)
            labelled = np.arange(size) < n  # the pool is in random order: its first n are a uniform sample
        y, f_all, verdicts = pair.y[index], pair.f_all[index], pair.verdicts[index]
        out["people"].append(ppi.classical_mean(y[labelled], population_size=size if finite else None))
        for judge in judges:
            f = pair.f[judge][index]
            out[f"people + {judge}"].append(ppi.ppi_mean(y[labelled], f[labelled], f[~labelled], finite=finite))
        out["people + all judges"].append(ppi.ppi_mean(y[labelled], f_all[labelled], f_all[~labelled], finite=finite))
        # the finite pool's inclusion probabilities are fixed (fixed_pi is set exactly when finite)
        pi = fixed_pi if fixed_pi is not None else active_inclusion(judge_disagreement(verdicts), n, 0.5)
        drawn = np.zeros(size, dtype=bool)
        drawn[systematic_pps(pi, rng)] = True
        out["judge-disagreement design"].append(
            ppi.active_mean(np.where(drawn, y, np.nan), f_all, pi, drawn, finite=finite)
        )
        for name, neyman in (("judges' strata, proportional", False), ("judges' strata, Neyman", True)):
            chosen, strata, _ = judge_stratified_selection(f_all, n, rng, neyman=neyman)
            drawn = np.zeros(size, dtype=bool)
            drawn[chosen] = True
            out[name].append(ppi.stratified_mean(np.where(drawn, y, np.nan), strata, drawn, finite=finite))
    return out


def reference_mse(pair: PairData, n: int, finite: bool) -> float:
    """The mean squared error of people alone with n labels drawn at random, exactly: sigma^2 / n over the 80 for
    items like these, (1 - n / N) S^2 / n for these N items."""
    if finite:
        return (1 - n / len(pair.y)) * float(np.var(pair.y, ddof=1)) / n
    return float(np.var(pair.y)) / n


def summarise(estimates: list, truth: float) -> tuple[float, float, float, float]:
    """(coverage, mean squared error, mean width, mean claimed efficiency) of a list of ``MeanEstimate``."""
    values = np.array([(e.estimate, e.low, e.high, e.efficiency) for e in estimates])
    covered = np.mean((values[:, 1] <= truth + 1e-12) & (truth - 1e-12 <= values[:, 2]))
    return (
        float(covered),
        float(np.mean((values[:, 0] - truth) ** 2)),
        float(np.mean(values[:, 2] - values[:, 1])),
        float(values[:, 3].mean()),
    )


def pair_summaries(pair: PairData, n: int, rounds: int, seed: int, finite: bool) -> dict[str, tuple]:
    """Per estimator of ``design_estimates``: (coverage, mean squared error, people alone's exact mean squared
    error, mean claimed efficiency) over ``rounds`` simulated studies of ``pair``."""
    rng = np.random.default_rng([seed, n, int(finite), zlib.crc32("/".join(pair.pair).encode())])
    truth = float(pair.y.mean())
    out = {}
    for name, estimates in design_estimates(pair, n, rounds, rng, finite).items():
        coverage, mse, _, claimed = summarise(estimates, truth)
        out[name] = (coverage, mse, reference_mse(pair, n, finite), claimed)
    return out


def all_summaries(
    pairs: list[PairData], n: int, rounds: int, seed: int, finite: bool, processes: int = 2
) -> dict[str, list[tuple]]:
    """``pair_summaries`` of every pair, in ``processes`` worker processes: estimator -> one tuple per pair."""
    import multiprocessing

    jobs = [(pair, n, rounds, seed, finite) for pair in pairs]
    if processes > 1:
        # spawned, not forked: a fork of a process with threads running (a test suite's servers, a worker's beat)
        # can inherit a lock held by one of them and wait for ever
        with multiprocessing.get_context("spawn").Pool(processes) as workers:
            results = workers.starmap(pair_summaries, jobs)
    else:
        results = [pair_summaries(*job) for job in jobs]
    out: dict[str, list[tuple]] = defaultdict(list)
    for by_name in results:
        for name, row in by_name.items():
            out[name].append(row)
    return out
