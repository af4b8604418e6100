"""SepLab's `manage.py leaderboard` against FastChat's current rating code, the whole process as a user runs
it (interpreter start, imports, reading the battles file, ratings, 100 bootstrap rounds), on the same
synthetic battles files (20 systems, 10 % ties), interleaved runs, wall time and peak RSS of each process.

    python bench/leaderboard_fastchat.py [--sizes 10000,100000,1000000] [--runs 3]
        [--fastchat-python PATH] [--fastchat-path DIR]

FastChat is timed only if `fastchat.serve.monitor.rating_systems` and pandas import with --fastchat-python
(default: this interpreter), with --fastchat-path put on its PYTHONPATH; this script installs nothing and
contains no FastChat code: it calls FastChat's own functions (compute_elo, compute_bootstrap_elo, compute_bt,
compute_bootstrap_bt) on `pandas.read_csv` of the file, as FastChat's elo_analysis does. Without it, the
figures measured on this machine before the leaderboards were reworked are printed as the reference. bench/README.md
says how to set up FastChat beside the project.

FastChat has no separability-weighted ELO; sep-ELO is set against its ELO (the same work: an online pass and
100 bootstrap rounds). Peak RSS is what wait4 reports for the process (with FastChat's multiprocessing pool,
the largest of the process and its workers, as /usr/bin/time reports it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, cast

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ratings_scale import synthetic  # noqa: E402  (one generator for both leaderboard benchmarks)

METHODS = ("bt", "elo", "sep-elo")
# FastChat measured on this machine before the leaderboards were reworked (3 interleaved runs): seconds, MB.
REFERENCE = {
    (1_000_000, "bt"): ("4.0-6.2", 232),
    (1_000_000, "elo"): ("20-23", 941),
    (100_000, "bt"): ("3.0-4.8", None),
}
DRIVER = """
import json, sys
import pandas as pd
from fastchat.serve.monitor import rating_systems as rs
path, method, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
df = pd.read_csv(path)
if method == "bt":
    point = rs.compute_bt(df).to_dict()
    boot = rs.compute_bootstrap_bt(df, num_round=rounds)
else:
    point = rs.compute_elo(df)
    boot = rs.compute_bootstrap_elo(df, num_round=rounds)
print(json.dumps({"point": {k: float(v) for k, v in point.items()}, "median": boot.median().to_dict()}))
"""


def write_battles(path: Path, n: int, systems: int = 20, seed: int = 0) -> None:
    """The battles of bench/ratings_scale.py (n among ``systems`` models of normally spread strength, 10 % ties,
    a separability column) as a Chatbot-Arena CSV file."""
    a, b, score, delta = synthetic(n, systems, seed)
    winner = np.where(score == 0.5, "tie", np.where(score == 1.0, "model_a", "model_b"))
    names = [f"model-{i:02d}" for i in range(systems)]
    with path.open("w") as handle:
        handle.write("question_id,model_a,model_b,winner,separability\n")
        handle.writelines(f"q{i},{names[a[i]]},{names[b[i]]},{winner[i]},{delta[i]:.4f}\n" for i in range(n))


def measure(command: list[str], env: dict) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout) of one process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        pipe = cast(IO[bytes], process.stderr)  # stderr=subprocess.PIPE
        stderr = pipe.read().decode(errors="replace")
        pipe.close()
        out.seek(0)
        stdout = out.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{stderr[-2000:]}")
    return seconds, usage.ru_maxrss / 1024, stdout


def seplab(path: Path, method: str, rounds: int, env: dict) -> tuple[float, float, dict]:
    seconds, mb, out = measure(
        [
            sys.executable,
            "manage.py",
            "leaderboard",
            str(path),
            "--method",
            method,
            "--intervals",
            "bootstrap",
            "--bootstrap",
            str(rounds),
            "--json",
        ],
        env,
    )  # like for like
    board = json.loads(out)["leaderboard"]
    return seconds, mb, {r["system"]: r["online" if method != "bt" else "rating"] for r in board}


def fastchat(python: str, path: Path, method: str, rounds: int, env: dict) -> tuple[float, float, dict]:
    seconds, mb, out = measure([python, "-c", DRIVER, str(path), "bt" if method == "bt" else "elo", str(rounds)], env)
    return seconds, mb, json.loads(out.strip().splitlines()[-1])["point"]


def span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="battles per file, comma-separated")
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs of each program")
    parser.add_argument("--rounds", type=int, default=100, help="bootstrap rounds")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument(
        "--fastchat-python", default=sys.executable, help="interpreter with pandas where FastChat's rating code imports"
    )
    parser.add_argument("--fastchat-path", help="a FastChat checkout to put on that interpreter's PYTHONPATH")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    methods = args.methods.split(",")
    env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    fc_env = {**os.environ, **({"PYTHONPATH": args.fastchat_path} if args.fastchat_path else {})}
    check = subprocess.run(
        [args.fastchat_python, "-c", "import pandas, fastchat.serve.monitor.rating_systems"],
        env=fc_env,
        capture_output=True,
    )
    have_fastchat = check.returncode == 0
    workdir = Path(tempfile.mkdtemp(prefix="seplab-leaderboard-"))
    print(
        f"{args.rounds} bootstrap rounds, 20 systems, 10 % ties; {args.runs} interleaved runs; wall seconds "
        "(min-max) and peak RSS (MB, median) of the whole process"
    )
    if not have_fastchat:
        print(
            "FastChat's rating code does not import here: its figures are the reference measured on this machine "
            f"earlier ({check.stderr.decode().strip().splitlines()[-1] if check.stderr else 'no output'})"
        )
    # a cold start: the compiled ELO loops are not cached yet (their first run on a machine)
    cold_file = workdir / "cold.csv"
    write_battles(cold_file, 100_000)
    cold, _, _ = seplab(cold_file, "elo", args.rounds, {**env, "NUMBA_CACHE_DIR": str(workdir / "numba-cache")})
    warm, _, _ = seplab(cold_file, "elo", args.rounds, {**env, "NUMBA_CACHE_DIR": str(workdir / "numba-cache")})
    print(
        f"ELO at 100,000 battles: {cold:.2f} s the first time on a machine (its loops compiled and cached), "
        f"{warm:.2f} s after\n"
    )
    print(
        "| battles | method | SepLab s | SepLab MB | FastChat s | FastChat MB | time ratio | memory ratio "
        "| max abs diff, point ratings |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        path = workdir / f"battles-{n}.csv"
        write_battles(path, n)
        for method in methods:
            seplab(path, method, args.rounds, env)  # warm the file cache and the compiled loops' cache
            ours, theirs, diff = [], [], float("nan")
            for _ in range(args.runs):
                seconds, mb, board = seplab(path, method, args.rounds, env)
                ours.append((seconds, mb))
                if have_fastchat:
                    f_seconds, f_peak_mb, f_board = fastchat(args.fastchat_python, path, method, args.rounds, fc_env)
                    theirs.append((f_seconds, f_peak_mb))
                    if method != "sep-elo":
                        diff = max(abs(board[s] - f_board[s]) for s in board)
            times, mbs = [t for t, _ in ours], [m for _, m in ours]
            if theirs:
                f_times, f_mbs = [t for t, _ in theirs], [m for _, m in theirs]
                f_time, f_mb = span(f_times), f"{statistics.median(f_mbs):.0f}"
                ratio = f"{statistics.median(times) / statistics.median(f_times):.2f}"
                mem_ratio = f"{statistics.median(mbs) / statistics.median(f_mbs):.2f}"
            else:
                reference = REFERENCE.get((n, "elo" if method == "sep-elo" else method))
                f_time, f_mb = (reference[0], str(reference[1] or "-")) if reference else ("-", "-")
                ratio = mem_ratio = "(reference)" if reference else "-"
            label = method + (" (vs FastChat's ELO)" if method == "sep-elo" else "")
            shown_diff = "-" if diff != diff else f"{diff:.3f}"
            print(
                f"| {n:,} | {label} | {span(times)} | {statistics.median(mbs):.0f} | {f_time} | {f_mb} | {ratio} | "
                f"{mem_ratio} | {shown_diff} |",
                flush=True,
            )
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
