"""SepLab's `manage.py leaderboard --method bt` (closed-form "sandwich" intervals) against LMArena's `arena-rank`
(`BradleyTerry.compute_ratings_and_cis`, its default sandwich intervals), the whole process as a user runs it
(interpreter start, imports, reading the battles file, the fit, the intervals), on the same files: PRD's human votes
(../shared/data) and synthetic battles among 20 systems (bench/ratings_scale.py's generator, 10 % ties). Interleaved
runs; wall time and peak RSS of each process; the largest difference of any rating and interval end.

    python bench/leaderboard_arena_rank.py --arena-python PATH [--sizes 10000,100000,1000000] [--runs 3]
        [--fastchat-python PATH --fastchat-path DIR]

Both models: plain Bradley-Terry on every file, and style control (arena-rank's ContextualBradleyTerry with its
defaults) on the same synthetic battles with style columns.

arena-rank (Apache-2.0, JAX) is not a dependency of SepLab: give an interpreter that has it (`python -m venv
/tmp/ar && /tmp/ar/bin/pip install arena-rank pandas`); this script installs nothing and contains no arena-rank code:
its driver calls arena-rank's own `PairDataset.from_pandas` and `BradleyTerry` on `pandas.read_csv` of the file.

With --fastchat-python (an interpreter with pandas and scipy) and --fastchat-path (a FastChat checkout), FastChat's
rating code runs in the same run on the same files, as its leaderboard computes them: `compute_bt` with 100 rounds
of `compute_bootstrap_bt` for the intervals, and `compute_style_control` with 100 rounds of
`compute_bootstrap_style_control` (its style columns given in the `conv_metadata` dicts it reads). FastChat's style
model is not arena-rank's (a penalty on the ratings too, no pair reweighting, +1 in the ratio's denominator), so
only its time and memory are compared there; its plain Bradley-Terry ratings are compared with SepLab's.
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

from bench.leaderboard_fastchat import fastchat as fastchat_bt  # noqa: E402
from bench.leaderboard_fastchat import measure, span, write_battles  # noqa: E402  (one way to time a process)

PRD = ROOT.parent / "shared" / "data" / "prd_vicuna80_human" / "battles_prd_human_individual_votes.csv"
STYLE_DRIVER = """
import json, sys
import pandas as pd
from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
from arena_rank.utils.data_utils import ContextualPairDataset
df = pd.read_csv(sys.argv[1])
features = ["sum_assistant_tokens", "header_count", "list_count", "bold_count"]
for f in features:  # as arena-rank's example notebook builds them (add_style_feature_cols)
    raw = (df[f + "_a"] - df[f + "_b"]) / (df[f + "_a"] + df[f + "_b"]).replace(0, 1)
    df[f] = (raw - raw.mean()) / raw.std()
dataset = ContextualPairDataset.from_pandas(df, features)
model = ContextualBradleyTerry(n_competitors=len(dataset.competitors), n_features=len(features))
r = model.compute_ratings_and_cis(dataset)
out = {c: [float(r["ratings"][i]), float(r["rating_lower"][i]), float(r["rating_upper"][i])]
       for i, c in enumerate(r["competitors"])}
out["_coefficients"] = [float(c) for c in r["coeffs"]]
print(json.dumps(out))
"""
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


def seplab(path: Path, env: dict, style: bool = False) -> tuple[float, float, dict]:
    seconds, mb, out = measure(
        [
            sys.executable,
            "manage.py",
            "leaderboard",
            str(path),
            "--method",
            "bt",
            "--json",
            *(["--style-control"] if style else []),
        ],
        env,
    )
    document = json.loads(out)
    rows = {r["system"]: [r["rating"], r["low"], r["high"]] for r in document["leaderboard"]}
    if style:
        rows["_coefficients"] = list(document["style_coefficients"].values())
    return seconds, mb, rows


def arena(python: str, path: Path, env: dict, style: bool = False) -> tuple[float, float, dict]:
    seconds, mb, out = measure([python, "-c", STYLE_DRIVER if style else DRIVER, str(path)], env)
    return seconds, mb, json.loads(out)


FASTCHAT_STYLE_DRIVER = """
import json, sys
import pandas as pd
from fastchat.serve.monitor import rating_systems as rs
df = pd.read_csv(sys.argv[1])
columns = {"sum_assistant_a_tokens": "sum_assistant_tokens_a", "sum_assistant_b_tokens": "sum_assistant_tokens_b",
           **{f"{f}_{s}": f"{f}_{s}" for f in ("header_count", "list_count", "bold_count") for s in "ab"}}
df["conv_metadata"] = [dict(zip(columns, row)) for row in df[list(columns.values())].itertuples(index=False)]
point, coefficients = rs.compute_style_control(df)
boot, _ = rs.compute_bootstrap_style_control(df, num_round=100)
print(json.dumps({"point": {k: float(v) for k, v in point.items()}}))
"""


def fastchat(python: str, path_: str | None, path: Path, style: bool) -> tuple[float, float, dict]:
    """FastChat's rating code on the file as its leaderboard runs it (bootstrap intervals, 100 rounds)."""
    env = {**os.environ, **({"PYTHONPATH": path_} if path_ else {})}
    if style:
        seconds, mb, out = measure([python, "-c", FASTCHAT_STYLE_DRIVER, str(path)], env)
        return seconds, mb, json.loads(out.strip().splitlines()[-1])["point"]
    return fastchat_bt(python, path, "bt", 100, env)


def write_styled_battles(path: Path, n: int, systems: int = 20, seed: int = 0) -> None:
    """The same synthetic battles with Arena's style columns: answer lengths (log-normal tokens) and Markdown counts
    (Poisson), the raters preferring the longer answer on top of the systems' strengths."""
    import numpy as np

    from bench.ratings_scale import synthetic

    a, b, score, _ = synthetic(n, systems, seed)
    rng = np.random.default_rng(seed + 1)
    tokens = rng.lognormal(5, 0.6, (n, 2)).round()
    longer = (tokens[:, 0] - tokens[:, 1]) / (tokens[:, 0] + tokens[:, 1])
    flip = (score != 0.5) & (rng.random(n) < 0.3 * np.abs(longer))  # some decisions go to the longer answer
    score = np.where(flip, (longer > 0).astype(float), score)
    marks = rng.poisson([1.5, 3.0, 2.0], (n, 2, 3))
    winner = np.where(score == 0.5, "tie", np.where(score == 1.0, "model_a", "model_b"))
    names = [f"model-{i:02d}" for i in range(systems)]
    with path.open("w") as handle:
        handle.write(
            "model_a,model_b,winner,sum_assistant_tokens_a,sum_assistant_tokens_b,header_count_a,"
            "header_count_b,list_count_a,list_count_b,bold_count_a,bold_count_b\n"
        )
        handle.writelines(
            f"{names[a[i]]},{names[b[i]]},{winner[i]},{int(tokens[i, 0])},{int(tokens[i, 1])},{marks[i, 0, 0]},"
            f"{marks[i, 1, 0]},{marks[i, 0, 1]},{marks[i, 1, 1]},{marks[i, 0, 2]},{marks[i, 1, 2]}\n"
            for i in range(n)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arena-python", required=True, help="An interpreter with arena-rank and pandas.")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="Synthetic battles per file.")
    parser.add_argument("--runs", type=int, default=3, help="Interleaved runs per file.")
    parser.add_argument("--fastchat-python", help="An interpreter with pandas and scipy for FastChat's rating code.")
    parser.add_argument("--fastchat-path", help="A FastChat checkout to put on that interpreter's PYTHONPATH.")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.runs < 1 or any(n < 100 for n in sizes):
        parser.error("need --runs >= 1 and sizes of at least 100 battles")
    env = {**os.environ, "DEBUG": "1", "JAX_PLATFORMS": "cpu"}
    workdir = Path(tempfile.mkdtemp(prefix="seplab-arena-"))
    files = (
        ([("PRD human votes", PRD, False)] if PRD.exists() else [])
        + [(f"{n:,} synthetic", workdir / f"battles-{n}.csv", False) for n in sizes]
        + [(f"{n:,} synthetic, style control", workdir / f"styled-{n}.csv", True) for n in sizes]
    )
    for label, path, style in files:
        if not path.exists():
            (write_styled_battles if style else write_battles)(path, int(label.split()[0].replace(",", "")))
    with_fastchat = bool(args.fastchat_python)
    print(
        "| battles | SepLab s | arena-rank s | time ratio | SepLab MB | arena-rank MB | memory ratio | max |Δ| "
        "rating | max |Δ| interval end | max |Δ| style coefficient |"
        + (
            " FastChat s | FastChat MB | time ratio to FastChat | memory ratio to FastChat | max |Δ| rating, FastChat |"
            if with_fastchat
            else ""
        )
    )
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|---|---|" if with_fastchat else ""))
    for label, path, style in files:
        ours, theirs, fast = [], [], []
        for _ in range(args.runs):
            ours.append(seplab(path, env, style))
            theirs.append(arena(args.arena_python, path, env, style))
            if with_fastchat:
                fast.append(fastchat(args.fastchat_python, args.fastchat_path, path, style))
        mine, reference = ours[0][2], theirs[0][2]
        coefficient = "–"
        if style:
            pairs = zip(mine.pop("_coefficients"), reference.pop("_coefficients"), strict=True)
            coefficient = f"{max(abs(x - y) for x, y in pairs):.2e}"
        rating = max(abs(mine[s][0] - reference[s][0]) for s in reference)
        ends = max(abs(mine[s][k] - reference[s][k]) for s in reference for k in (1, 2))
        t_ours, t_theirs = [r[0] for r in ours], [r[0] for r in theirs]
        m_ours, m_theirs = [r[1] for r in ours], [r[1] for r in theirs]
        extra = ""
        if fast:
            t_fast, m_fast = [r[0] for r in fast], [r[1] for r in fast]
            agree = "– (another model)" if style else f"{max(abs(mine[s][0] - fast[0][2][s]) for s in reference):.3f}"
            ratio = statistics.median(t_ours) / statistics.median(t_fast)
            extra = f" {span(t_fast)} | {max(m_fast):.0f} | {ratio:.2f} | {max(m_ours) / max(m_fast):.2f} | {agree} |"
        print(
            f"| {label} | {span(t_ours)} | {span(t_theirs)} | "
            f"{statistics.median(t_ours) / statistics.median(t_theirs):.2f} | {max(m_ours):.0f} | "
            f"{max(m_theirs):.0f} | {max(m_ours) / max(m_theirs):.2f} | {rating:.3f} | {ends:.3f} | {coefficient} |"
            + extra,
            flush=True,
        )


if __name__ == "__main__":
    main()
