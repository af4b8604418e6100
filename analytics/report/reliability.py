"""Rater reliability: each rater's agreement beyond chance by one-coin Dawid-Skene, and the Bradley-Terry board of
the answers the model infers beside the same board with each pair's plain majority."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from analytics.core import ratings, reliability
from analytics.report.data import Row
from analytics.report.ratings import battles
from analytics.report.serial import Unavailable
from selection.core import winners

RELIABILITY_MIN_RATERS = 3  # Dawid-Skene needs raters to compare: fewer and it only echoes them


@dataclasses.dataclass(frozen=True)
class RaterReliability:
    """One rater: judgments, the pairs scored on (rated by two others too), reliability (None without enough
    overlap), the model's probability that they answer right, and the reliability in words."""

    rater: str
    judgments: int
    scored_pairs: int
    reliability: float | None
    skill: float
    in_words: str


@dataclasses.dataclass(frozen=True)
class WeightedRow:
    place: int
    system: str
    rating: float
    majority_place: int | None  # the system's place with each pair's plain majority


@dataclasses.dataclass(frozen=True, kw_only=True)
class WeightedBoard:
    """Bradley-Terry on one battle per rated pair, with the answer the model infers."""

    available: bool = True
    battles: int
    leaderboard: list[WeightedRow]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Reliability:
    """Every rater's reliability (least reliable first) over ``pairs`` rated pairs, who is unreliable (below 0.2)
    or unscored, and the reliability-weighted board."""

    available: bool = True
    raters: list[RaterReliability]
    pairs: int
    model: str
    unreliable: list[str]
    unscored: list[str]
    weighted_board: WeightedBoard | Unavailable


def _places(systems: list[str], a: np.ndarray, b: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """Bradley-Terry ratings of battles and each system's place by them (1 the best)."""
    point = ratings.bradley_terry(a, b, score, len(systems))
    return point, {systems[i]: place for place, i in enumerate(np.argsort(-point), start=1)}


def reliability_section(rows: list[Row], systems: list[str]) -> Reliability | Unavailable:
    """Each rater's reliability by one-coin Dawid-Skene (``analytics.core.reliability``: agreement beyond chance with
    the answer the other raters of each pair point to, as the rater saw the pair; none without enough overlap) over
    the population's judgments, each rated pair a task and its answer (A, B or no preference) the label; and the
    Bradley-Terry ratings of one battle per rated pair with the answer the model infers, beside the same board with
    each pair's plain majority (the same one battle per pair, every rater alike: a difference is the weighting's)
    and never instead of the report's boards. No interval: the inferred answers are themselves estimates, and an
    interval that treated them as data would be too narrow."""
    answered = [(r, r.effective_choice) for r in rows if r.effective_choice is not None]
    labelled = [r for r, _ in answered]
    raters = {r.rater for r in labelled}
    overlapping = sum(1 for n in Counter(r.pair_id for r in labelled).values() if n > reliability.MIN_OTHERS)
    if len(raters) < RELIABILITY_MIN_RATERS or overlapping == 0:
        return Unavailable(
            reason=f"needs at least {RELIABILITY_MIN_RATERS} raters and pairs rated by "
            f"{reliability.MIN_OTHERS + 1} or more of them (now {len(raters)} "
            f"rater{'s' if len(raters) != 1 else ''}, {overlapping} such pairs)"
        )
    fit = reliability.one_coin_dawid_skene(
        [r.pair_id for r in labelled],
        [r.rater for r in labelled],
        [choice for _, choice in answered],
        [r.a_shown_first for r in labelled],
    )
    counts = Counter(r.rater for r in labelled)
    unknown = f"not enough overlap (fewer than {reliability.MIN_PAIRS} pairs rated by {reliability.MIN_OTHERS} others)"
    table = [
        RaterReliability(
            rater=w,
            judgments=counts[w],
            scored_pairs=int(n),
            reliability=None if k != k else float(k),
            skill=float(skill),
            in_words=unknown if k != k else reliability.words(float(k)),
        )
        for w, k, skill, n in zip(fit.workers, fit.kappa, fit.skill, fit.scored_pairs, strict=True)
    ]
    table.sort(key=lambda row: (row.reliability is None, row.reliability or 0.0))
    first: dict[int, Row] = {}
    for r in labelled:
        first.setdefault(r.pair_id, r)
    index = {s: i for i, s in enumerate(systems)}
    kept = [p for p in first if fit.labels.get(p) in winners.RATING]
    a = np.array([index[first[p].system_a] for p in kept], dtype=np.int64)
    b = np.array([index[first[p].system_b] for p in kept], dtype=np.int64)
    score = winners.score_for_a([winners.rating_for(fit.labels[p]) for p in kept]).reshape(-1)
    weighted: WeightedBoard | Unavailable = Unavailable(reason="no rated pair")
    if len(score):
        point, _ = _places(systems, a, b, score)
        _, majority_a, majority_b, majority_score = battles(labelled, systems, "majority")
        _, by_majority = _places(systems, majority_a, majority_b, majority_score)
        weighted = WeightedBoard(
            battles=len(score),
            leaderboard=[
                WeightedRow(place, systems[i], float(point[i]), by_majority.get(systems[i]))
                for place, i in enumerate(np.argsort(-point), start=1)
            ],
        )
    return Reliability(
        raters=table,
        pairs=len(first),
        model="one-coin Dawid-Skene (crowd-kit)",
        unreliable=[row.rater for row in table if row.reliability is not None and row.reliability < 0.2],
        unscored=[row.rater for row in table if row.reliability is None],
        weighted_board=weighted,
    )
