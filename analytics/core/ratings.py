"""ELO, separability-weighted ELO and Bradley-Terry with bootstrap intervals (docs/ratings.md;
separability paper Eq. 5-6; Chatbot Arena / FastChat's rating code for the conventions).

Battles are arrays: ``a`` and ``b`` (system indices, shape (n,)), ``score`` = outcome for a
(1 win, 0.5 tie, 0 loss), in processing order.

ELO is sequential within a pass, so from COMPILED_FROM battles its loops are compiled with numba
(analytics/core/elo_loops.py), below with the same steps in numpy and Python;
Bradley-Terry is fitted on the distinct (a, b, outcome) rows weighted by their counts, which is the same
likelihood as over every battle. numba and scipy.optimize are imported by the function that needs them:
``manage.py leaderboard`` then loads only what its method uses (each costs 50-70 MB and up to half a
second at start, bench/README.md, "Leaderboards").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from analytics.core import clusters, style

INITIAL = 1000.0
SCALE = 400.0
BASE = 10.0
# Random battle indices are drawn this many battles of every round at a time, so the bootstrap holds
# rounds x CHUNK indices instead of rounds x n (800 MB for 10^6 battles and 100 rounds).
CHUNK = 1 << 15
# From this many battles ELO runs compiled (elo_loops). Loading numba and its compiled code costs ~0.6 s and
# ~130 MB once per process, more than the numpy and Python loops spend on fewer battles (bench/README.md).
COMPILED_FROM = 50_000
# The bootstrap by item (the report's and the arena board's) runs compiled from fewer battles: its numpy rounds cost
# ~0.34 s at 10^4 battles against ~0.06 s compiled, and the worker that refreshes after every arena vote loads numba
# once (bench/README.md, "The arena board").
COMPILED_ITEMS_FROM = 5_000


def online_elo(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    score: npt.ArrayLike,
    n_systems: int,
    k: float | npt.NDArray[np.float64] = 4.0,
    initial: float = INITIAL,
) -> npt.NDArray[np.float64]:
    """Online ELO in the given order: E_A = 1 / (1 + 10^((R_B - R_A) / 400)), R_A += K (S_A - E_A),
    R_B -= K (S_A - E_A). ``k`` may be one value or one per battle (sep-ELO)."""
    a, b, score, ks = _elo_inputs(a, b, score, k)
    ratings = np.full(n_systems, initial, dtype=np.float64)
    if len(score) >= COMPILED_FROM:
        from analytics.core import elo_loops

        elo_loops.in_order(ratings, a, b, score, ks, math.log(BASE) / SCALE)
        return ratings
    r = ratings.tolist()
    per_battle = ks.tolist() if len(ks) > 1 else None
    constant = float(ks[0])
    for t, (i, j, s) in enumerate(zip(a.tolist(), b.tolist(), score.tolist(), strict=True)):
        update = (per_battle[t] if per_battle else constant) * (s - 1.0 / (1.0 + BASE ** ((r[j] - r[i]) / SCALE)))
        r[i] += update
        r[j] -= update
    return np.array(r)


def separability_k(
    delta: npt.ArrayLike, k: float = 4.0, threshold: float = 0.4, alpha: float = 2.0, beta: float = 6.0
) -> npt.NDArray[np.float64]:
    """K_i = K * alpha / (1 + exp(-beta (delta_i - T))) (Eq. 6). K_sep(T) = K when alpha = 2."""
    return k * alpha / (1.0 + np.exp(-beta * (np.asarray(delta, dtype=np.float64) - threshold)))


def bootstrap_elo(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    score: npt.ArrayLike,
    n_systems: int,
    k: float | npt.NDArray[np.float64] = 4.0,
    rounds: int = 100,
    seed: int = 0,
    items: npt.ArrayLike | None = None,
) -> npt.NDArray[np.float64]:
    """ELO on ``rounds`` resamples (with replacement) of the battles, each in a random order: (rounds, n_systems).

    Round r plays n battles drawn uniformly with replacement, in the order drawn (so each round is a resample
    in a random order, docs/ratings.md#bootstrap). The draws come from ``np.random.default_rng(seed)``, CHUNK
    battles of every round at a time; from COMPILED_FROM battles the rounds run compiled and in parallel on the
    machine's cores. With ``items`` (n,), each battle's item, a round draws the items instead, whole, and plays their
    battles in a random order (``item_bootstrap.drawn_item_battles``, docs/ratings.md#bootstrap-by-item), compiled
    from COMPILED_ITEMS_FROM battles."""
    a, b, score, ks = _elo_inputs(a, b, score, k)
    n = len(score)
    ratings = np.full((rounds, n_systems), INITIAL)
    if n == 0 or rounds == 0:
        return ratings
    if items is not None:  # one more battle, of K = 0, fills the shorter rounds; about CHUNK battles a round at a time
        from analytics.core.item_bootstrap import drawn_item_battles

        a, b, score, ks = (
            np.append(a, 0),
            np.append(b, 0),
            np.append(score, 0.5),
            np.append(np.broadcast_to(ks, (n,)), 0.0),
        )
        compiled_items = n >= min(COMPILED_FROM, COMPILED_ITEMS_FROM)
        coded = np.column_stack([battle_codes(a, b, score), ks.view(np.uint64)]) if compiled_items else None
        rng, step = np.random.default_rng(seed), max(1, rounds * CHUNK // n)
        for start in range(0, rounds, step):
            rows = ratings[start : start + step]  # a view: the loops advance these rounds in place
            index = drawn_item_battles(items, len(rows), rng, pad=n)
            if coded is None:
                _resampled_rounds_numpy(rows, a, b, score, ks, index)
            else:
                from analytics.core import elo_loops

                elo_loops.resampled_rounds(rows, coded, 0.0, index, math.log(BASE) / SCALE)
        return ratings
    compiled = n >= COMPILED_FROM
    if compiled:
        from analytics.core import elo_loops

        battles = battle_codes(a, b, score)[:, None]
        if len(ks) > 1:  # each battle's K beside its code (elo_loops.resampled_rounds)
            battles = np.column_stack([battles[:, 0], ks.view(np.uint64)])
    rng = np.random.default_rng(seed)
    index_type = np.int32 if n < 2**31 else np.int64
    for start in range(0, n, CHUNK):
        index = rng.integers(0, n, size=(rounds, min(CHUNK, n - start)), dtype=index_type)
        if compiled:
            elo_loops.resampled_rounds(ratings, battles, float(ks[0]), index, math.log(BASE) / SCALE)
        else:
            _resampled_rounds_numpy(ratings, a, b, score, ks, index)
    return ratings


def _resampled_rounds_numpy(
    ratings: npt.NDArray[np.float64],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    score: npt.NDArray[np.float64],
    ks: npt.NDArray[np.float64],
    index: npt.NDArray[np.integer],  # int32 or int64
) -> None:
    """``elo_loops.resampled_rounds`` for fewer than COMPILED_FROM battles: every round advanced together, one
    numpy step per battle position (FastChat's ``fit_vectorized_elo``)."""
    alpha = math.log(BASE) / SCALE
    rows = np.arange(ratings.shape[0])
    ia, ib, s = a[index], b[index], score[index]
    kk = ks[index] if len(ks) > 1 else np.full(index.shape, ks[0])
    for t in range(index.shape[1]):
        i, j = ia[:, t], ib[:, t]
        update = kk[:, t] * (s[:, t] - 1.0 / (1.0 + np.exp(alpha * (ratings[rows, j] - ratings[rows, i]))))
        ratings[rows, i] += update  # one battle per round per step: no index repeats within a step
        ratings[rows, j] -= update


def _elo_inputs(
    a: npt.ArrayLike, b: npt.ArrayLike, score: npt.ArrayLike, k: float | npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Contiguous int64 / float64 copies for the compiled loops; ``k`` as one value (shape (1,)) or one per
    battle."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    b = np.ascontiguousarray(b, dtype=np.int64)
    score = np.ascontiguousarray(score, dtype=np.float64)
    ks = np.ascontiguousarray(np.atleast_1d(np.asarray(k, dtype=np.float64)))
    if not (a.shape == b.shape == score.shape) or ks.shape not in ((1,), score.shape):
        raise ValueError("a, b, score (and a per-battle k) must have the same length")
    return a, b, score, ks


def battle_codes(
    a: npt.NDArray[np.integer], b: npt.NDArray[np.integer], score: npt.NDArray[np.float64]
) -> npt.NDArray[np.uint64]:
    """One uint64 per battle, a | b << 30 | (2 score) << 60, so a resampled battle costs one memory read.
    Scores must be 0, 0.5 or 1 and system indices below 2^30."""
    halves = np.rint(np.asarray(score, dtype=np.float64) * 2)
    if len(halves) and (not np.all(np.isin(halves, (0.0, 1.0, 2.0))) or not np.allclose(halves, 2 * score)):
        raise ValueError("battle scores must be 0, 0.5 or 1")
    if len(a) and max(int(np.max(a)), int(np.max(b))) >= 2**30:
        raise ValueError("at most 2^30 systems")
    codes: npt.NDArray[np.uint64] = (
        np.asarray(a, dtype=np.uint64)
        | (np.asarray(b, dtype=np.uint64) << np.uint64(30))
        | (halves.astype(np.uint64) << np.uint64(60))
    )
    return codes


def distinct_outcomes(
    a: npt.NDArray[np.integer], b: npt.NDArray[np.integer], score: npt.NDArray[np.float64], n_systems: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The distinct (a, b, outcome) rows and how often each occurs: (a, b, score, count), each (m,).
    Scores must be 0, 0.5 or 1 (``battle_codes``)."""
    codes = battle_codes(a, b, score)
    key = (
        (codes & np.uint64(2**30 - 1)) * np.uint64(n_systems) + ((codes >> np.uint64(30)) & np.uint64(2**30 - 1))
    ) * np.uint64(3) + (codes >> np.uint64(60))
    if n_systems * n_systems * 3 <= 50_000_000:  # counting sort over every possible row
        counts = np.bincount(key.astype(np.int64), minlength=n_systems * n_systems * 3)
        unique = np.flatnonzero(counts).astype(np.uint64)
        counts = counts[counts > 0]
    else:
        unique, counts = np.unique(key, return_counts=True)
    outcome, pair = unique % np.uint64(3), unique // np.uint64(3)
    return (
        (pair // np.uint64(n_systems)).astype(np.int64),
        (pair % np.uint64(n_systems)).astype(np.int64),
        outcome.astype(np.float64) / 2.0,
        counts.astype(np.float64),
    )


def bradley_terry(
    a: npt.NDArray[np.integer],
    b: npt.NDArray[np.integer],
    score: npt.NDArray[np.float64],
    n_systems: int,
    weights: npt.NDArray[np.float64] | None = None,
    tol: float = 1e-6,
) -> npt.NDArray[np.float64]:
    """Bradley-Terry maximum likelihood, ties counting as half a win each way, on the Arena scale
    1000 + 400 log10-odds (ratings centred on 1000). Without ``weights`` the battles are first collapsed
    to their distinct (a, b, outcome) rows with counts as weights (the same likelihood)."""
    from scipy.optimize import minimize
    from scipy.special import expit

    if weights is None:
        a, b, score, w = distinct_outcomes(a, b, score, n_systems)
    else:
        a, b = np.asarray(a), np.asarray(b)
        score, w = np.asarray(score, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    alpha = math.log(BASE)

    def loss_and_grad(r: npt.NDArray[np.float64]) -> tuple[float, npt.NDArray[np.float64]]:
        p = expit(alpha * (r[a] - r[b]))
        p = np.clip(p, 1e-15, 1 - 1e-15)
        loss = -np.sum(w * (score * np.log(p) + (1 - score) * np.log(1 - p)))
        g = -alpha * (score - p) * w
        # numpy's stubs type bincount as intp whatever the weights; with float weights it returns float64
        grad: npt.NDArray[np.float64] = (
            np.bincount(a, weights=g, minlength=n_systems)  # type: ignore[assignment]
            - np.bincount(b, weights=g, minlength=n_systems)
        )
        return loss, grad

    result = minimize(
        loss_and_grad, np.zeros(n_systems), jac=True, method="L-BFGS-B", options={"maxiter": 200, "gtol": tol}
    )
    r: npt.NDArray[np.float64] = result.x - result.x.mean()
    return INITIAL + SCALE * r


def bootstrap_bradley_terry(
    a: npt.NDArray[np.integer],
    b: npt.NDArray[np.integer],
    score: npt.NDArray[np.float64],
    n_systems: int,
    rounds: int = 100,
    seed: int = 0,
) -> npt.NDArray[np.float64]:
    """BT on ``rounds`` resamples: the distinct (a, b, outcome) rows reweighted by multinomial counts (the
    same as resampling battles, far cheaper). (rounds, n_systems)."""
    ua, ub, us, counts = distinct_outcomes(a, b, score, n_systems)
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(len(score), counts / counts.sum(), size=rounds)
    return np.stack([bradley_terry(ua, ub, us, n_systems, d) for d in draws]) if rounds else np.empty((0, n_systems))


HESSIAN_REG = 1e-5  # arena-rank's BradleyTerry default, times the number of battles (unweighted data)


def sandwich_bradley_terry(
    a: npt.NDArray[np.integer],
    b: npt.NDArray[np.integer],
    score: npt.NDArray[np.float64],
    n_systems: int,
    point: npt.NDArray[np.float64],
    level: float = 0.95,
    hessian_reg: float = HESSIAN_REG,
    items: npt.ArrayLike | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Closed-form ("sandwich") interval ends of Bradley-Terry ratings on the Arena scale, as LMArena's arena-rank
    computes them (``BradleyTerry.compute_ratings_and_cis``, ``ci_method="sandwich"``): on the distinct (a, b,
    outcome) rows with counts c and p = sigmoid(theta_a - theta_b) at the fitted ratings ``point``,

        H = sum c p (1 - p) (e_a - e_b)(e_a - e_b)^T + hessian_reg * n_battles * I,
        G = sum c (outcome - p)^2 (e_a - e_b)(e_a - e_b)^T,   Cov = H^-1 G H^-1,

    the ends point -/+ z * sqrt(diag Cov) * 400 / ln 10. The ratings are defined up to a common shift; the small
    ridge makes H invertible without moving the centred ratings' covariance (G has nothing along that direction).

    With ``items`` (n,), each battle's item, G is clustered by item (``clusters.clustered_meat``: each item's summed
    (S - p)(e_a - e_b), their outer products, times G / (G - 1)): the report's intervals, which must hold when whole
    items are resampled (docs/ratings.md#clustered-by-item)."""
    from scipy.special import expit

    ua, ub, us, counts = distinct_outcomes(a, b, score, n_systems)
    unit = SCALE / math.log(BASE)
    theta = (np.asarray(point, dtype=np.float64) - INITIAL) / unit
    p = expit(theta[ua] - theta[ub])
    hessian = pairwise_matrix(counts * p * (1 - p), ua, ub, n_systems)
    hessian[np.diag_indices(n_systems)] += hessian_reg * counts.sum()
    n_items = None
    if items is None:
        gradient_cov = pairwise_matrix(counts * (us - p) ** 2, ua, ub, n_systems)
    else:
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        numbers, n_items = clusters.item_numbers(items)
        residual = np.asarray(score, dtype=np.float64) - expit(theta[a] - theta[b])
        gradient_cov = clusters.clustered_meat(clusters.item_scores(numbers, n_items, residual, a, b, n_systems))
    inverse = np.linalg.inv(hessian)
    half = clusters.critical_value(level, n_items) * np.sqrt(np.diag(inverse @ gradient_cov @ inverse)) * unit
    return point - half, point + half


def pairwise_matrix(
    values: npt.NDArray[np.float64], a: npt.NDArray[np.integer], b: npt.NDArray[np.integer], n: int
) -> npt.NDArray[np.float64]:
    """sum_rows values (e_a - e_b)(e_a - e_b)^T as an (n, n) matrix."""
    # numpy's stubs type bincount as intp whatever the weights; with float weights it returns float64
    flat: npt.NDArray[np.float64] = (
        np.bincount(a * n + a, values, n * n)  # type: ignore[assignment]
        + np.bincount(b * n + b, values, n * n)
        - np.bincount(a * n + b, values, n * n)
        - np.bincount(b * n + a, values, n * n)
    )
    return flat.reshape(n, n)


AGGREGATIONS = ("every", "majority", "one_sampled")


def aggregate_battles(
    group: npt.ArrayLike, score: npt.ArrayLike, how: str = "every", seed: int = 0
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Which judgments become battles (docs/ratings.md#battles: a multi-rater judgment is one battle; alternatives
    are options).

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
    estimate: npt.NDArray[np.float64]  # the point estimate on all battles
    median: npt.NDArray[np.float64]
    low: npt.NDArray[np.float64]  # 2.5th percentile
    high: npt.NDArray[np.float64]  # 97.5th percentile
    rank: npt.NDArray[np.intp]


def summarize(point: npt.NDArray[np.float64], samples: npt.NDArray[np.float64]) -> Interval:
    low, median, high = np.percentile(samples, [2.5, 50, 97.5], axis=0)
    return Interval(point, median, low, high, ci_ranks(low, high))


def ci_ranks(low: npt.NDArray[np.float64], high: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """rank = 1 + number of systems whose lower bound exceeds this system's upper bound."""
    rank: npt.NDArray[np.intp] = 1 + np.sum(low[None, :] > high[:, None], axis=1)
    return rank


def win_rate_matrix(
    a: npt.NDArray[np.integer], b: npt.NDArray[np.integer], score: npt.ArrayLike, n_systems: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
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


def win_ratio_ranking(
    a: npt.NDArray[np.integer], b: npt.NDArray[np.integer], score: npt.ArrayLike, n_systems: int
) -> npt.NDArray[np.float64]:
    """Each system's share of points over all its battles (ties half) — the comparative-assessment
    paper's win-ratio ranking."""
    wins, battles = win_rate_matrix(a, b, score, n_systems)
    total = battles.sum(axis=1)
    ratio: npt.NDArray[np.float64] = np.divide(wins.sum(axis=1), total, out=np.full(n_systems, np.nan), where=total > 0)
    return ratio


STYLE_FEATURES = style.FEATURES  # Arena's style control: tokens, headers, list items, bold
STYLE_REG = 1.0  # arena-rank's ContextualBradleyTerry default: 0.5 * reg * |coefficients|^2 on the mean loss
MIN_PAIR_COUNT = 50  # arena-rank's reweighting floor: a battle weighs 1 / max(its pair's battles, 50)


def style_features(counts_a: npt.ArrayLike, counts_b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Arena's style features from per-battle counts (n, k) of each side: the relative difference (a - b) / (a + b)
    (a total of 0 counts as 1), z-scored per feature over the battles (population standard deviation; a constant
    feature is left centred)."""
    a, b = np.asarray(counts_a, dtype=np.float64), np.asarray(counts_b, dtype=np.float64)
    total = a + b
    raw = (a - b) / np.where(total == 0, 1.0, total)
    std = raw.std(axis=0)
    features: npt.NDArray[np.float64] = (raw - raw.mean(axis=0)) / np.where(std == 0, 1.0, std)
    return features


def pair_weights(
    a: npt.NDArray[np.integer], b: npt.NDArray[np.integer], n_systems: int, floor: int = MIN_PAIR_COUNT
) -> npt.NDArray[np.float64]:
    """arena-rank's inverse-propensity weights: 1 / max(battles of the battle's unordered pair, floor), normalised
    to mean 1."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    key = lo.astype(np.int64) * n_systems + hi
    counts = np.bincount(key, minlength=n_systems * n_systems)[key].astype(np.float64)
    w = 1.0 / np.maximum(counts, floor)
    weights: npt.NDArray[np.float64] = w / w.mean()
    return weights


@dataclasses.dataclass(frozen=True)
class StyleControlled:
    ratings: npt.NDArray[np.float64]  # Arena scale, centred on 1000
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]
    coefficients: npt.NDArray[np.float64]  # per feature, on the z-scored features, in log-odds


# ``newton``'s objective: (params, whether the Hessian is wanted) -> (loss, gradient, Hessian or an empty (0, 0))
Objective = Callable[[npt.NDArray[np.float64], bool], tuple[float, npt.NDArray[np.float64], npt.NDArray[np.float64]]]


def newton(
    objective: Objective, n_systems: int, k: int, reg: float, tolerance: float = 1e-10
) -> npt.NDArray[np.float64]:
    """The minimum of the penalised mean loss by Newton's method with backtracking (``objective(params, second)``
    gives the loss, its gradient and, when ``second``, the loss's Hessian without the penalty): the loss is
    strictly convex once the ratings' common shift is fixed, so a handful of steps reach it, against ~40
    evaluations for L-BFGS (and no scipy.optimize to import). A ridge of 1e-9 makes each step's system solvable
    (the ratings' common shift, a constant feature without penalty); the gradient is zero along those directions,
    so it leaves the minimum where it is."""
    params = np.zeros(n_systems + k)
    loss, gradient, hessian = objective(params, True)
    for _ in range(100):
        hessian[n_systems:, n_systems:] += reg * np.eye(k)
        step = np.linalg.solve(hessian + 1e-9 * np.eye(n_systems + k), gradient)
        if gradient @ step < 1e-20:  # the Newton decrement: the loss is within 1e-20 of its minimum
            break
        size = 1.0
        while True:
            trial = params - size * step
            trial_loss, trial_gradient, trial_hessian = objective(trial, True)
            if trial_loss <= loss - 1e-4 * size * (gradient @ step) or size < 1e-8:
                break
            size /= 2
        params, loss, gradient, hessian = trial, trial_loss, trial_gradient, trial_hessian
        if np.abs(size * step).max() < tolerance:
            break
    return params


def contextual_bradley_terry(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    score: npt.ArrayLike,
    features: npt.ArrayLike,
    n_systems: int,
    reg: float = STYLE_REG,
    level: float = 0.95,
    hessian_reg: float = HESSIAN_REG,
    weights: npt.ArrayLike | None = None,
    penalty_curvature: bool = False,
    items: npt.ArrayLike | None = None,
) -> StyleControlled:
    """Style-controlled Bradley-Terry as arena-rank's ``ContextualBradleyTerry`` (its defaults): the battle's
    log-odds are theta_a - theta_b + features . gamma, fitted by minimising

        -mean(w * (score * logit - softplus(logit))) + 0.5 * reg * |gamma|^2

    with w = ``pair_weights`` (default), and sandwich intervals from the Hessian and the gradient covariance of that
    mean loss (the L2 term's part taken out of the latter), divided by the number of battles.

    arena-rank's Hessian leaves out the penalty's own curvature (reg on the coefficients' block), so its intervals
    are wider than the penalised estimator's spread: 98.6 % coverage for a nominal 95 % on PRD's real answers
    (tests/analytics/core/test_style_control.py). ``penalty_curvature`` puts it in: the report does;
    ``manage.py leaderboard --style-control`` keeps arena-rank's numbers.

    With ``items`` (n,), each battle's item, the gradient covariance is clustered by item: per item g the penalised
    loss's estimating function psi_g = sum_(i in g) w_i (S_i - p_i) (e_a - e_b, x_i) - n_g reg (0, gamma) (n_g its
    battles; the psi_g sum to 0 at the fit), meat sum_g psi_g psi_g^T * G / (G - 1) (``clusters``). The interval is
    then for the penalised model's value on items like these, resampled whole (docs/ratings.md#clustered-by-item)."""
    from scipy.special import expit

    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    y = np.asarray(score, dtype=np.float64)
    x = np.ascontiguousarray(features, dtype=np.float64)
    n_obs, k = x.shape
    w = pair_weights(a, b, n_systems) if weights is None else np.asarray(weights, dtype=np.float64)

    def block(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        top = pairwise_matrix(values, a, b, n_systems)
        cross = np.column_stack(
            [
                np.bincount(a, values * x[:, j], n_systems) - np.bincount(b, values * x[:, j], n_systems)
                for j in range(k)
            ]
        ).reshape(n_systems, k)
        return np.block([[top, cross], [cross.T, x.T @ (values[:, None] * x)]])

    if n_obs >= COMPILED_FROM:
        from analytics.core import style_loops

        def objective(
            params: npt.NDArray[np.float64], second: bool
        ) -> tuple[float, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
            hessian = np.empty((len(params), len(params)) if second else (0, 0))
            loss, gradient = style_loops.loss_and_gradient(params, a, b, x, y, w, n_systems, float(reg), hessian)
            return loss, gradient, hessian
    else:

        def objective(
            params: npt.NDArray[np.float64], second: bool
        ) -> tuple[float, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
            theta, gamma = params[:n_systems], params[n_systems:]
            logit = theta[a] - theta[b] + x @ gamma
            loss = -np.mean(w * (y * logit - np.logaddexp(0.0, logit))) + 0.5 * reg * gamma @ gamma
            p = expit(logit)
            r = w * (p - y) / n_obs  # d loss / d logit
            grad_theta = np.bincount(a, r, n_systems) - np.bincount(b, r, n_systems)
            hessian = block(p * (1 - p) * w / n_obs) if second else np.empty((0, 0))
            return loss, np.concatenate([grad_theta, x.T @ r + reg * gamma]), hessian

    params = newton(objective, n_systems, k, reg)
    theta, gamma = params[:n_systems], params[n_systems:]
    theta = theta - theta.mean()
    p = expit(theta[a] - theta[b] + x @ gamma)
    h = p * (1 - p) * w / n_obs
    g = ((y - p) * w) ** 2 / n_obs

    hessian = block(h) + np.eye(n_systems + k) * hessian_reg
    if penalty_curvature:
        hessian[n_systems:, n_systems:] += reg * np.eye(k)
    penalty = np.concatenate([np.zeros(n_systems), reg * gamma])
    n_items = None
    if items is None:
        gradient_cov = block(g) - np.outer(penalty, penalty) / n_obs
    else:
        numbers, n_items = clusters.item_numbers(items)
        scores = clusters.item_scores(numbers, n_items, (y - p) * w, a, b, n_systems, x)
        scores -= np.bincount(numbers, minlength=n_items)[:, None] * penalty[None, :]
        gradient_cov = clusters.clustered_meat(scores) / n_obs
    inverse = np.linalg.inv(hessian)
    variances = np.diag(inverse @ gradient_cov @ inverse)[:n_systems] / n_obs
    unit = SCALE / math.log(BASE)
    half = clusters.critical_value(level, n_items) * np.sqrt(variances) * unit
    ratings_ = INITIAL + theta * unit
    return StyleControlled(ratings_, ratings_ - half, ratings_ + half, gamma)


def compile_loops() -> None:
    """Compile the numba loops (online and bootstrap ELO, with one K and with a K per battle; style control's
    objective) into their on-disk cache now, on a small input past COMPILED_FROM, so that later processes load them
    instead of each compiling them: ``make test`` calls it before its parallel workers start."""
    rng = np.random.default_rng(0)
    n = COMPILED_FROM
    a = rng.integers(0, 3, n)
    b = (a + 1) % 3
    score = rng.integers(0, 3, n) / 2.0
    for k in (4.0, separability_k(rng.random(n))):
        online_elo(a, b, score, 3, k)
        bootstrap_elo(a, b, score, 3, k, rounds=2)
    contextual_bradley_terry(a, b, score, rng.random((n, 2)), 3)
