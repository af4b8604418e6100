"""Positional bias: P(first shown chosen) per rater and per rater kind, and each judge's debiasing threshold checked
against the human majority."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np

from analytics.core import bias
from analytics.core.bias import PositionalBias
from analytics.report.data import Row
from annotation import orientation
from selection.core import winners
from selection.rating_sets import rating_sets


@dataclasses.dataclass(frozen=True)
class RaterBias:
    """One rater's P(first shown chosen) over their non-tie choices, clustered by item (``bias.positional_bias``: a
    judge that answers an item in both orders gives it two verdicts)."""

    rater: str
    kind: str
    n: int
    first_chosen: int
    rate: float
    low: float
    high: float
    p_value: float
    items: int


@dataclasses.dataclass(frozen=True)
class JudgeDebiasing:
    """A judge's debiasing threshold (``bias.debiasing``) on the pairs the humans judged, its threshold over all its
    verdicts, and how many of them had a human majority to compare with."""

    threshold: float
    tie_share: float
    first_rate_before: float
    first_rate_after: float
    accuracy_before: float | None
    accuracy_after: float | None
    n: int
    threshold_all: float
    compared_with_humans: int


@dataclasses.dataclass(frozen=True)
class PositionalBiasSection:
    raters: list[RaterBias]
    populations: dict[str, PositionalBias]  # rater kind -> its raters' choices, clustered by item
    debiasing: dict[str, JudgeDebiasing]  # judge -> its debiasing


def positional_bias_section(rows: list[Row], reference: list[Row]) -> PositionalBiasSection:
    """P(first shown chosen) per rater and per kind over ``rows`` (the population), each clustered by item (an
    item's raters saw the same outputs and largely agree: docs/comparative-assessment.md#positional-bias), and each
    judge's debiasing threshold checked against the human majority, both from ``reference`` (the filtered humans
    and every judge)."""
    by_rater: dict[str, list[tuple[bool, int]]] = defaultdict(list)  # (first shown chosen, item)
    kind_of: dict[str, str] = {}
    for r in rows:
        choice = r.effective_choice
        if choice in ("a", "b"):
            by_rater[r.rater].append((orientation.to_display(choice, r.a_shown_first) == "first", r.item_id))
            kind_of[r.rater] = r.kind
    raters = [
        RaterBias(name, kind_of[name], **dataclasses.asdict(_clustered(v))) for name, v in sorted(by_rater.items())
    ]
    populations = {}
    for kind in ("human", "judge"):
        values = [x for name, v in by_rater.items() if kind_of[name] == kind for x in v]
        if values:
            populations[kind] = _clustered(values)
    human_majority = majority_by_pair([r for r in reference if r.kind == "human"])
    debiasing = {}
    for name in sorted({r.rater for r in reference if r.kind == "judge" and r.probability_a is not None}):
        judged = [(r, r.probability_a) for r in reference if r.rater == name and r.probability_a is not None]
        judge_rows = [r for r, _ in judged]
        p_first = np.array([orientation.probability_first(p, r.a_shown_first) for r, p in judged])
        truth = [human_majority.get(r.pair_id) for r in judge_rows]
        sided = [(i, t) for i, t in enumerate(truth) if t in ("a", "b")]
        known = [i for i, _ in sided]
        truth_first = (
            np.array([orientation.to_display(t, judge_rows[i].a_shown_first) == "first" for i, t in sided])
            if known
            else None
        )
        result = bias.debiasing(p_first[known] if known else p_first, truth_first)
        debiasing[name] = JudgeDebiasing(
            **dataclasses.asdict(result), threshold_all=bias.debias_threshold(p_first), compared_with_humans=len(known)
        )
    return PositionalBiasSection(raters, populations, debiasing)


def _clustered(choices: list[tuple[bool, int]]) -> PositionalBias:
    """``bias.positional_bias`` of (first shown chosen, item) choices."""
    return bias.positional_bias(np.array([c for c, _ in choices], dtype=bool), np.array([i for _, i in choices]))


def majority_by_pair(rows: list[Row]) -> dict[int, str]:
    """Who won each rated pair by the one item-winner rule, each rater's one judgment of the pair being
    their rating set."""
    sets = rating_sets([(r.pair_id, r.rater, r.choice, r.response_set, r.probability_a, False) for r in rows])
    return {p: winners.item_winner(list(by_rater.values())) for p, by_rater in sets.items()}
