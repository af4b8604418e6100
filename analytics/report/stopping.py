"""Stopping: per system pair, who won each item, the hypergeometric risk that the leader is wrong, and what the
study's own decision rule for the first system's win rate over items settles: the planned looks of its live plan
(``group_sequential.standing``) when it has them, else the anytime-valid confidence sequence."""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np

from analytics.report.data import AnalysisParameters, Row
from annotation.models import Comparison, Study
from annotation.plan import planning
from selection import services as selection_services
from selection.core import decisions, designs, group_sequential, winners
from selection.core.stopping import stopping_status
from selection.models import PairDecision
from selection.rating_sets import rating_sets


@dataclasses.dataclass(frozen=True)
class PairStopping:
    """One system pair's stopping status: the anytime-valid ``decision`` ("a", "b", "equivalent", "undecided") with
    the interval of the first system's win rate over ``decision_items`` items; the leader by items won (``k`` of
    ``n`` counted), the risk that it is wrong within the pool of candidate items and beyond it, and whether the risk
    is under its ``threshold``; who won each item (external id -> a system's name or "tie"). ``decision_alpha`` is the
    study's error rate, ``error_control`` the control in force ("per_pair" or "study_wide") and
    ``decision_alpha_pair`` the rate this pair's sequence uses (docs/decisions.md#study-wide-error). ``decision_looks``:
    the planned looks the decision is read at (0: the continuous betting sequence), ``decision_design`` the design in
    words, ``decision_live`` whether it is the live plan's stored decision (``selection.models.PairDecision``) and
    ``decision_futile`` whether a planned look stopped the pair for futility."""

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
    decision_looks: int = 0
    decision_design: str = "continuous: anytime-valid confidence sequence"
    decision_live: bool = False
    decision_futile: bool = False


@dataclasses.dataclass(frozen=True)
class PairCall:
    """One pair's decision as the report shows it, and where it comes from."""

    decision: str
    low: float
    high: float
    n: int
    design: str
    live: bool = False
    futile: bool = False


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


def stopping_section(
    study: Study, rows: list[Row], settings: AnalysisParameters, plans: bool = True
) -> list[PairStopping]:
    """Per system pair: who won each item by the one item-winner rule (``winners.item_winner``, the
    live DiffUse loop's oracle too) over the population's judgments (humans by default) that are not
    superseded, and the
    hypergeometric risk that the leader is wrong, with N_pool = the candidates of the pair's selection.
    ``risk_beyond_pool`` is the same test with an unbounded pool (binomial): it stays honest when every
    pool item is judged and the hypergeometric risk is 0 by construction.

    ``decision``: the study's own decision for the first system's win rate over items, at the pair's share of the
    study's error rate as the study's error control says (``pair_call``): ``a`` / ``b`` (that system wins more than
    half), ``equivalent`` (within the margin of a half) or ``undecided``, with the interval ``win_rate_low`` ..
    ``win_rate_high``. ``plans``: whether ``rows`` are the people the live plan decides on (the default
    population), so that its stored decision may be read."""
    pools = selection_services.selection_pools(study)
    live = study.selection_settings
    # the pool the live plan plans its looks over: the pair's tasks (selection/hooks.py ``_observe_looks``)
    tasks = planning.pair_pools(study)  # the items each pair's plan holds
    stored = (
        {d.comparison_id: d for d in PairDecision.objects.filter(comparison__study=study)}
        if plans and live.looks()
        else {}
    )
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
        call = pair_call(
            item_scores(sets)[0],
            settings,
            live.looks(),
            live.futility(),
            tasks.get(c.pk) or n_pool,
            stored.get(c.pk),
            one_first=live.one_first(),
        )
        out.append(
            PairStopping(
                system_a=pair[0],
                system_b=pair[1],
                leader=names.get(status.leader or ""),
                decision=call.decision,
                win_rate_low=call.low,
                win_rate_high=call.high,
                decision_items=call.n,
                decision_alpha=settings.decision_alpha,
                decision_alpha_pair=settings.decision_alpha_pair,
                error_control=settings.error_control,
                decision_margin=settings.decision_margin,
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
                decision_looks=live.looks(),
                decision_design=call.design,
                decision_live=call.live,
                decision_futile=call.futile,
            )
        )
    return out


def pair_call(
    scores: np.ndarray,
    settings: AnalysisParameters,
    looks: int,
    futility: float,
    pool: int,
    stored: PairDecision | None = None,
    one_first: bool = False,
) -> PairCall:
    """The decision the study's own rule gives a pair (docs/decisions.md#group-sequential-looks), from one home each:

    - planned looks (``looks`` > 0) with the live plan's stored decision (``stored``, observed at planned looks: its
      ``pool`` is set): that decision as it stands (``selection/hooks.py`` keeps it with ``group_sequential.standing``
      on the whole items in the order they completed, each phase of one rater first at its share of the rate);
    - planned looks without one (a study whose plan has not run, imported judgments, another population):
      ``group_sequential.standing`` on ``scores`` (every item's score, in the order its last judgment arrived) over
      ``looks`` looks planned at ``pool`` items (the caller passes the pair's tasks, the plan's pool), with the
      study's futility threshold, at the rate the plan's first look would spend: with one rater first
      (``one_first``) phase 1's share of it (``designs.first_share``), as ``selection/hooks.py`` does -- the
      report's own reading (it cannot tell which phase the pair is in), and its design says so;
    - no planned looks: the anytime-valid betting confidence sequence over ``scores`` (``decisions.pair_decision``),
      a snapshot of all the judgments as they are, valid however often it is read."""
    if looks and stored is not None and stored.alpha:  # the live plan has planned its looks (alpha stored then)
        design = f"{looks} planned looks (live plan)"
        return PairCall(
            stored.decision, stored.low, stored.high, stored.items, design, live=True, futile=bool(stored.stopped)
        )
    if looks:
        size = max(pool, len(scores), 1)
        share = designs.first_share(looks) if one_first else 1.0
        now = group_sequential.standing(
            scores, looks, settings.decision_alpha_pair * share, settings.decision_margin, pool=size, futility=futility
        )
        phase = ", phase 1's share of the error rate" if one_first else ""
        design = f"{looks} planned looks at {size} items (the report's reading{phase})"
        return PairCall(now.decision, now.low, now.high, now.n, design, futile=bool(now.futile))
    decision = decisions.pair_decision(scores, settings.decision_alpha_pair, settings.decision_margin)
    # pair_decision (the betting rule) always gives an interval; only the hypergeometric rule's has none
    return PairCall(
        decision.decision,
        cast(float, decision.low),
        cast(float, decision.high),
        decision.n,
        "continuous: anytime-valid confidence sequence",
    )
