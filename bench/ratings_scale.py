"""Leaderboard speed: ELO + sep-ELO + Bradley-Terry, each with 100 bootstrap rounds, on 10^4, 10^5 and
10^6 synthetic judgments over 20 systems, against a straightforward implementation measured in the
same run: a per-judgment Python loop for (sep-)ELO, and Bradley-Terry refitted on every resampled
battle list instead of on reweighted unique outcomes.

    python bench/ratings_scale.py [--sizes 10000,100000,1000000] [--rounds 100]

The straightforward versions are timed on a few rounds and scaled to the full number of rounds
(said so in the output) where running them in full would take minutes.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analytics.core import ratings  # noqa: E402


def synthetic(n: int, systems: int = 20, seed: int = 0):
    rng = np.random.default_rng(seed)
    strength = rng.normal(0, 150, systems)
    a = rng.integers(0, systems, n)
    b = (a + rng.integers(1, systems, n)) % systems
    p = 1 / (1 + 10 ** ((strength[b] - strength[a]) / 400))
    u = rng.random(n)
    score = np.where(u < 0.1, 0.5, (u < 0.1 + 0.9 * p).astype(float))
    delta = rng.uniform(0, 1, n)
    return a, b, score, delta


def naive_bootstrap_elo(a, b, score, n_systems, k, rounds, seed=0):
    """The per-judgment loop anyone would write first."""
    rng = np.random.default_rng(seed)
    n = len(score)
    ks = np.broadcast_to(np.asarray(k, dtype=float), (n,))
    out = []
    a_l, b_l, s_l, k_l = a.tolist(), b.tolist(), score.tolist(), ks.tolist()
    for _ in range(rounds):
        r = [1000.0] * n_systems
        for t in rng.integers(0, n, n).tolist():
            i, j = a_l[t], b_l[t]
            e = 1 / (1 + 10 ** ((r[j] - r[i]) / 400))
            u = k_l[t] * (s_l[t] - e)
            r[i] += u
            r[j] -= u
        out.append(r)
    return np.array(out)


def naive_bootstrap_bt(a, b, score, n_systems, rounds, seed=0):
    rng = np.random.default_rng(seed)
    n = len(score)
    return np.stack(
        [
            ratings.bradley_terry(a[idx], b[idx], score[idx], n_systems)
            for idx in (rng.integers(0, n, n) for _ in range(rounds))
        ]
    )


def timed(fn, *args, **kwargs) -> float:
    started = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    rounds, systems = args.rounds, 20
    # Warm up first: the first call of each path imports scipy / numba and loads the compiled ELO loops (their
    # cost per process is in bench/leaderboard_fastchat.py, which times whole processes); this table is the work.
    for n in (1_000, ratings.COMPILED_FROM):
        a, b, score, delta = synthetic(n, systems)
        ratings.bootstrap_elo(a, b, score, systems, ratings.separability_k(delta), 2)
        ratings.online_elo(a, b, score, systems)
        ratings.bootstrap_bradley_terry(a, b, score, systems, 2)
    print(
        f"{rounds} bootstrap rounds, {systems} systems; seconds, in one process after a warm-up "
        "(ratio = straightforward / SepLab)\n"
    )
    print("| judgments | ELO | sep-ELO | BT | all three | straightforward | ratio |\n|---|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        a, b, score, delta = synthetic(n, systems)
        k = ratings.separability_k(delta)
        t_elo = timed(ratings.online_elo, a, b, score, systems) + timed(
            ratings.bootstrap_elo, a, b, score, systems, 4.0, rounds
        )
        t_sep = timed(ratings.online_elo, a, b, score, systems, k) + timed(
            ratings.bootstrap_elo, a, b, score, systems, k, rounds
        )
        t_bt = timed(ratings.bradley_terry, a, b, score, systems) + timed(
            ratings.bootstrap_bradley_terry, a, b, score, systems, rounds
        )
        ours = t_elo + t_sep + t_bt
        # straightforward: time a few rounds where the full run would take minutes, and scale
        probe = rounds if n <= 10_000 else max(1, math.ceil(rounds * 10_000 / n))
        naive = (
            (
                timed(naive_bootstrap_elo, a, b, score, systems, 4.0, probe)
                + timed(naive_bootstrap_elo, a, b, score, systems, k, probe)
                + timed(naive_bootstrap_bt, a, b, score, systems, probe)
            )
            * rounds
            / probe
        )
        note = "" if probe == rounds else f" (scaled from {probe} round{'s' if probe > 1 else ''})"
        print(
            f"| {n:,} | {t_elo:.2f} | {t_sep:.2f} | {t_bt:.2f} | {ours:.2f} | {naive:.1f}{note} | "
            f"{naive / ours:.1f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
