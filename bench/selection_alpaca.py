"""Selection methods on real data: AlpacaEval-1 dev models vs the baseline, the GPT-4 judge as oracle.

For every dev pair and seed, an 80 % pool is the test set; a method succeeds when the majority over
its selected items names the pool's winner. Prints success per budget (mean over pairs, and the
worst pair's gap to random), the iterative algorithm's success / error / inconclusive and mean
annotations, and writes the success-vs-budget plot to bench/selection_alpaca.png and .svg.

    python bench/selection_alpaca.py [--seeds 40] [--budgets 10,20,40] [--methods ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.core.simulation import (  # noqa: E402
    draw_pools,
    iterative_random_report,
    iterative_report,
    success_rates,
)
from bench.alpaca_data import DATA, dev_models, load_pair  # noqa: E402
from selection.core import sampling  # noqa: E402
from selection.strategies import STRATEGIES, SelectionContext  # noqa: E402

METHODS = {
    "random": lambda pool, budget, rng: sampling.random_selection(len(pool.oracle), budget, rng),
    "diffuse": lambda pool, budget, rng: sampling.diffuse_selection(pool.tree, budget),
    "stratified-all": lambda pool, budget, rng: sampling.cluster_stratified_selection(pool.tree, budget, rng),
    # the context (and so its Ward tree) is built once per pool, as one study builds it once
    "stratified": lambda pool, budget, rng: np.array(
        STRATEGIES["stratified"].select(
            pool.__dict__.setdefault("context", SelectionContext(len(pool.oracle), lambda: pool.x)), budget, rng
        )
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--budgets", default="10,20,40")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--risk", type=float, default=0.1)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    if not DATA.exists():
        sys.exit(f"{DATA} is missing: this benchmark needs ../shared/data/alpaca_eval")
    budgets = [int(b) for b in args.budgets.split(",")]
    methods = {m: METHODS[m] for m in args.methods.split(",")}
    per_pair: dict[str, dict[str, dict[int, float]]] = {}
    iterative, iterative_random = {}, {}
    started = time.perf_counter()
    for model in dev_models():
        x, oracle, _ = load_pair(model)
        pools = draw_pools(x, oracle, args.seeds)
        per_pair[model] = success_rates(pools, methods, budgets)
        iterative[model] = iterative_report(pools, risk=args.risk)
        iterative_random[model] = iterative_random_report(pools, risk=args.risk)
        cells = "  ".join(f"{m} " + "/".join(f"{per_pair[model][m][b]:.2f}" for b in budgets) for m in methods)
        print(f"{model:24s} {cells}", flush=True)
    print(f"\n{len(per_pair)} dev pairs, {args.seeds} seeds, budgets {budgets}, {time.perf_counter() - started:.0f} s")
    print("\n| method | " + " | ".join(f"N={b}" for b in budgets) + " | worst pair vs random (N>=20) |")
    print("|---|" + "---|" * (len(budgets) + 1))
    for m in methods:
        means = [np.mean([per_pair[p][m][b] for p in per_pair]) for b in budgets]
        gaps = [per_pair[p][m][b] - per_pair[p]["random"][b] for p in per_pair for b in budgets if b >= 20]
        worst = min(gaps) if gaps and "random" in methods else float("nan")
        print(f"| {m} | " + " | ".join(f"{v:.3f}" for v in means) + f" | {worst:+.3f} |")
    print(f"\nIterative, risk p = {args.risk}, min 5, budget 200 (error is what the rule promises to keep <= p):")
    print("| method | success | error | inconclusive | mean annotations |\n|---|---|---|---|---|")
    for name, reports in (("DiffUse (Algorithm 1)", iterative), ("random, same stopping rule", iterative_random)):
        rep = list(reports.values())
        print(
            f"| {name} | {np.mean([r.success for r in rep]):.3f} | {np.mean([r.error for r in rep]):.3f} | "
            f"{np.mean([r.inconclusive for r in rep]):.3f} | {np.mean([r.mean_annotations for r in rep]):.1f} |"
        )
    if not args.no_plot:
        plot(per_pair, methods, budgets)


def plot(per_pair, methods, budgets) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for m in methods:
        ax.plot(budgets, [np.mean([per_pair[p][m][b] for p in per_pair]) for b in budgets], marker="o", label=m)
    ax.set_xlabel("budget N (annotated items)")
    ax.set_ylabel("success rate (mean over dev pairs)")
    ax.set_title("AlpacaEval-1 dev pairs vs baseline, GPT-4 judge as oracle")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    out = Path(__file__).with_name("selection_alpaca")
    fig.savefig(out.with_suffix(".png"), dpi=120)
    fig.savefig(out.with_suffix(".svg"))
    print(f"plot: {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
