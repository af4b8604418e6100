"""One estimate from humans and a judge (prediction-powered inference with power tuning) against human-only,
on the PRD Vicuna-80 data: for each of the 10 pairs among bard, claude, gpt35, gpt4 and vicuna-13b and each
of the five LLM judges, the win rate of the first system of the pair.

Per question: Y = the human votes' mean preference for the pair's first system (1 a win, 1/2 a tie, 0 a loss,
both presentation orders pooled); f = the judge's mean over its two verdicts (one per order). The full-human
value is the mean of Y over every question with a human vote. Each round labels n random questions with
their human Y, gives the judge's f on all the others, and computes the human-only interval (mean of Y with a
normal 95 % interval) and the hybrid one (analytics/core/ppi.py); it reports the mean width ratio (hybrid /
human-only) and how often each interval covers the full-human value.

    python bench/hybrid_prd.py [--n 10,20,40] [--rounds 500]
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

from analytics.core.ppi import classical_mean, ppi_mean  # noqa: E402

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


if __name__ == "__main__":
    main()
