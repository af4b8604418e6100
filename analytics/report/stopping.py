"""Stopping: per system pair, who won each item, the hypergeometric risk that the leader is wrong, and what the
anytime-valid confidence sequence for the first system's win rate over items settles."""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np

from analytics.report.data import AnalysisParameters, Row
from annotation.models import Comparison, Study
from selection import services as selection_services
from selection.core import decisions, winners
from selection.core.stopping import stopping_status
from selection.rating_sets import rating_sets


@dataclasses.dataclass(frozen=True)
class PairStopping:
    """One system pair's stopping status: the anytime-valid ``decision`` ("a", "b", "equivalent", "undecided") with
    the interval of the first system's win rate over ``decision_items`` items; the leader by items won (``k`` of
    ``n`` counted), the risk that it is wrong within the pool of candidate items and beyond it, and whether the risk
    is under its ``threshold``; who won each item (external id -> a system's name or "tie"). ``decision_alpha`` is the
    study's error rate, ``error_control`` the control in force ("per_pair" or "study_wide") and
    ``decision_alpha_pair`` the rate this pair's sequence uses (docs/decisions.md#study-wide-error)."""

    system_a: str
    system_b: str
    leader: str | None
    decision: str
    win_rate_low: float
    win_rate_high: float
    decision_items: int
    decision_alpha: float
    decision_alpha_pair: float
    error_control: str
    decision_margin: float
    wins_a: int
    wins_b: int
    ties: int
    k: int
    n: int
    pool: int
    risk: float
    risk_beyond_pool: float
    threshold: float
    decided: bool
    ties_count_in_n: bool
    items: dict[str, str]


def pair_rating_sets(rows: list[Row], pair: tuple[str, str]) -> dict[str, dict[str, list[int]]]:
    """item -> rater -> their ratings of the item for ``pair`` (``selection.rating_sets``: in the pair's coordinates,
    -1 its first system; items in the order their last judgment arrived), from the rows that are not superseded."""
    return rating_sets(
        [
            (r.item, r.rater, r.choice, r.response_set, r.probability_a, (r.system_a, r.system_b) != pair)
            for r in rows
            if {r.system_a, r.system_b} == set(pair) and not r.superseded
        ]
    )


def item_scores(sets: dict[str, dict[str, list[int]]]) -> tuple[np.ndarray, np.ndarray]:
    """Each item's score for the pair's first system -- the mean over its raters of their mean outcome (1 a win,
    1/2 a tie, 0 a loss) -- and its number of judgments, in the order of ``sets``."""
    scores = [winners.item_score(list(by_rater.values())) for by_rater in sets.values()]
    votes = [sum(len(v) for v in by_rater.values()) for by_rater in sets.values()]
    return np.array(scores, dtype=np.float64), np.array(votes, dtype=np.int64)


def stopping_section(study: Study, rows: list[Row], settings: AnalysisParameters) -> list[PairStopping]:
    """Per system pair: who won each item by the one item-winner rule (``winners.item_winner``, the
    live DiffUse loop's oracle too) over the population's judgments (humans by default) that are not
    superseded, and the
    hypergeometric risk that the leader is wrong, with N_pool = the candidates of the pair's selection.
    ``risk_beyond_pool`` is the same test with an unbounded pool (binomial): it stays honest when every
    pool item is judged and the hypergeometric risk is 0 by construction.

    ``decision``: what the anytime-valid confidence sequence (at the pair's share of the study's error rate, as the
    study's error control says) for the first system's win rate over items settles
    (``selection.core.decisions``; an item's score is the mean of its raters' mean outcomes, ties as halves, items
    in the order their last judgment arrived): ``a`` / ``b`` (that system wins more than half), ``equivalent``
    (within the margin of a half) or ``undecided``, with the interval ``win_rate_low`` .. ``win_rate_high``. It is
    a snapshot of all the population's judgments as they are (partly rated items and imported files included); the
    decision that holds while a study is watched is the plan's (the study page, ``selection.models.PairDecision``),
    which observes whole items in the order they complete."""
    pools = selection_services.selection_pools(study)
    out = []
    for c in Comparison.objects.filter(study=study).select_related("system_a", "system_b"):
        pair = (c.system_a.name, c.system_b.name)
        sets = pair_rating_sets(rows, pair)
        won = {item: winners.item_winner(list(by_rater.values())) for item, by_rater in sets.items()}
        labels = list(won.values())
        n_pool = max(pools.get(c.pk, 0), len(won), 1)
        status = stopping_status(
            labels.count("a"), labels.count("b"), labels.count("tie"), n_pool, settings.risk, settings.ties_count_in_n
        )
        names = {"a": pair[0], "b": pair[1], "tie": "tie"}
        decision = decisions.pair_decision(item_scores(sets)[0], settings.decision_alpha_pair, settings.decision_margin)
        out.append(
            PairStopping(
                system_a=pair[0],
                system_b=pair[1],
                leader=names.get(status.leader or ""),
                decision=decision.decision,
                # pair_decision (the betting rule) always gives an interval; only the hypergeometric rule's has none
                win_rate_low=cast(float, decision.low),
                win_rate_high=cast(float, decision.high),
                decision_items=decision.n,
                decision_alpha=settings.decision_alpha,
                decision_alpha_pair=settings.decision_alpha_pair,
                error_control=settings.error_control,
                decision_margin=decision.margin,
                wins_a=status.wins_a,
                wins_b=status.wins_b,
                ties=status.ties,
                k=status.k,
                n=status.n,
                pool=n_pool,
                risk=status.risk,
                risk_beyond_pool=status.risk_beyond_pool,
                threshold=settings.risk,
                decided=decisions.from_hypergeometric(status).decided,
                ties_count_in_n=settings.ties_count_in_n,
                items={item: names[w] for item, w in sorted(won.items())},
            )
        )
    return out
