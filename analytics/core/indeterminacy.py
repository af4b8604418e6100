"""Judge validation under rating indeterminacy (docs/indeterminacy.md; Guerdan et al., the rating-indeterminacy blog).

Options are the study question's option set, here the two systems of a pair ("a", "b"). A response
set is the subset of options a rater finds reasonable (empty when a study lets raters say that neither is);
a forced choice is one option.
Units are the rated objects shared by humans and judges (pairs of outputs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

OPTIONS = ("a", "b")
# A forced choice with a tie option maps one-to-one onto the response sets of a binary task (the blog's first
# tip): {a}, {b} and {a, b} ("both reasonable"). CHOICES is the forced-choice option set in that order.
CHOICES = ("a", "b", "tie")
RESPONSE_SET_OF_CHOICE = {"a": ("a",), "b": ("b",), "tie": ("a", "b")}


def multilabel_vector(
    response_sets: Sequence[Sequence[str]], options: Sequence[str] = OPTIONS
) -> npt.NDArray[np.float64]:
    """Omega[k] = fraction of the unit's response sets that contain option k. Entries are inclusion
    probabilities and need not sum to 1 (the blog's Omega = [0.8, 0.5])."""
    if not response_sets:
        return np.full(len(options), np.nan)
    return np.array([np.mean([o in set(s) for s in response_sets]) for o in options], dtype=np.float64)


def forced_choice_distribution(
    choices: Sequence[str | None], categories: Sequence[str] = CHOICES
) -> npt.NDArray[np.float64]:
    """O[k] = share of the forced choices equal to category k (by default a, b and tie); missing choices
    (None) are left out. NaN when there is no choice."""
    kept = [c for c in choices if c is not None]
    if not kept:
        return np.full(len(categories), np.nan)
    unknown = set(kept) - set(categories)
    if unknown:
        raise ValueError(f"choices {sorted(unknown)} are not among {list(categories)}")
    return np.array([kept.count(o) / len(kept) for o in categories], dtype=np.float64)


def omega_from_forced_choice(distribution: npt.ArrayLike, beta: float) -> npt.NDArray[np.float64]:
    """Omega from forced-choice data only, shape (2,), from O over (a, b, tie) with sensitivity beta.

    A tie is the response set {a, b}, so it counts for both options. docs/indeterminacy.md#omega-from-forced-choices
    defines, for a binary task with a positive option, Omega = [O_pos + beta O_neg, O_neg]. A preference question has
    no positive option: calling a system "A" is arbitrary, so beta is applied both ways (each option also gets beta of
    the other's forced-choice share) and Omega does not depend on which system is called A:
    Omega_a = O_a + O_tie + beta O_b,  Omega_b = O_b + O_tie + beta O_a.
    Like the definition (unlike the reference code), Omega need not sum to 1."""
    o = np.asarray(distribution, dtype=np.float64)
    if o.shape != (3,):
        raise ValueError(f"the distribution must be over (a, b, tie), got shape {o.shape}")
    return np.array([o[0] + o[2] + beta * o[1], o[1] + o[2] + beta * o[0]])


def omega(
    response_sets: Sequence[Sequence[str] | None], choices: Sequence[str | None], beta: float
) -> npt.NDArray[np.float64]:
    """Omega of one unit from its judgments, shape (2,): a judgment with a response set counts as that set
    (the empty set -- "neither is acceptable", or a forced "both are bad" -- as [0, 0]); one with only a
    forced choice counts by ``omega_from_forced_choice`` (a tie as {a, b}, beta for the option not chosen).
    Judgments with neither are left out; NaN when none is left."""
    rows = []
    for response, choice in zip(response_sets, choices, strict=True):
        if response is not None:
            rows.append(multilabel_vector([response]))
        elif choice is not None:
            rows.append(omega_from_forced_choice(forced_choice_distribution([choice]), beta))
    mean: npt.NDArray[np.float64] = np.mean(rows, axis=0) if rows else np.full(len(OPTIONS), np.nan)
    return mean


def beta_hat(forced: Sequence[str], response_sets: Sequence[Sequence[str]]) -> float:
    """P(the other option is in the response set | forced choice = one option), from paired elicitation,
    pooled over both options so that it does not depend on which system is called A (the blog's
    P(pos in S | forced = neg), applied symmetrically like ``omega_from_forced_choice``)."""
    hits = [("b" if f == "a" else "a") in set(s) for f, s in zip(forced, response_sets, strict=True) if f in OPTIONS]
    return float(np.mean(hits)) if hits else float("nan")


RESPONSE_SETS = (("a",), ("b",), ("a", "b"))


def translation_matrix(
    forced: Sequence[str], response_sets: Sequence[Sequence[str]], choices: Sequence[str] = CHOICES
) -> npt.NDArray[np.float64]:
    """F[o, S] = P(forced choice = o | response set = S), columns in RESPONSE_SETS order ({a}, {b},
    {a, b}); a column with no observations is NaN."""
    f = np.full((len(choices), len(RESPONSE_SETS)), np.nan)
    for j, target in enumerate(RESPONSE_SETS):
        picked = [c for c, s in zip(forced, response_sets, strict=True) if tuple(sorted(set(s))) == target]
        if picked:
            f[:, j] = [picked.count(c) / len(picked) for c in choices]
    return f


def mse(omega_h: npt.ArrayLike, omega_j: npt.ArrayLike) -> float:
    """mean_i ||Omega_i^H - Omega_i^J||^2 over units where both are defined (the primary metric)."""
    h, j = np.atleast_2d(omega_h), np.atleast_2d(omega_j)
    ok = ~(np.isnan(h).any(axis=1) | np.isnan(j).any(axis=1))
    return float(np.mean(np.sum((h[ok] - j[ok]) ** 2, axis=1))) if ok.any() else float("nan")


def hit_rate(human_choice: Sequence[str | None], judge_choice: Sequence[str | None]) -> float:
    """Hit rate (the reference code's HR_h_h): share of units where the judge's forced choice equals the
    humans' forced-choice majority (a split with no single most common answer counts as a tie). Units
    where either is missing are left out."""
    hits = [h == j for h, j in zip(human_choice, judge_choice, strict=True) if h is not None and j is not None]
    return float(np.mean(hits)) if hits else float("nan")


def coverage(omega_h: npt.ArrayLike, judge_choice: Sequence[str | None], tau: float = 0.5) -> float:
    """Coverage (the reference code's COV_h_hrs): share of units where the judge's forced choice is among
    the options most humans find reasonable (Omega^H[k] >= tau). A judge's tie is the response set
    {a, b}: covered when both options reach tau. Missing choices and undefined units are left out."""
    h = np.atleast_2d(omega_h)
    hits = [
        all(h[i, OPTIONS.index(o)] >= tau for o in RESPONSE_SET_OF_CHOICE[c])
        for i, c in enumerate(judge_choice)
        if c is not None and not np.isnan(h[i]).any()
    ]
    return float(np.mean(hits)) if hits else float("nan")


def _smooth(p: npt.ArrayLike, eps: float) -> npt.NDArray[np.float64]:
    p = np.asarray(p, dtype=np.float64) + eps
    smoothed: npt.NDArray[np.float64] = p / p.sum(axis=-1, keepdims=True)
    return smoothed


def kl_divergence(p: npt.ArrayLike, q: npt.ArrayLike, eps: float = 1e-6) -> float:
    """Mean over units of KL(p || q) in nats, with eps smoothing so a zero in q stays finite."""
    p, q = np.atleast_2d(p), np.atleast_2d(q)
    ok = ~(np.isnan(p).any(axis=1) | np.isnan(q).any(axis=1))
    if not ok.any():
        return float("nan")
    ps, qs = _smooth(p[ok], eps), _smooth(q[ok], eps)
    return float(np.mean(np.sum(ps * np.log(ps / qs), axis=1)))


def js_divergence(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    """Mean over units of the Jensen-Shannon divergence in nats (bounded by ln 2)."""
    p, q = np.atleast_2d(p), np.atleast_2d(q)
    ok = ~(np.isnan(p).any(axis=1) | np.isnan(q).any(axis=1))
    if not ok.any():
        return float("nan")
    p_ok, q_ok = p[ok], q[ok]
    m = (p_ok + q_ok) / 2

    def kl(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        with np.errstate(divide="ignore", invalid="ignore"):
            per_unit: npt.NDArray[np.float64] = np.sum(np.where(x > 0, x * np.log(x / y), 0.0), axis=1)
            return per_unit

    return float(np.mean(0.5 * kl(p_ok, m) + 0.5 * kl(q_ok, m)))


# 0.05, 0.10, ..., 0.95, rounded so that they print as written (linspace gives 0.49999999999999994)
TAUS = np.round(np.linspace(0.05, 0.95, 19), 2)


@dataclasses.dataclass(frozen=True)
class ThresholdSweep:
    taus: npt.NDArray[np.float64]
    consistency: npt.NDArray[np.float64]  # C^tau
    bias: npt.NDArray[np.float64]  # B^tau


def threshold_sweep(
    omega_h: npt.ArrayLike, omega_j: npt.ArrayLike, option: int = 0, taus: npt.ArrayLike | None = None
) -> ThresholdSweep:
    """Decision consistency C^tau = mean_i 1[1[Omega_J >= tau] = 1[Omega_H >= tau]] and estimation bias
    B^tau = mean_i 1[Omega_J >= tau] - mean_i 1[Omega_H >= tau] for option ``option``, over tau."""
    taus = TAUS if taus is None else np.asarray(taus, dtype=np.float64)
    h, j = np.atleast_2d(omega_h)[:, option], np.atleast_2d(omega_j)[:, option]
    ok = ~(np.isnan(h) | np.isnan(j))
    h, j = h[ok], j[ok]
    if h.size == 0:
        nan = np.full(taus.shape, np.nan)
        return ThresholdSweep(taus, nan, nan)
    dh = h[None, :] >= taus[:, None]
    dj = j[None, :] >= taus[:, None]
    return ThresholdSweep(taus, np.mean(dh == dj, axis=1), np.mean(dj, axis=1) - np.mean(dh, axis=1))
