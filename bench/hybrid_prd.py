"""One estimate from humans and a judge (prediction-powered inference with power tuning) against human-only,
on the PRD Vicuna-80 data: for each of the 10 pairs among bard, claude, gpt35, gpt4 and vicuna-13b and each
of the five LLM judges, the win rate of the first system of the pair.

Per question: Y = the human votes' mean preference for the pair's first system (1 a win, 1/2 a tie, 0 a loss,
both presentation orders pooled); f = the judge's mean over its two verdicts (one per order). The full-human
value is the mean of Y over every question with a human vote. Each round labels n random questions with
their human Y, gives the judge's f on all the others, and computes the human-only interval (mean of Y with a
normal 95 % interval) and the hybrid one (analytics/core/ppi.py); it reports the mean width ratio (hybrid /
human-only) and how often each interval covers the full-human value.

Then Bradley-Terry strengths of the five systems (analytics/core/ppi.py, PPI++ logistic M-estimation): each
round labels n random questions of every pair, fits the strengths from those human units alone and from them
with the judge on all the other units, against the full-human fit (every question with a vote; bard is the
reference). It reports the mean width ratio and the per-system coverage over the four non-reference systems.

    python bench/hybrid_prd.py [--n 10,20,40] [--rounds 500] [--bt-rounds 100]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analytics.core.ppi import classical_mean, ppi_bradley_terry, ppi_mean  # noqa: E402
from analytics.core.ratings import BASE, SCALE, bradley_terry  # noqa: E402

PRD = ROOT.parent / "shared" / "data" / "prd_vicuna80_human"
MODELS = ("bard", "claude", "gpt35", "gpt4", "vicuna-13b")
JUDGES = ("gpt4", "gpt35", "claude", "bard", "vicuna-13b")
SCORE_FOR_FIRST = {1: 1.0, 2: 0.0, 3: 0.5}  # 1 = the first shown answer better, 2 = the second, 3 = tie
FILE = re.compile(r"answer_(?P<a>.+?)-vs-answer_(?P<b>.+?)-(?P<who>human|gpt4|gpt35|claude|bard|vicuna-13b)-reviewer")


def read(folder: Path, who: str) -> dict[tuple[str, str], dict[int, list[float]]]:
    """(first system, second system) of the unordered pair -> question -> preferences for the first system."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", default="10,20,40", help="human-labelled questions per pair, comma-separated")
    parser.add_argument("--rounds", type=int, default=500, help="random labelled subsets per pair, judge and n")
    parser.add_argument("--bt-rounds", type=int, default=100, help="random labelled subsets for the strengths")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = [int(v) for v in args.n.split(",")]
    if not PRD.exists():
        sys.exit(f"{PRD} is missing: the PRD data lives in ../shared/data (see shared/data/README.md)")
    humans = read(PRD, "human")
    rng = np.random.default_rng(args.seed)
    print(f"{'judge':<11} {'n':>3}  {'width ratio':>11}  {'coverage hybrid':>15}  {'coverage human-only':>19}  "
          f"{'lambda':>6}  {'corr(Y, f)':>10}")
    for judge in JUDGES:
        verdicts = read(PRD / f"ratings-{judge}", judge)
        for n in sizes:
            ratios, covered, covered_human, lambdas, correlations = [], 0, 0, [], []
            rounds = 0
            for pair, by_question in sorted(humans.items()):
                questions = [q for q in sorted(by_question) if q in verdicts.get(pair, {})]
                y = np.array([np.mean(by_question[q]) for q in questions])
                f = np.array([np.mean(verdicts[pair][q]) for q in questions])
                if len(questions) <= n + 1:
                    continue
                truth = float(y.mean())
                if np.std(f) > 0 and np.std(y) > 0:
                    correlations.append(float(np.corrcoef(y, f)[0, 1]))
                for _ in range(args.rounds):
                    labelled = rng.choice(len(questions), size=n, replace=False)
                    rest = np.setdiff1d(np.arange(len(questions)), labelled)
                    human = classical_mean(y[labelled])
                    hybrid = ppi_mean(y[labelled], f[labelled], f[rest])
                    if human.width == 0:
                        continue
                    ratios.append(hybrid.width / human.width)
                    covered += hybrid.low <= truth <= hybrid.high
                    covered_human += human.low <= truth <= human.high
                    lambdas.append(hybrid.lam)
                    rounds += 1
            print(f"{judge:<11} {n:>3}  {np.mean(ratios):>11.3f}  {covered / rounds:>15.3f}  "
                  f"{covered_human / rounds:>19.3f}  {np.mean(lambdas):>6.2f}  {np.mean(correlations):>10.2f}")
    strengths(humans, sizes, args.bt_rounds, rng)


def strengths(humans, sizes: list[int], rounds: int, rng: np.random.Generator) -> None:
    index = {m: i for i, m in enumerate(MODELS)}
    print(f"\nBradley-Terry strengths ({rounds} rounds; reference {MODELS[0]})")
    print(f"{'judge':<11} {'n':>3}  {'width ratio':>11}  {'coverage hybrid':>15}  {'coverage human-only':>19}  "
          f"{'lambda':>6}")
    for judge in JUDGES:
        verdicts = read(PRD / f"ratings-{judge}", judge)
        units = []  # (a, b, Y, f) per question of each pair with both
        for pair, by_question in sorted(humans.items()):
            for q in sorted(by_question):
                if q in verdicts.get(pair, {}):
                    units.append((index[pair[0]], index[pair[1]], float(np.mean(by_question[q])),
                                  float(np.mean(verdicts[pair][q])), pair))
        a = np.array([u[0] for u in units])
        b = np.array([u[1] for u in units])
        y = np.array([u[2] for u in units])
        f = np.array([u[3] for u in units])
        full = bradley_terry(a, b, y, len(MODELS))
        truth = np.log(BASE) * (full - full[0]) / SCALE
        by_pair = defaultdict(list)
        for i, u in enumerate(units):
            by_pair[u[4]].append(i)
        for n in sizes:
            ratios, covered, covered_human, lambdas, cells = [], 0, 0, [], 0
            for _ in range(rounds):
                chosen = np.concatenate([rng.choice(ix, size=min(n, len(ix) - 1), replace=False)
                                         for ix in by_pair.values()])
                rest = np.setdiff1d(np.arange(len(units)), chosen)
                args = (a[chosen], b[chosen], y[chosen], f[chosen], a[rest], b[rest], f[rest], len(MODELS))
                try:
                    hybrid, human = ppi_bradley_terry(*args), ppi_bradley_terry(*args, lam=0.0)
                except ValueError:
                    continue
                ratios.append(np.mean((hybrid.high - hybrid.low)[1:] / (human.high - human.low)[1:]))
                covered += int(np.sum((hybrid.low[1:] <= truth[1:]) & (truth[1:] <= hybrid.high[1:])))
                covered_human += int(np.sum((human.low[1:] <= truth[1:]) & (truth[1:] <= human.high[1:])))
                cells += len(MODELS) - 1
                lambdas.append(hybrid.lam)
            print(f"{judge:<11} {n:>3}  {np.mean(ratios):>11.3f}  {covered / cells:>15.3f}  "
                  f"{covered_human / cells:>19.3f}  {np.mean(lambdas):>6.2f}")


if __name__ == "__main__":
    main()
