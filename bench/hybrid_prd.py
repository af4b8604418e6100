"""What a judge is worth, measured as it is delivered: the realised efficiency of every win-rate estimate the product
shows, with its coverage beside it, on the PRD Vicuna-80 data (10 system pairs, ~80 questions each, human votes and
five LLM judges in both orders; bench/prd_data.py).

Each pair's 80 questions stand for the population the questions come from. For *items like these* a simulated study
is 64 questions drawn from them at random (with replacement) and the target is the mean human score over the 80;
for *these items* the study is the 80 questions and the target their mean. People label n questions by each design
and each estimator (analytics/core/ppi.py) gives its estimate, its 95 % interval and the efficiency it claims. The
realised efficiency is people alone's mean squared error with n random labels (exact: sigma^2 / n, or
(1 - n / N) S^2 / n for these items) over the estimator's, so 1.04 means one label with the judge did the work of
1.04 labels by people alone ("4 % saved"). tests/analytics/core/test_coverage_prd.py asserts the same on fewer
rounds.

Then Bradley-Terry strengths (PPI++ logistic M-estimation, `ppi_bradley_terry`): n questions of every pair labelled,
the judge on the rest of a 64-question study per pair; coverage of the four non-reference strengths against the fit
on all 80 questions per pair, the claimed efficiency (squared ratio of interval widths) and the realised one.

    python bench/hybrid_prd.py [--n 10,20,40] [--rounds 1000] [--bt-rounds 200] [--processes 2]
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analytics.core.ppi import ppi_bradley_terry  # noqa: E402
from bench.prd_data import JUDGES, POOL, PRD, design_estimates, load, reference_mse, summarise  # noqa: E402


def _pair_rows(pair, n, rounds, seed, finite):
    rng = np.random.default_rng([seed, n, int(finite), zlib.crc32("/".join(pair.pair).encode())])
    truth = float(pair.y.mean())
    return {
        name: (*summarise(estimates, truth), reference_mse(pair, n, finite))
        for name, estimates in design_estimates(pair, n, rounds, rng, finite, judges=JUDGES).items()
    }


def estimates_table(pairs, sizes, rounds, seed, processes) -> None:
    import multiprocessing

    for finite in (False, True):
        target = "these items (the study's 80 questions)" if finite else "items like these (64-question studies)"
        print(
            f"\nWin rates, {target}: coverage / mean width / efficiency claimed / realised "
            f"(labels saved = realised - 1); {rounds} studies per pair, 10 pairs"
        )
        results = {}
        for n in sizes:
            jobs = [(pair, n, rounds, seed, finite) for pair in pairs]
            with multiprocessing.get_context("fork").Pool(processes) as workers:
                per_pair = workers.starmap(_pair_rows, jobs)
            results[n] = per_pair
        names = list(results[sizes[0]][0])
        print("estimate".ljust(32) + "".join(f"n = {n}".rjust(34) for n in sizes))
        for name in names:
            cells = []
            for n in sizes:
                rows = [p[name] for p in results[n]]
                coverage = np.mean([r[0] for r in rows])
                width = np.mean([r[2] for r in rows])
                claimed = np.mean([r[3] for r in rows])
                realised = sum(r[4] for r in rows) / sum(r[1] for r in rows)
                cells.append(f"{coverage:.3f} {width:.3f} {claimed:.3f} {realised:.3f}".rjust(34))
            print(name.ljust(32) + "".join(cells))


def strengths_table(pairs, sizes, rounds, seed) -> None:
    index = {m: i for i, m in enumerate(sorted({s for p in pairs for s in p.pair}))}
    a = np.concatenate([[index[p.pair[0]]] * len(p.y) for p in pairs])
    b = np.concatenate([[index[p.pair[1]]] * len(p.y) for p in pairs])
    y_all = np.concatenate([p.y for p in pairs])
    truth = ppi_bradley_terry(a, b, y_all, y_all, a[:1], b[:1], y_all[:1], len(index), lam=0.0).theta
    print(
        f"\nBradley-Terry strengths, items like these ({rounds} rounds; reference {min(index)}): coverage hybrid / "
        "people alone, efficiency claimed / realised, lambda"
    )
    print("judge".ljust(14) + "".join(f"n = {n}".rjust(36) for n in sizes))
    rng = np.random.default_rng(seed)
    for judge in (*JUDGES, "all judges"):
        cells = []
        for n in sizes:
            covered = covered_people = cells_count = 0
            errors, errors_people, claims, lambdas = [], [], [], []
            for _ in range(rounds):
                parts: list[list[float]] = [[] for _ in range(7)]
                for p in pairs:
                    pick = rng.integers(0, len(p.y), POOL)
                    y = p.y[pick]
                    f = (p.f_all if judge == "all judges" else p.f[judge])[pick]
                    for k, values in enumerate(
                        (
                            [index[p.pair[0]]] * n,
                            [index[p.pair[1]]] * n,
                            y[:n],
                            f[:n],
                            [index[p.pair[0]]] * (POOL - n),
                            [index[p.pair[1]]] * (POOL - n),
                            f[n:],
                        )
                    ):
                        parts[k].extend(values)
                a_labelled, b_labelled, y_labelled, f_labelled, a_unlabelled, b_unlabelled, f_unlabelled = (
                    np.array(v) for v in parts
                )
                args = (
                    a_labelled,
                    b_labelled,
                    y_labelled,
                    f_labelled,
                    a_unlabelled,
                    b_unlabelled,
                    f_unlabelled,
                    len(index),
                )
                hybrid, people = ppi_bradley_terry(*args), ppi_bradley_terry(*args, lam=0.0)
                covered += int(np.sum((hybrid.low[1:] <= truth[1:]) & (truth[1:] <= hybrid.high[1:])))
                covered_people += int(np.sum((people.low[1:] <= truth[1:]) & (truth[1:] <= people.high[1:])))
                cells_count += len(index) - 1
                errors.append((hybrid.theta[1:] - truth[1:]) ** 2)
                errors_people.append((people.theta[1:] - truth[1:]) ** 2)
                claims.append(np.mean(((people.high - people.low)[1:] / (hybrid.high - hybrid.low)[1:]) ** 2))
                lambdas.append(hybrid.lam)
            realised = np.sum(errors_people) / np.sum(errors)
            cells.append(
                f"{covered / cells_count:.3f} / {covered_people / cells_count:.3f}  "
                f"{np.mean(claims):.3f} / {realised:.3f}  {np.mean(lambdas):.2f}".rjust(36)
            )
        print(judge.ljust(14) + "".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", default="10,20,40", help="human-labelled questions per pair, comma-separated")
    parser.add_argument("--rounds", type=int, default=1000, help="simulated studies per pair, n and target")
    parser.add_argument("--bt-rounds", type=int, default=200, help="simulated studies for the strengths")
    parser.add_argument("--processes", type=int, default=2, help="worker processes for the win-rate tables")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not (PRD / "ratings-gpt4").is_dir():
        sys.exit(f"{PRD} is missing: the PRD data lives in ../shared/data (see shared/data/README.md)")
    sizes = [int(v) for v in args.n.split(",")]
    pairs = load()
    print(
        "Per question, corr(human Y, judge f) averaged over the 10 pairs: "
        + ", ".join(f"{j} {np.mean([np.corrcoef(p.y, p.f[j])[0, 1] for p in pairs]):.2f}" for j in JUDGES)
        + f", all judges' mean {np.mean([np.corrcoef(p.y, p.f_all)[0, 1] for p in pairs]):.2f}"
    )
    estimates_table(pairs, sizes, args.rounds, args.seed, args.processes)
    strengths_table(pairs, [n for n in sizes if n <= 20], args.bt_rounds, args.seed)


if __name__ == "__main__":
    main()
