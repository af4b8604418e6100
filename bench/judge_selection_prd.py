"""Designs that use the judges, on PRD: the `simulate` command's estimates table over the 10
system pairs of the PRD Vicuna-80 data, with the human votes as the oracle and the five LLM judges' verdicts
(both presentation orders, 10 per question) as what the judge strategies read.

For each pair, `simulate --method judge-disagreement,judge-stratified,judge-neyman,default,random --oracle-kind
human` draws pools of 80 % of the questions and, per budget n, has people label n of them by each design, then
estimates the pool's win rate of the pair's first system (the pool's own items: finite-population correction):
from the people alone, and from people and the judges together (the judges' mean score as the prediction:
prediction-powered on a uniform sample, the weighted difference estimator on the judge-disagreement sample, the
stratified mean on the judges' bands). This prints, per design and budget, over the pairs: the mean error, the
mean 95 % interval width, the coverage, the efficiency the estimates claim and the efficiency they deliver (the
mean squared error of people alone on a random sample in the same run, over the design's).

    python bench/judge_selection_prd.py [--seeds 200] [--budgets 10,20,40] [--uniform-share 0.5]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scratch import setup_scratch_database  # noqa: E402

PRD = ROOT.parent / "shared" / "data" / "prd_vicuna80_human"
MODELS = ("bard", "claude", "gpt35", "gpt4", "vicuna-13b")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=200, help="pools per pair")
    parser.add_argument("--budgets", default="10,20,40", help="questions people label per pair")
    parser.add_argument("--uniform-share", type=float, default=None, help="judge-disagreement's uniform share")
    args = parser.parse_args()
    if not (PRD / "ratings-gpt4").is_dir():
        sys.exit(f"{PRD} is missing: this benchmark reads the real PRD data in ../shared/data")
    setup_scratch_database("judgesel")
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    get_user_model().objects.create_superuser("bench", "bench@example.org", "bench")
    call_command("load_prd", "--data", str(PRD), "--owner", "bench", stdout=io.StringIO())
    oracle = Path(tempfile.mkdtemp(prefix="seplab-judgesel-")) / "prd.jsonl"
    call_command("export_judgments", "--study", "prd-vicuna80", "-o", str(oracle), stderr=io.StringIO())
    budgets = [int(b) for b in args.budgets.split(",")]
    per_pair = {}
    for a, b in combinations(MODELS, 2):
        out = io.StringIO()
        options = [
            "--study",
            "prd-vicuna80",
            "--oracle",
            str(oracle),
            "--oracle-kind",
            "human",
            "--pair",
            f"{a},{b}",
            "--method",
            "judge-disagreement,judge-stratified,judge-neyman,default,random",
            "--budgets",
            args.budgets,
            "--seeds",
            str(args.seeds),
            "--json",
        ]
        if args.uniform_share is not None:
            options += ["--uniform-share", str(args.uniform_share)]
        call_command("simulate", *options, stdout=out)
        per_pair[(a, b)] = json.loads(out.getvalue())["estimates"]["designs"]
        print(f"  {a} vs {b}: done", file=sys.stderr)
    designs = list(next(iter(per_pair.values())))
    print(
        f"PRD Vicuna-80, 10 pairs x {args.seeds} pools of 64 questions. Columns per budget, over the pairs: mean "
        "error / width / coverage / efficiency claimed (mean) / realised (people alone on a random sample's mean "
        "squared error, exact, over the design's, pooled)"
    )
    print("design".ljust(36) + "".join(f"n={n}".rjust(34) for n in budgets))
    for design in designs:
        cells = []
        for n in budgets:
            key = str(n)
            mean = {
                k: sum(p[design][key][k] for p in per_pair.values()) / len(per_pair)
                for k in ("error", "width", "coverage", "claimed")
            }
            realised = sum(p[design][key]["reference_mse"] for p in per_pair.values()) / sum(
                p[design][key]["mse"] for p in per_pair.values()
            )
            cells.append(
                f"{mean['error']:.3f} {mean['width']:.3f} {mean['coverage']:.3f} {mean['claimed']:.3f} "
                f"{realised:.3f}".rjust(34)
            )
        print(design.ljust(36) + "".join(cells))


if __name__ == "__main__":
    main()
