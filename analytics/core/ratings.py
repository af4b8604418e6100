"""ELO, separability-weighted ELO and Bradley-Terry with bootstrap intervals (SPEC §3; separability
paper Eq. 5-6; Chatbot Arena / FastChat's rating code for the conventions).

Battles are arrays: ``a`` and ``b`` (system indices, shape (n,)), ``score`` = outcome for a
(1 win, 0.5 tie, 0 loss), in processing order.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

INITIAL = 1000.0
SCALE = 400.0
BASE = 10.0


def online_elo(a: np.ndarray, b: np.ndarray, score: np.ndarray, n_systems: int, k: float | np.ndarray = 4.0,
               initial: float = INITIAL) -> np.ndarray:
    """Online ELO in the given order: E_A = 1 / (1 + 10^((R_B - R_A) / 400)), R_A += K (S_A - E_A),
    R_B -= K (S_A - E_A). ``k`` may be one value or one per battle (sep-ELO)."""
    ratings = np.full(n_systems, initial, dtype=np.float64)
    ks = np.broadcast_to(np.asarray(k, dtype=np.float64), np.shape(score))
    for i, j, s, kk in zip(a.tolist(), b.tolist(), np.asarray(score, dtype=np.float64).tolist(), ks.tolist(),
                           strict=True):
        expected = 1.0 / (1.0 + BASE ** ((ratings[j] - ratings[i]) / SCALE))
        update = kk * (s - expected)
        ratings[i] += update
        ratings[j] -= update
    return ratings


def separability_k(delta: np.ndarray, k: float = 4.0, threshold: float = 0.4, alpha: float = 2.0,
                   beta: float = 6.0) -> np.ndarray:
    """K_i = K * alpha / (1 + exp(-beta (delta_i - T))) (Eq. 6). K_sep(T) = K when alpha = 2."""
    return k * alpha / (1.0 + np.exp(-beta * (np.asarray(delta, dtype=np.float64) - threshold)))


def bootstrap_elo(a: np.ndarray, b: np.ndarray, score: np.ndarray, n_systems: int, k: float | np.ndarray = 4.0,
                  rounds: int = 100, seed: int = 0) -> np.ndarray:
    """ELO on ``rounds`` resamples (with replacement) of the battles, each in a random order, all rounds
    advanced together: (rounds, n_systems)."""
    n = len(score)
    rng = np.random.default_rng(seed)
    index = rng.integers(0, n, size=(n, rounds))  # row t: the t-th battle of every round (random order)
    ks = np.broadcast_to(np.asarray(k, dtype=np.float64), (n,))
    ratings = np.full((rounds, n_systems), INITIAL)
    columns = np.arange(rounds)
    score = np.asarray(score, dtype=np.float64)
    alpha = math.log(BASE) / SCALE
    for row in index:
        ia, ib = a[row], b[row]
        expected = expit(alpha * (ratings[columns, ia] - ratings[columns, ib]))
        update = ks[row] * (score[row] - expected)
        ratings[columns, ia] += update  # one battle per round per step: no repeated index
        ratings[columns, ib] -= update
    return ratings


def bradley_terry(a: np.ndarray, b: np.ndarray, score: np.ndarray, n_systems: int,
                  weights: np.ndarray | None = None, tol: float = 1e-6) -> np.ndarray:
    """Bradley-Terry maximum likelihood, ties counting as half a win each way, on the Arena scale
    1000 + 400 log10-odds (ratings centred on 1000)."""
    a, b = np.asarray(a), np.asarray(b)
    score = np.asarray(score, dtype=np.float64)
    w = np.ones(len(score)) if weights is None else np.asarray(weights, dtype=np.float64)
    alpha = math.log(BASE)

    def loss_and_grad(r: np.ndarray) -> tuple[float, np.ndarray]:
        p = expit(alpha * (r[a] - r[b]))
        p = np.clip(p, 1e-15, 1 - 1e-15)
        loss = -np.sum(w * (score * np.log(p) + (1 - score) * np.log(1 - p)))
        g = -alpha * (score - p) * w
        grad = np.zeros(n_systems)
        np.add.at(grad, a, g)
        np.add.at(grad, b, -g)
        return loss, grad

    result = minimize(loss_and_grad, np.zeros(n_systems), jac=True, method="L-BFGS-B",
                      options={"maxiter": 200, "gtol": tol})
    r = result.x - result.x.mean()
    return INITIAL + SCALE * r


def bootstrap_bradley_terry(a: np.ndarray, b: np.ndarray, score: np.ndarray, n_systems: int, rounds: int = 100,
                            seed: int = 0) -> np.ndarray:
    """BT on ``rounds`` resamples: unique (a, b, outcome) rows reweighted by multinomial counts (the
    same as resampling battles, far cheaper). (rounds, n_systems)."""
    rows = np.column_stack([a, b, np.round(np.asarray(score) * 2).astype(np.int64)])
    unique, counts = np.unique(rows, axis=0, return_counts=True)
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(len(score), counts / counts.sum(), size=rounds)
    return np.stack([bradley_terry(unique[:, 0], unique[:, 1], unique[:, 2] / 2.0, n_systems, d) for d in draws])


AGGREGATIONS = ("every", "majority", "one_sampled")


def aggregate_battles(group: np.ndarray, score: np.ndarray, how: str = "every",
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Which judgments become battles (SPEC §3: a multi-rater judgment is one battle; alternatives are options).

    ``group`` (n,) is the group of each battle (a rated pair for "majority", an item and system pair for
    "one_sampled"); ``score`` (n,) the outcome for the same system in every battle of a group. Returns the
    index of the battle that stands for each kept battle (for its systems and separability) and its score,
    groups in order of first appearance:
    "every" keeps all battles; "majority" makes one battle per group whose outcome is the majority of its
    scores (more wins than losses: 1, fewer: 0, level: 0.5); "one_sampled" keeps one battle per group drawn
    uniformly with ``seed`` — the separability paper's "we sample one rating for each input" (§4)."""
    group, score = np.asarray(group), np.asarray(score, dtype=np.float64)
    if how == "every":
        return np.arange(len(score)), score
    if how not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {how!r}; choose one of {AGGREGATIONS}")
    _, first, inverse = np.unique(group, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # groups in order of first appearance
    if how == "majority":
        lean = np.zeros(len(first))
        np.add.at(lean, inverse, np.sign(score - 0.5))
        return first[order], (np.sign(lean[order]) + 1) / 2
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(inverse == g) for g in order]
    chosen = np.array([m[rng.integers(len(m))] for m in members], dtype=np.int64)
    return chosen, score[chosen]


@dataclasses.dataclass(frozen=True)
class Interval:
    estimate: np.ndarray  # the point estimate on all battles
    median: np.ndarray
    low: np.ndarray  # 2.5th percentile
    high: np.ndarray  # 97.5th percentile
    rank: np.ndarray


def summarize(point: np.ndarray, samples: np.ndarray) -> Interval:
    low, median, high = np.percentile(samples, [2.5, 50, 97.5], axis=0)
    return Interval(point, median, low, high, ci_ranks(low, high))


def ci_ranks(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """rank = 1 + number of systems whose lower bound exceeds this system's upper bound."""
    return 1 + np.sum(low[None, :] > high[:, None], axis=1)


def win_rate_matrix(a: np.ndarray, b: np.ndarray, score: np.ndarray, n_systems: int) -> tuple[np.ndarray, np.ndarray]:
    """(wins, battles): wins[i, j] = points of i against j (ties half), battles[i, j] = their battles.
    The win rate is wins / battles where battles > 0."""
    wins = np.zeros((n_systems, n_systems))
    battles = np.zeros((n_systems, n_systems))
    score = np.asarray(score, dtype=np.float64)
    np.add.at(wins, (a, b), score)
    np.add.at(wins, (b, a), 1 - score)
    np.add.at(battles, (a, b), 1)
    np.add.at(battles, (b, a), 1)
    return wins, battles


def win_ratio_ranking(a: np.ndarray, b: np.ndarray, score: np.ndarray, n_systems: int) -> np.ndarray:
    """Each system's share of points over all its battles (ties half) — the comparative-assessment
    paper's win-ratio ranking."""
    wins, battles = win_rate_matrix(a, b, score, n_systems)
    total = battles.sum(axis=1)
    return np.divide(wins.sum(axis=1), total, out=np.full(n_systems, np.nan), where=total > 0)
