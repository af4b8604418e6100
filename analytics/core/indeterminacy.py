"""Judge validation under rating indeterminacy (SPEC §6; Guerdan et al., the rating-indeterminacy blog).

Options are the study question's option set, here the two systems of a pair ("a", "b"). A response
set is the non-empty subset of options a rater finds reasonable; a forced choice is one option.
Units are the rated objects shared by humans and judges (pairs of outputs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

OPTIONS = ("a", "b")


def multilabel_vector(response_sets: Sequence[Sequence[str]], options: Sequence[str] = OPTIONS) -> np.ndarray:
    """Omega[k] = fraction of the unit's response sets that contain option k. Entries are inclusion
    probabilities and need not sum to 1 (the blog's Omega = [0.8, 0.5])."""
    if not response_sets:
        return np.full(len(options), np.nan)
    return np.array([np.mean([o in set(s) for s in response_sets]) for o in options], dtype=np.float64)


def forced_choice_distribution(choices: Sequence[str], options: Sequence[str] = OPTIONS) -> np.ndarray:
    """O[k] = share of forced choices equal to option k; choices outside the options (ties) are left
    out and the rest renormalised. NaN when no choice falls in the options."""
    kept = [c for c in choices if c in options]
    if not kept:
        return np.full(len(options), np.nan)
    return np.array([kept.count(o) / len(kept) for o in options], dtype=np.float64)


def omega_from_forced_choice(distribution: np.ndarray, beta: float, positive: int = 0) -> np.ndarray:
    """Omega from forced-choice data only, for a binary task with sensitivity beta (SPEC §6):
    Omega = [O_pos + beta O_neg, O_neg] (for positive = 0). The reference code moves the beta mass so that
    Omega sums to 1; we follow the definition, so Omega_pos + Omega_neg = 1 + beta O_neg."""
    o = np.asarray(distribution, dtype=np.float64)
    negative = 1 - positive
    omega = o.copy()
    omega[positive] = o[positive] + beta * o[negative]
    return omega


def beta_hat(forced: Sequence[str], response_sets: Sequence[Sequence[str]], positive: str = "a",
             negative: str = "b") -> float:
    """P(positive in response set | forced choice = negative), from paired elicitation."""
    hits = [positive in set(s) for f, s in zip(forced, response_sets, strict=True) if f == negative]
    return float(np.mean(hits)) if hits else float("nan")


RESPONSE_SETS = (("a",), ("b",), ("a", "b"))


def translation_matrix(forced: Sequence[str], response_sets: Sequence[Sequence[str]],
                       choices: Sequence[str] = ("a", "b", "tie")) -> np.ndarray:
    """F[o, S] = P(forced choice = o | response set = S), columns in RESPONSE_SETS order ({a}, {b},
    {a, b}); a column with no observations is NaN."""
    f = np.full((len(choices), len(RESPONSE_SETS)), np.nan)
    for j, target in enumerate(RESPONSE_SETS):
        picked = [c for c, s in zip(forced, response_sets, strict=True) if tuple(sorted(set(s))) == target]
        if picked:
            f[:, j] = [picked.count(c) / len(picked) for c in choices]
    return f


def mse(omega_h: np.ndarray, omega_j: np.ndarray) -> float:
    """mean_i ||Omega_i^H - Omega_i^J||^2 over units where both are defined (the primary metric)."""
    h, j = np.atleast_2d(omega_h), np.atleast_2d(omega_j)
    ok = ~(np.isnan(h).any(axis=1) | np.isnan(j).any(axis=1))
    return float(np.mean(np.sum((h[ok] - j[ok]) ** 2, axis=1))) if ok.any() else float("nan")


def hit_rate(omega_h: np.ndarray, judge_choice: Sequence[str], options: Sequence[str] = OPTIONS) -> float:
    """Share of units where the judge's forced choice is an option most humans find reasonable
    (Omega^H[choice] >= 0.5). Judge ties and undefined units are left out."""
    h = np.atleast_2d(omega_h)
    hits = [h[i, options.index(c)] >= 0.5 for i, c in enumerate(judge_choice)
            if c in options and not np.isnan(h[i]).any()]
    return float(np.mean(hits)) if hits else float("nan")


def _smooth(p: np.ndarray, eps: float) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64) + eps
    return p / p.sum(axis=-1, keepdims=True)


def kl_divergence(p: np.ndarray, q: np.ndarray, eps: float = 1e-6) -> float:
    """Mean over units of KL(p || q) in nats, with eps smoothing so a zero in q stays finite."""
    p, q = np.atleast_2d(p), np.atleast_2d(q)
    ok = ~(np.isnan(p).any(axis=1) | np.isnan(q).any(axis=1))
    if not ok.any():
        return float("nan")
    ps, qs = _smooth(p[ok], eps), _smooth(q[ok], eps)
    return float(np.mean(np.sum(ps * np.log(ps / qs), axis=1)))


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Mean over units of the Jensen-Shannon divergence in nats (bounded by ln 2)."""
    p, q = np.atleast_2d(p), np.atleast_2d(q)
    ok = ~(np.isnan(p).any(axis=1) | np.isnan(q).any(axis=1))
    if not ok.any():
        return float("nan")
    p, q = p[ok], q[ok]
    m = (p + q) / 2

    def kl(x, y):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.sum(np.where(x > 0, x * np.log(x / y), 0.0), axis=1)

    return float(np.mean(0.5 * kl(p, m) + 0.5 * kl(q, m)))


@dataclasses.dataclass(frozen=True)
class ThresholdSweep:
    taus: np.ndarray
    consistency: np.ndarray  # C^tau
    bias: np.ndarray  # B^tau


def threshold_sweep(omega_h: np.ndarray, omega_j: np.ndarray, option: int = 0,
                    taus: np.ndarray | None = None) -> ThresholdSweep:
    """Decision consistency C^tau = mean_i 1[1[Omega_J >= tau] = 1[Omega_H >= tau]] and estimation bias
    B^tau = mean_i 1[Omega_J >= tau] - mean_i 1[Omega_H >= tau] for option ``option``, over tau."""
    taus = np.linspace(0.05, 0.95, 19) if taus is None else np.asarray(taus, dtype=np.float64)
    h, j = np.atleast_2d(omega_h)[:, option], np.atleast_2d(omega_j)[:, option]
    ok = ~(np.isnan(h) | np.isnan(j))
    h, j = h[ok], j[ok]
    if h.size == 0:
        nan = np.full(taus.shape, np.nan)
        return ThresholdSweep(taus, nan, nan)
    dh = h[None, :] >= taus[:, None]
    dj = j[None, :] >= taus[:, None]
    return ThresholdSweep(taus, np.mean(dh == dj, axis=1), np.mean(dj, axis=1) - np.mean(dh, axis=1))
