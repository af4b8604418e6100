"""The leaderboards -- ELO, separability-weighted ELO, Bradley-Terry -- each row marked with whether its order above
the next is decided, the pairwise win rates and the win-ratio ranking, all from the same battles (and the
style-controlled board beside them, ``analytics/report/style.py``)."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np

from analytics.core import ratings
from analytics.leaderboards import BoardRow, default_intervals, leaderboard, rate, rows
from analytics.report.data import AnalysisParameters, Answers, Deltas, RatingParameters, Row
from analytics.report.serial import Unavailable, optional
from analytics.report.style import StyleControl, style_control_section
from selection.core import decisions, winners

NO_BATTLES = "no judgments with a choice yet"
NO_INTERVAL_ITEMS = 2  # an interval over items needs two items or more: one item's resamples are all alike


@dataclasses.dataclass(frozen=True)
class RankedRow(BoardRow):
    """A report board's row, with whether its place above the next row's system is decided (``order_below``):
    "decided", "equivalent", "reversed", "open" or "not compared"; None on the last row."""

    order_below: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Board:
    """One leaderboard of the report, from ``battles`` battles."""

    available: bool = True
    parameters: RatingParameters
    battles: int
    battles_without_separability: int | None = optional()  # sep-ELO: battles of items without one (weight K)
    intervals: str | None = optional()  # Bradley-Terry: "sandwich"
    leaderboard: list[RankedRow]


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoBoard:
    """A board that cannot be drawn yet, and why: every board before any judgment has a choice, the sep-ELO board
    before the items' separability is computed. (One class for both: their JSON has the same keys, so a stored
    report could not tell two classes apart when read back.)"""

    available: bool = False
    reason: str
    parameters: RatingParameters


AnyBoard = Board | NoBoard


@dataclasses.dataclass(frozen=True)
class WinRatio:
    system: str
    win_ratio: float | None  # its share of points over all its battles


@dataclasses.dataclass(frozen=True)
class WinRates:
    """Row system's share of points against the column system (ties half; None without battles)."""

    available: ClassVar[bool] = True
    systems: list[str]
    matrix: list[list[float | None]]
    battles: list[list[int]]
    win_ratio: list[WinRatio]  # best first


@dataclasses.dataclass(frozen=True)
class NoWinRates:
    """No battles yet: the report's win rates are an empty object."""

    available: ClassVar[bool] = False


@dataclasses.dataclass(frozen=True)
class Ratings:
    elo: AnyBoard
    sep_elo: AnyBoard
    bradley_terry: AnyBoard
    win_rates: WinRates | NoWinRates
    style_control: StyleControl | Unavailable


Battles = tuple[list[Row], np.ndarray, np.ndarray, np.ndarray]


def battles(rows: list[Row], systems: list[str], aggregation: str = "every", seed: int = 0) -> Battles:
    """Battles in creation order, aggregated per the study's setting (``ratings.aggregate_battles``):
    "majority" groups the judgments of one rated pair, "one_sampled" those of one item and system pair. Returns
    (the rows of the battles kept, system A's index, system B's index, A's score) per battle."""
    index = {s: i for i, s in enumerate(systems)}
    # a rating exactly when an answer; a superseded judgment (kept, not counted: a live loop's, a flagged arena
    # vote) is left out, as the stopping section leaves it out
    rated = [(r, r.rating) for r in rows if r.rating is not None and not r.superseded]
    battle_rows = [r for r, _ in rated]
    a = np.array([index[r.system_a] for r in battle_rows], dtype=np.int64)
    b = np.array([index[r.system_b] for r in battle_rows], dtype=np.int64)
    # the battle's outcome for system A from the one rating map: r = -1 (A) -> 1, 0 -> 0.5, +1 (B) -> 0
    score = winners.score_for_a([rating for _, rating in rated]).reshape(-1)
    if aggregation == "every" or not battle_rows:
        return battle_rows, a, b, score
    # the same system is "a" in every battle of a group: the one that comes first in the study's order
    flip = a > b
    a, b, score = np.where(flip, b, a), np.where(flip, a, b), np.where(flip, 1 - score, score)
    keys = [
        (r.pair_id,) if aggregation == "majority" else (r.item_id, int(x), int(y))
        for r, x, y in zip(battle_rows, a, b, strict=True)
    ]
    ids: dict[tuple, int] = {}
    group = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int64)
    kept, score = ratings.aggregate_battles(group, score, aggregation, seed)
    return [battle_rows[i] for i in kept], a[kept], b[kept], score


def ratings_section(
    settings: AnalysisParameters,
    rows: list[Row],
    systems: list[str],
    deltas: Deltas,
    answers: Answers,
    decided: dict[tuple[str, str], str],
) -> Ratings:
    """The boards, win rates and style-controlled board of ``rows``; ``decided``: each system pair's anytime-valid
    decision (the stopping section's), which marks each board row's order above the next."""
    params = settings.ratings()
    battle_rows, a, b, score = battles(rows, systems, params.aggregation, params.seed)
    if len(score) == 0:
        empty = NoBoard(reason=NO_BATTLES, parameters=params)
        return Ratings(empty, empty, empty, NoWinRates(), Unavailable(reason=NO_BATTLES))
    n = len(systems)
    k_elo, rounds, seed = params.k, params.bootstrap_rounds, params.seed
    # both ELO boards resample whole items: battle by battle covered 0.876 / 0.830 on the MTurk items (docs/ratings.md)
    items = np.array([r.item_id for r in battle_rows])
    elo = Board(
        parameters=params,
        battles=len(score),
        leaderboard=ranked(
            leaderboard(systems, *rate("elo", a, b, score, n, k_elo, rounds, seed, items), "elo"), decided
        ),
    )
    delta = np.array([deltas.get((r.system_a, r.system_b), {}).get(r.item_id, np.nan) for r in battle_rows])
    sep_elo: AnyBoard
    if np.isnan(delta).all():
        sep_elo = NoBoard(
            parameters=params,
            reason=(
                f"no {params.separability_metric} separability yet: it needs at least two samples of each system per "
                "item (K ≥ 2), and then computing on the Separability page"
            ),
        )
    else:
        weights = np.where(np.isnan(delta), params.T, delta)
        k = ratings.separability_k(weights, k_elo, params.T, params.alpha, params.beta)
        sep_elo = Board(
            parameters=params,
            battles=len(score),
            battles_without_separability=int(np.isnan(delta).sum()),
            leaderboard=ranked(
                leaderboard(systems, *rate("sep-elo", a, b, score, n, k, rounds, seed, items), "sep-elo"),
                decided,
            ),
        )
    if len(set(items.tolist())) < NO_INTERVAL_ITEMS:  # the bootstrap of one item has no spread: no interval
        elo = dataclasses.replace(elo, leaderboard=without_intervals(elo.leaderboard))
        if isinstance(sep_elo, Board):
            sep_elo = dataclasses.replace(sep_elo, leaderboard=without_intervals(sep_elo.leaderboard))
    infinite = why_no_mle(systems, a, b, score)
    bt: AnyBoard
    if infinite:
        bt = NoBoard(parameters=params, reason=infinite)
    else:
        bt = Board(
            parameters=params,
            battles=len(score),
            intervals=default_intervals("bt"),
            leaderboard=ranked(bradley_terry_rows(systems, battle_rows, a, b, score), decided),
        )
    wins, battles_between = ratings.win_rate_matrix(a, b, score, n)
    ratio = ratings.win_ratio_ranking(a, b, score, n)
    win_rates = WinRates(
        systems=systems,
        matrix=[
            [(wins[i, j] / battles_between[i, j]) if battles_between[i, j] else None for j in range(n)]
            for i in range(n)
        ],
        battles=battles_between.astype(int).tolist(),
        win_ratio=[
            WinRatio(s, value)
            for s, value in sorted(
                ((s, ratio[i]) for i, s in enumerate(systems)),
                key=lambda sv: -(sv[1] if sv[1] == sv[1] else -1),  # NaN (no battles) last
            )
        ],
    )
    styled = (
        Unavailable(reason=infinite)
        if infinite
        else style_control_section(battle_rows, a, b, score, systems, answers, settings.style_penalty)
    )
    return Ratings(elo, sep_elo, bt, win_rates, styled)


def without_intervals(rows: list[RankedRow]) -> list[RankedRow]:
    """A board's rows with no interval (NaN: null in JSON) and so one shared rank: over one item the bootstrap of
    items has no spread to show, and an interval of zero width would rank the systems apart on nothing."""
    return [dataclasses.replace(r, low=math.nan, high=math.nan, rank=1) for r in rows]


def _names(systems: list[str]) -> str:
    return systems[0] if len(systems) == 1 else ", ".join(systems[:-1]) + " and " + systems[-1]


def why_no_mle(systems: list[str], a: np.ndarray, b: np.ndarray, score: np.ndarray) -> str:
    """Why Bradley-Terry has no maximum-likelihood ratings on these battles, in words, or "" when it has them.

    They exist exactly when every split of the systems into two groups has a win or a tie each way across it
    (Zermelo; Ford 1957): the graph "i won or tied against j" is strongly connected. Otherwise the likelihood keeps
    growing as a group that never lost to the others moves away from them, and the fit stops at an arbitrary
    point (one vote gave 2285 and -285); its sandwich interval is undefined too. The groups named are the graph's
    strongly connected components that no outsider beat or tied (won every battle against the others), that beat
    or tied no outsider (lost every one), and the systems without battles (docs/ratings.md#when-there-is-no-rating)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(systems)
    if n < 2:
        return ""
    # i -> j: i won or tied against j at least once (a tie is half a win each way)
    edges = {(int(x), int(y)) for x, y, s in zip(a, b, score, strict=True) if s > 0}
    edges |= {(int(y), int(x)) for x, y, s in zip(a, b, score, strict=True) if s < 1}
    rows_, cols = zip(*edges, strict=True) if edges else ((), ())
    graph = coo_matrix((np.ones(len(edges)), (rows_, cols)), shape=(n, n))
    count, label = connected_components(graph, directed=True, connection="strong")
    if count == 1:
        return ""
    played = np.zeros(n, dtype=bool)
    played[a] = played[b] = True
    beaten = {label[y] for x, y in edges if label[x] != label[y]}  # components an outsider won or tied against
    beating = {label[x] for x, y in edges if label[x] != label[y]}  # components that won or tied against one
    groups: dict[str, list[str]] = {"idle": [], "top": [], "bottom": [], "apart": []}
    for c in range(count):
        members = [systems[i] for i in range(n) if label[i] == c]
        if not played[label == c].any():
            groups["idle"].append(_names(members) + (" has" if len(members) == 1 else " have") + " no battles yet")
        elif c not in beaten and c not in beating:
            groups["apart"].append(_names(members) + " have not met the other systems")
        elif c not in beaten:
            groups["top"].append(
                f"{members[0]} won every battle it was in"
                if len(members) == 1
                else f"{_names(members)} won every battle against the other systems"
            )
        elif c not in beating:
            groups["bottom"].append(
                f"{members[0]} lost every battle it was in"
                if len(members) == 1
                else f"{_names(members)} lost every battle against the other systems"
            )
    said = "; ".join(groups["top"] + groups["bottom"] + groups["apart"] + groups["idle"])
    return (
        f"no Bradley-Terry ratings yet: {said}. The maximum-likelihood ratings do not exist until every system has "
        "won or tied against the others and lost or tied against them (they would be infinitely far apart), and "
        "neither does their interval"
    )


def bradley_terry_rows(
    systems: list[str], battle_rows: list[Row], a: np.ndarray, b: np.ndarray, score: np.ndarray
) -> list[BoardRow]:
    """The Bradley-Terry board with its sandwich intervals clustered by item (``ratings.sandwich_bradley_terry``
    with each battle's item): an item's votes vary together, not as strangers' (docs/ratings.md#clustered-by-item)."""
    point = ratings.bradley_terry(a, b, score, len(systems))
    low, high = ratings.sandwich_bradley_terry(a, b, score, len(systems), point, items=[r.item_id for r in battle_rows])
    return rows(systems, ratings.Interval(point, point, low, high, ratings.ci_ranks(low, high)), "bt")


ORDER_WORDS = {decisions.A_BETTER: "decided", decisions.B_BETTER: "reversed", decisions.EQUIVALENT: "equivalent"}


def ranked(rows: list[BoardRow], decided: dict[tuple[str, str], str]) -> list[RankedRow]:
    """Each leaderboard row with whether its order above the next row's system is decided, by the pair's
    anytime-valid decision (``decided``) -- "decided" (this system wins more than half), "equivalent" (within the
    margin), "reversed" (the pair's decision puts the next system above), "open" (undecided) or "not compared".
    The last row has none."""
    swap = {decisions.A_BETTER: decisions.B_BETTER, decisions.B_BETTER: decisions.A_BETTER}
    out = []
    for upper, lower in zip(rows, [*rows[1:], None], strict=True):
        order = None
        if lower is not None:
            call = decided.get((upper.system, lower.system))  # "a": the upper system is better
            if call is None and (lower.system, upper.system) in decided:
                call = decided[(lower.system, upper.system)]
                call = swap.get(call, call)
            order = "not compared" if call is None else ORDER_WORDS.get(call, "open")
        out.append(RankedRow(**{f.name: getattr(upper, f.name) for f in dataclasses.fields(upper)}, order_below=order))
    return out
