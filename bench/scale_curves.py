"""How SepLab's cost grows with items, judgments and raters, measured on this machine, with a log-log
plot (bench/scale_curves.png) and the fitted growth exponent of each curve (cost ∝ size^k).

    python bench/scale_curves.py [--items 1000,2000,5000,10000,50000]
                                 [--judgments 1000,10000,100000,1000000]
                                 [--raters 10,25,50,100,200] [--seconds 20] [--database postgres|sqlite]

- items: building the selection tree of one system pair (exact Ward up to 20,000 items, two-stage
  above; `selection_scale.py --one-size`, each size in its own process) and its peak memory;
- judgments: ELO + sep-ELO + Bradley-Terry with 100 bootstrap rounds (`ratings_scale.py`'s data);
- raters: `load_raters.py` at a person's pace against gunicorn (requests/s, next-pair p50 / p95).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analytics.core import ratings  # noqa: E402
from bench.ratings_scale import synthetic as synthetic_judgments  # noqa: E402


def exponent(sizes, costs) -> float:
    """Slope of log(cost) against log(size): cost grows like size^k."""
    return float(np.polyfit(np.log(np.asarray(sizes, float)), np.log(np.asarray(costs, float)), 1)[0])


def items_curve(sizes: list[int]) -> list[dict]:
    rows = []
    for n in sizes:
        out = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "selection_scale.py"), "--one-size", str(n)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(
            f"  items {n:>7,}: {rows[-1]['method']}, tree {rows[-1]['tree_s']} s, peak {rows[-1]['peak_rss_mb']} MB",
            flush=True,
        )
    return rows


def judgments_curve(sizes: list[int], rounds: int = 100, systems: int = 20) -> list[dict]:
    rows = []
    for n in sizes:
        a, b, score, delta = synthetic_judgments(n, systems)
        k = ratings.separability_k(delta)
        started = time.perf_counter()
        ratings.online_elo(a, b, score, systems)
        ratings.bootstrap_elo(a, b, score, systems, 4.0, rounds)
        ratings.online_elo(a, b, score, systems, k)
        ratings.bootstrap_elo(a, b, score, systems, k, rounds)
        ratings.bradley_terry(a, b, score, systems)
        ratings.bootstrap_bradley_terry(a, b, score, systems, rounds)
        rows.append({"n": n, "seconds": round(time.perf_counter() - started, 3)})
        print(f"  judgments {n:>9,}: {rows[-1]['seconds']} s", flush=True)
    return rows


NEXT = re.compile(r"next pair\s+ms: p50 ([\d.]+)\s+p95 ([\d.]+)")
LAST = re.compile(
    r"raters=(\d+) requests=(\d+) p95_next_ms=([\d.]+) p95_submit_ms=([\d.]+) errors=(\d+) "
    r"lost=(\d+) duplicated=(\d+)"
)
RATE = re.compile(r"\(([\d.]+)/s\)")


def raters_curve(counts: list[int], seconds: float, database: str) -> list[dict]:
    rows = []
    for n in counts:
        out = subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "load_raters.py"),
                "--raters",
                str(n),
                "--seconds",
                str(seconds),
                "--database",
                database,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        last, nxt, rate = LAST.search(out), NEXT.search(out), RATE.search(out)
        if last is None or nxt is None or rate is None:
            raise RuntimeError(f"load_raters printed no summary:\n{out}")
        row = {
            "n": n,
            "requests_per_s": float(rate.group(1)),
            "p50_next_ms": float(nxt.group(1)),
            "p95_next_ms": float(last.group(3)),
            "p95_submit_ms": float(last.group(4)),
            "errors": int(last.group(5)),
            "lost": int(last.group(6)),
            "duplicated": int(last.group(7)),
        }
        rows.append(row)
        print(
            f"  raters {n:>4}: {row['requests_per_s']} req/s, next p50 {row['p50_next_ms']} ms, "
            f"p95 {row['p95_next_ms']} ms, lost {row['lost']}, duplicated {row['duplicated']}",
            flush=True,
        )
    return rows


def plot(items: list[dict], judgments: list[dict], raters: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    ax = axes[0]
    if items:
        n = [r["n"] for r in items]
        ax.loglog(n, [r["tree_s"] for r in items], "o-", label="tree build (s)")
        ax.loglog(n, [r["peak_rss_mb"] / 1000 for r in items], "s--", label="peak memory (GB)")
        exact = [r for r in items if r["method"] == "exact Ward"]
        if exact:
            ax.loglog(
                [r["n"] for r in exact],
                [exact[0]["tree_s"] * (r["n"] / exact[0]["n"]) ** 2 for r in exact],
                ":",
                color="grey",
                label="∝ n² (reference)",
            )
            ax.axvline(max(r["n"] for r in exact), color="grey", lw=0.8, ls=":")
            ax.text(max(r["n"] for r in exact), ax.get_ylim()[0] * 1.5, " two-stage →", fontsize=8, color="grey")
    ax.set(xlabel="items in one system pair", title="Selection tree (DiffUse / stratified)")
    ax.legend(fontsize=8)
    ax = axes[1]
    if judgments:
        n = [r["n"] for r in judgments]
        ax.loglog(n, [r["seconds"] for r in judgments], "o-", label="ELO + sep-ELO + BT, 100 bootstraps (s)")
        ax.loglog(n, [judgments[0]["seconds"] * x / n[0] for x in n], ":", color="grey", label="∝ n (reference)")
    ax.set(xlabel="judgments", title="Leaderboards with intervals")
    ax.legend(fontsize=8)
    ax = axes[2]
    if raters:
        n = [r["n"] for r in raters]
        ax.loglog(n, [r["p50_next_ms"] for r in raters], "o-", label="next pair p50 (ms)")
        ax.loglog(n, [r["p95_next_ms"] for r in raters], "s-", label="next pair p95 (ms)")
        ax.loglog(n, [r["requests_per_s"] for r in raters], "^--", label="requests/s")
        ax.axhline(50, color="red", lw=0.8, ls=":", label="50 ms target")
    ax.set(xlabel="concurrent raters (human pace)", title="Serving raters (gunicorn, 2 cores)")
    ax.legend(fontsize=8)
    for ax in axes:
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", default="1000,2000,5000,10000,50000", help="comma-separated; empty to skip")
    parser.add_argument("--judgments", default="1000,10000,100000,1000000", help="comma-separated; empty to skip")
    parser.add_argument("--raters", default="10,25,50,100,200", help="comma-separated; empty to skip")
    parser.add_argument("--seconds", type=float, default=20, help="length of each load run")
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "scale_curves.png")
    args = parser.parse_args()

    def sizes(text: str) -> list[int]:
        try:
            values = [int(s) for s in text.split(",") if s.strip()]
        except ValueError:
            parser.error(f"sizes are comma-separated whole numbers, got {text!r}")
        if any(v <= 0 for v in values):
            parser.error(f"sizes must be greater than 0, got {text!r}")
        return values

    print("items:")
    items = items_curve(sizes(args.items))
    print("judgments:")
    judgments = judgments_curve(sizes(args.judgments))
    print("raters:")
    raters = raters_curve(sizes(args.raters), args.seconds, args.database)
    plot(items, judgments, raters, args.out)
    print(f"\nplot: {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}\n")
    print("| axis | sizes | cost | grows like size^k |\n|---|---|---|---|")
    exact = [r for r in items if r["method"] == "exact Ward"]
    if len(exact) >= 2:
        print(
            f"| items (exact Ward) | {exact[0]['n']:,}–{exact[-1]['n']:,} | tree build s: "
            f"{' / '.join(str(r['tree_s']) for r in exact)} | "
            f"{exponent([r['n'] for r in exact], [r['tree_s'] for r in exact]):.2f} |"
        )
        print(
            f"| items (exact Ward) | {exact[0]['n']:,}–{exact[-1]['n']:,} | peak MB: "
            f"{' / '.join(str(r['peak_rss_mb']) for r in exact)} | "
            f"{exponent([r['n'] for r in exact], [r['peak_rss_mb'] for r in exact]):.2f} |"
        )
    for r in items:
        if r["method"] != "exact Ward":
            print(f"| items (two-stage) | {r['n']:,} | tree build {r['tree_s']} s, peak {r['peak_rss_mb']} MB | — |")
    if len(judgments) >= 2:
        print(
            f"| judgments | {judgments[0]['n']:,}–{judgments[-1]['n']:,} | s: "
            f"{' / '.join(str(r['seconds']) for r in judgments)} | "
            f"{exponent([r['n'] for r in judgments], [r['seconds'] for r in judgments]):.2f} |"
        )
    if len(raters) >= 2:
        n = [r["n"] for r in raters]
        for key, label in (
            ("requests_per_s", "requests/s"),
            ("p50_next_ms", "next p50 ms"),
            ("p95_next_ms", "next p95 ms"),
        ):
            print(
                f"| raters | {n[0]}–{n[-1]} | {label}: {' / '.join(str(r[key]) for r in raters)} | "
                f"{exponent(n, [r[key] for r in raters]):.2f} |"
            )
        print(
            f"\nlost {sum(r['lost'] for r in raters)}, duplicated {sum(r['duplicated'] for r in raters)}, "
            f"errors {sum(r['errors'] for r in raters)} over all load runs"
        )


if __name__ == "__main__":
    main()
