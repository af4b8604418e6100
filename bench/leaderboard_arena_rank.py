"""SepLab's `manage.py leaderboard --method bt` (closed-form "sandwich" intervals) against LMArena's `arena-rank`
(`BradleyTerry.compute_ratings_and_cis`, its default sandwich intervals), the whole process as a user runs it
(interpreter start, imports, reading the battles file, the fit, the intervals), on the same files: PRD's human votes
(../shared/data) and synthetic battles among 20 systems (bench/ratings_scale.py's generator, 10 % ties). Interleaved
runs; wall time and peak RSS of each process; the largest difference of any rating and interval end.

    python bench/leaderboard_arena_rank.py --arena-python PATH [--sizes 10000,100000,1000000] [--runs 3]

arena-rank (Apache-2.0, JAX) is not a dependency of SepLab: give an interpreter that has it (`python -m venv
/tmp/ar && /tmp/ar/bin/pip install arena-rank pandas`); this script installs nothing and contains no arena-rank code:
its driver calls arena-rank's own `PairDataset.from_pandas` and `BradleyTerry` on `pandas.read_csv` of the file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.leaderboard_fastchat import measure, span, write_battles  # noqa: E402  (one way to time a process)

PRD = ROOT.parent / "shared" / "data" / "prd_vicuna80_human" / "battles_prd_human_individual_votes.csv"
DRIVER = """
import json, sys
import pandas as pd
from arena_rank.models.bradley_terry import BradleyTerry
from arena_rank.utils.data_utils import PairDataset
df = pd.read_csv(sys.argv[1])
dataset = PairDataset.from_pandas(df)
model = BradleyTerry(n_competitors=len(dataset.competitors))
r = model.compute_ratings_and_cis(dataset)
print(json.dumps({c: [float(r["ratings"][i]), float(r["rating_lower"][i]), float(r["rating_upper"][i])]
                  for i, c in enumerate(r["competitors"])}))
"""


def seplab(path: Path, env: dict) -> tuple[float, float, dict]:
    seconds, mb, out = measure([sys.executable, "manage.py", "leaderboard", str(path), "--method", "bt", "--json"],
                               env)
    return seconds, mb, {r["system"]: [r["rating"], r["low"], r["high"]] for r in json.loads(out)["leaderboard"]}


def arena(python: str, path: Path, env: dict) -> tuple[float, float, dict]:
    seconds, mb, out = measure([python, "-c", DRIVER, str(path)], env)
    return seconds, mb, json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arena-python", required=True, help="An interpreter with arena-rank and pandas.")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="Synthetic battles per file.")
    parser.add_argument("--runs", type=int, default=3, help="Interleaved runs per file.")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.runs < 1 or any(n < 100 for n in sizes):
        parser.error("need --runs >= 1 and sizes of at least 100 battles")
    env = {**os.environ, "DEBUG": "1", "JAX_PLATFORMS": "cpu"}
    workdir = Path(tempfile.mkdtemp(prefix="seplab-arena-"))
    files = ([("PRD human votes", PRD)] if PRD.exists() else []) + [
        (f"{n:,} synthetic", workdir / f"battles-{n}.csv") for n in sizes]
    for label, path in files:
        if not path.exists():
            write_battles(path, int(label.split()[0].replace(",", "")))
    print("| battles | SepLab s | arena-rank s | time ratio | SepLab MB | arena-rank MB | memory ratio | max |Δ| "
          "rating | max |Δ| interval end |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, path in files:
        ours, theirs = [], []
        for _ in range(args.runs):
            ours.append(seplab(path, env))
            theirs.append(arena(args.arena_python, path, env))
        rating = max(abs(ours[0][2][s][0] - theirs[0][2][s][0]) for s in theirs[0][2])
        ends = max(abs(ours[0][2][s][k] - theirs[0][2][s][k]) for s in theirs[0][2] for k in (1, 2))
        t_ours, t_theirs = [r[0] for r in ours], [r[0] for r in theirs]
        m_ours, m_theirs = [r[1] for r in ours], [r[1] for r in theirs]
        print(f"| {label} | {span(t_ours)} | {span(t_theirs)} | "
              f"{statistics.median(t_ours) / statistics.median(t_theirs):.2f} | {max(m_ours):.0f} | "
              f"{max(m_theirs):.0f} | {max(m_ours) / max(m_theirs):.2f} | {rating:.3f} | {ends:.3f} |")


if __name__ == "__main__":
    main()
