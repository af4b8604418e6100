"""The answers as written: the style-controlled Bradley-Terry board beside the plain one, and
length-controlled win rates per system pair for people and for each judge.

Both read the answers each judgment compared (``analytics.report.data.Answers``): their style counted as Chatbot
Arena counts it (``analytics.core.style``) and their length in characters (as AlpacaEval 2 measures it).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from analytics.core import ratings, style
from analytics.core.length_control import NoEstimate, length_controlled_win_rate
from analytics.leaderboards import BoardRow, rows
from analytics.report.data import Answers, Row
from analytics.report.serial import Unavailable, optional
from selection.core import winners


@dataclasses.dataclass(frozen=True)
class Move:
    """A system's place on the board without the style terms and with them (``change`` > 0: up)."""

    system: str
    plain_place: int
    style_place: int
    change: int


@dataclasses.dataclass(frozen=True)
class Unpenalised:
    """A system's style-controlled rating fitted without the penalty, and ``shift``: the board's (penalised) rating
    minus it -- how far the penalty moves the system. The board's intervals are for the penalised ratings."""

    system: str
    rating: float
    shift: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class StyleControl:
    """The style-controlled board (its intervals clustered by item, for the penalised model's ratings), its
    coefficients by feature with and without the penalty ``reg`` (``shrinkage``: the ratio of their norms), each
    system's rating without the penalty (best first, as the board), who moved, and the tokenizer's encoding."""

    available: bool = True
    battles: int
    leaderboard: list[BoardRow]
    coefficients: dict[str, float]
    unpenalised_coefficients: dict[str, float]
    reg: float
    shrinkage: float | None
    moved: list[Move]
    any_moved: bool
    encoding: str
    unpenalised: list[Unpenalised] | None = optional()  # None in reports stored before it was added


def style_control_section(
    battle_rows: list[Row],
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    systems: list[str],
    answers: Answers,
    reg: float = ratings.STYLE_REG,
) -> StyleControl | Unavailable:
    """The style-controlled board (arena-rank's ContextualBradleyTerry, penalty ``reg``: the study's setting, 1 by
    default as arena-rank's; sandwich intervals clustered by item, for the penalised model's ratings) on the same
    battles as the plain Bradley-Terry board, its coefficients and ratings with and without the penalty, and who
    moved (docs/ratings.md#style-control)."""
    if len(score) == 0:
        return Unavailable(reason="no judgments with a choice yet")
    if len({*a.tolist(), *b.tolist()}) < 2:
        return Unavailable(reason="fewer than two systems have been compared")
    counts_a, counts_b, _, _ = answers.of(battle_rows, [systems[i] for i in a])
    features = ratings.style_features(counts_a, counts_b)
    items = [r.item_id for r in battle_rows]
    n = len(systems)
    fit = ratings.contextual_bradley_terry(a, b, score, features, n, reg=reg, penalty_curvature=True, items=items)
    free = fit if reg == 0 else ratings.contextual_bradley_terry(a, b, score, features, n, reg=0.0)
    board = rows(
        systems,
        ratings.Interval(fit.ratings, fit.ratings, fit.low, fit.high, ratings.ci_ranks(fit.low, fit.high)),
        "bt",
    )
    coefficients = dict(zip(ratings.STYLE_FEATURES, fit.coefficients.tolist(), strict=True))
    unpenalised = dict(zip(ratings.STYLE_FEATURES, free.coefficients.tolist(), strict=True))
    size = math.sqrt(sum(v * v for v in coefficients.values()))
    free_size = math.sqrt(sum(v * v for v in unpenalised.values()))
    # who moved: against the same fit without the style terms (the same battle weights), so that a move is style's
    weighted = ratings.contextual_bradley_terry(a, b, score, np.zeros((len(score), 1)), n)
    plain_order = sorted(range(n), key=lambda i: (-weighted.ratings[i], systems[i]))
    place = {systems[i]: k + 1 for k, i in enumerate(plain_order)}
    moved = [Move(r.system, place[r.system], i + 1, place[r.system] - (i + 1)) for i, r in enumerate(board)]
    index = {s: i for i, s in enumerate(systems)}
    without = [
        Unpenalised(r.system, float(free.ratings[index[r.system]]), r.rating - float(free.ratings[index[r.system]]))
        for r in board
    ]
    return StyleControl(
        battles=len(score),
        leaderboard=board,
        coefficients=coefficients,
        unpenalised_coefficients=unpenalised,
        reg=reg,
        shrinkage=size / free_size if free_size > 0 else None,
        moved=moved,
        any_moved=any(m.change for m in moved),
        encoding=style.ENCODING.removesuffix("_offline"),
        unpenalised=without,
    )


@dataclasses.dataclass(frozen=True)
class LengthControlled:
    """One rater population's win rate of a system pair's first system, plain and length-controlled with its 95 %
    interval over items and the length coefficient (> 0: longer answers are preferred); ``reason`` why there is no
    estimate, empty when there is one."""

    population: str
    system_a: str
    system_b: str
    judgments: int
    items: int
    win_rate: float
    mean_length_a: float
    mean_length_b: float
    estimate: float | None
    low: float | None
    high: float | None
    length_coefficient: float | None
    reason: str


def length_controlled_section(
    systems: list[str], humans: list[Row], judges: list[Row], answers: Answers
) -> list[LengthControlled]:
    """Per rater population (people, then each judge) and system pair: the plain and the length-controlled win
    rate of the pair's first system (in the study's order), its 95 % interval over items, and the length
    coefficient (> 0: longer answers are preferred)."""
    # each row with an answer, with its rating (a row has one exactly when it has an answer)
    populations = [("People", [(r, r.rating) for r in humans if r.rating is not None])]
    for name in sorted({r.rater for r in judges}):
        populations.append(
            (f"Judge {name}", [(r, r.rating) for r in judges if r.rater == name and r.rating is not None])
        )
    order = {s: i for i, s in enumerate(systems)}
    out = []
    for label, rated in populations:
        by_pair: dict[tuple[str, str], list[tuple[Row, int]]] = {}
        for r, rating in rated:
            first, second = sorted((r.system_a, r.system_b), key=order.__getitem__)
            by_pair.setdefault((first, second), []).append((r, rating))
        for (first, second), pair_rated in sorted(by_pair.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]])):
            pair_rows = [r for r, _ in pair_rated]
            score = winners.score_for_a([rating for _, rating in pair_rated]).reshape(-1)
            flip = np.array([r.system_a != first for r in pair_rows])
            score = np.where(flip, 1 - score, score)
            _, _, length_first, length_second = answers.of(pair_rows, [first] * len(pair_rows))
            try:
                fit = length_controlled_win_rate(score, length_first, length_second, [r.item_id for r in pair_rows])
            except NoEstimate as exc:
                estimate = low = high = coefficient = None
                reason = str(exc)
            else:
                estimate, low, high, coefficient, reason = fit.estimate, fit.low, fit.high, fit.length_coefficient, ""
            out.append(
                LengthControlled(
                    population=label,
                    system_a=first,
                    system_b=second,
                    judgments=len(pair_rows),
                    items=len({r.item_id for r in pair_rows}),
                    win_rate=float(score.mean()),
                    mean_length_a=float(length_first.mean()),
                    mean_length_b=float(length_second.mean()),
                    estimate=estimate,
                    low=low,
                    high=high,
                    length_coefficient=coefficient,
                    reason=reason,
                )
            )
    return out
