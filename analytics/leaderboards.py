"""Leaderboards from battles: the one place where a method's point ratings, their bootstrap and the rows
people read are made, for the study report (analytics/report/ratings.py) and ``manage.py leaderboard`` alike.

Imports no Django models, so the command starts in a fraction of a second (bench/README.md, "Leaderboards").
"""

from __future__ import annotations

import dataclasses

import numpy as np

from analytics.core import ratings
from analytics.report.serial import optional

METHODS = ("elo", "sep-elo", "bt")
INTERVALS = ("sandwich", "bootstrap")


def default_intervals(method: str) -> str:
    """Bradley-Terry's intervals are closed-form ("sandwich", as LMArena's arena-rank has computed them since July
    2025); ELO's are the bootstrap's (order-dependent, it has no closed form)."""
    return "sandwich" if method == "bt" else "bootstrap"


def board(
    systems: list[str],
    method: str,
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    k: float | np.ndarray = 4.0,
    rounds: int = 100,
    seed: int = 0,
    intervals: str | None = None,
) -> list[BoardRow]:
    """The leaderboard rows of ``method`` with ``intervals`` (default: ``default_intervals``) -- what the report and
    ``manage.py leaderboard`` show."""
    intervals = intervals or default_intervals(method)
    if intervals not in INTERVALS:
        raise ValueError(f"unknown intervals {intervals!r}; choose one of {INTERVALS}")
    if intervals == "sandwich":
        if method != "bt":
            raise ValueError("only Bradley-Terry has closed-form intervals; ELO's come from the bootstrap")
        point = ratings.bradley_terry(a, b, score, len(systems))
        low, high = ratings.sandwich_bradley_terry(a, b, score, len(systems), point)
        return rows(systems, ratings.Interval(point, point, low, high, ratings.ci_ranks(low, high)), method)
    return leaderboard(systems, *rate(method, a, b, score, len(systems), k, rounds, seed), method)


def rate(
    method: str,
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    n_systems: int,
    k: float | np.ndarray = 4.0,
    rounds: int = 100,
    seed: int = 0,
    items: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(point ratings (n_systems,), bootstrap samples (rounds, n_systems)) for ``method``: ELO and sep-ELO
    (``k`` one value, or one per battle from ``ratings.separability_k``) online in the given order and on
    ``rounds`` resamples (with ``items``, each battle's item, resamples of whole items); Bradley-Terry's fit and its
    multinomial bootstrap. With no rounds the samples are the point itself, so an interval collapses onto it."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    if method == "bt":
        point = ratings.bradley_terry(a, b, score, n_systems)
        samples = ratings.bootstrap_bradley_terry(a, b, score, n_systems, rounds, seed) if rounds else None
    else:
        point = ratings.online_elo(a, b, score, n_systems, k=k)
        samples = ratings.bootstrap_elo(a, b, score, n_systems, k, rounds, seed, items) if rounds else None
    return point, point[None, :] if samples is None else samples


def style_board(
    systems: list[str],
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    counts_a: np.ndarray,
    counts_b: np.ndarray,
    reg: float = ratings.STYLE_REG,
    penalty_curvature: bool = False,
) -> tuple[list[BoardRow], dict[str, float]]:
    """The style-controlled Bradley-Terry board (arena-rank's ``ContextualBradleyTerry`` with its defaults; sandwich
    intervals, with the penalty's curvature when ``penalty_curvature``: see ``ratings.contextual_bradley_terry``)
    and the style coefficients by feature, from each side's style counts (battles, 4)."""
    fit = ratings.contextual_bradley_terry(
        a,
        b,
        score,
        ratings.style_features(counts_a, counts_b),
        len(systems),
        reg=reg,
        penalty_curvature=penalty_curvature,
    )
    interval = ratings.Interval(fit.ratings, fit.ratings, fit.low, fit.high, ratings.ci_ranks(fit.low, fit.high))
    return rows(systems, interval, "bt"), dict(zip(ratings.STYLE_FEATURES, fit.coefficients.tolist(), strict=True))


def leaderboard(systems: list[str], point: np.ndarray, samples: np.ndarray, method: str) -> list[BoardRow]:
    """Leaderboard rows, best first, for ``method`` "elo" (ELO and sep-ELO) or "bt".

    ELO's headline ``rating`` is the bootstrap median, as FastChat's leaderboard reports it
    (``elo_rating_final = elo_rating_median``): the online value depends on the order the battles came in
    and can fall outside its own interval; it stays in the row as ``online``. Bradley-Terry does not depend
    on order, so its headline is the maximum-likelihood fit on all battles (as FastChat's)."""
    return rows(systems, ratings.summarize(point, samples), method)


@dataclasses.dataclass(frozen=True)
class BoardRow:
    """One system's row of a leaderboard: its headline rating (``leaderboard``), the bootstrap median, the 95 %
    interval and the rank it gives (1 + the systems whose lower bound exceeds this one's upper bound)."""

    system: str
    rating: float
    median: float
    low: float
    high: float
    rank: int
    online: float | None = optional()  # ELO's single pass in the given order (ELO and sep-ELO only)


def rows(systems: list[str], interval: ratings.Interval, method: str) -> list[BoardRow]:
    """The board's rows, best first; ranks from the bounds in whole points, as every board shows them, so two
    systems shown alike share a rank (docs/ratings.md#ranks)."""
    headline = interval.median if method != "bt" else interval.estimate
    shown_rank = ratings.ci_ranks(np.round(interval.low), np.round(interval.high))
    rows = [
        BoardRow(
            system=s,
            rating=headline[i],
            median=interval.median[i],
            low=interval.low[i],
            high=interval.high[i],
            rank=int(shown_rank[i]),
            online=interval.estimate[i] if method != "bt" else None,
        )
        for i, s in enumerate(systems)
    ]
    return sorted(rows, key=lambda r: (-r.rating, r.system))
