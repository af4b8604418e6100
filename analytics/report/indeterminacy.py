"""Judges against humans under rating indeterminacy: on the pairs both judged, each judge's agreement with the
human majority, its position bias, the multi-label metrics (a forced-choice tie is the response set {A, B}, an empty
response set -- "both are bad" -- is Omega = [0, 0], and beta is applied to both options), their sensitivity to the
human beta, and the judges ranked by each metric; and how people turn response sets into forced choices."""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from typing import TypedDict, cast

import numpy as np

from analytics.core import agreement, bias, indeterminacy
from analytics.report.data import Row
from analytics.report.serial import optional
from annotation import orientation

BETA_SWEEP = np.round(np.linspace(0.0, 0.5, 11), 2)
# A judge is ranked against the humans only on at least this many pairs both judged; fewer are shown, unranked.
MIN_SHARED_PAIRS = 20
METRICS = ("mse", "coverage", "hit_rate", "kappa", "kl", "jsd")
BETTER_HIGH = {"coverage", "hit_rate", "kappa"}


@dataclasses.dataclass(frozen=True)
class ThresholdPoint:
    tau: float
    decision_consistency: float
    estimation_bias: float


@dataclasses.dataclass(frozen=True)
class BetaPoint:
    beta: float
    mse: float


@dataclasses.dataclass(frozen=True)
class JudgeMetrics:
    """One judge on the ``units`` pairs the humans judged too, over its ``verdicts`` (each presentation order on its
    own). ``kappa`` is ``kappa_per_item``, under the name the ranking and earlier reports use."""

    units: int
    verdicts: int
    agreement: float | None  # each verdict against its pair's human majority, a split counted as a tie
    agreement_split_first: float | None  # a split broken by the first human vote
    agreement_split_left_out: float | None  # split pairs left out
    p_first: float | None  # the share of its non-tie verdicts that chose the output shown first
    p_first_p_value: float | None  # the sign-flip test over items against 1/2, as the people's positional bias
    first_share: float | None  # the same over all its verdicts
    mse: float | None
    hit_rate: float | None
    coverage: float | None
    kappa: float | None
    kappa_per_item: float | None
    kappa_per_verdict: float | None
    kl: float | None
    jsd: float | None
    omega_human_mean: list[float | None]
    omega_judge_mean: list[float | None]
    threshold_sweep: list[ThresholdPoint]
    beta_sensitivity: list[BetaPoint]
    beta_hat: float | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Indeterminacy:
    """The humans' beta-hat and translation matrix F (paired elicitation; None without paired answers), the beta
    used for forced-choice-only human data, each judge's metrics, and -- once there are human and judge judgments
    on the same pairs -- the judges ranked by each metric (tiers: judges with the same value share a place)."""

    human_beta_hat: float | None
    human_translation_matrix: list[list[float | None]] | None
    translation_columns: list[str]
    translation_rows: list[str]
    beta: float
    judges: dict[str, JudgeMetrics]
    translation_matrix_rows: list[tuple[str, list[float | None]]] | None = optional()
    reason: str | None = optional()  # why no judge is compared
    ranking_min_shared_pairs: int | None = optional()
    shared_pairs: dict[str, int] | None = optional()
    unranked: list[str] | None = optional()
    ranking: dict[str, list[str]] | None = optional()  # metric -> judges, best first
    ranking_tiers: dict[str, list[list[str]]] | None = optional()


class _Common(TypedDict):
    """The fields of ``Indeterminacy`` that every report has, judges compared or not."""

    human_beta_hat: float | None
    human_translation_matrix: list[list[float | None]] | None
    translation_columns: list[str]
    translation_rows: list[str]
    beta: float
    translation_matrix_rows: list[tuple[str, list[float | None]]] | None


def indeterminacy_section(rows: list[Row], beta: float) -> Indeterminacy:
    """Judges against the humans among ``rows`` (the filtered humans and every judge), ``beta``: the human
    sensitivity applied to forced choices."""
    humans = [r for r in rows if r.kind == "human"]
    human_pairs = {r.pair_id for r in humans}
    judge_names = sorted({r.rater for r in rows if r.kind == "judge"})
    paired = [(r.choice, r.response_set) for r in humans if r.choice and r.response_set]
    matrix: list[list[float | None]] | None = (
        indeterminacy.translation_matrix([c for c, _ in paired], [s for _, s in paired]).tolist() if paired else None
    )
    columns, choices = ["{a}", "{b}", "{a,b}"], ["a", "b", "tie"]
    common: _Common = {
        "human_beta_hat": indeterminacy.beta_hat([c for c, _ in paired], [s for _, s in paired]) if paired else None,
        "human_translation_matrix": matrix,
        "translation_columns": columns,
        "translation_rows": choices,
        "beta": beta,
        "translation_matrix_rows": None if matrix is None else list(zip(choices, matrix, strict=True)),
    }
    if not judge_names or not humans:
        return Indeterminacy(**common, judges={}, reason="needs human and judge judgments on the same pairs")
    human_by_pair = _group(humans)
    judges = {}
    for name in judge_names:
        judge_rows = [r for r in rows if r.rater == name and r.pair_id in human_pairs]
        if judge_rows:
            judges[name] = _judge_metrics(human_by_pair, _group(judge_rows), beta, judge_rows)
    ranked = {n: v for n, v in judges.items() if v.units >= MIN_SHARED_PAIRS}
    ranking: dict[str, list[str]] = {}
    tiers: dict[str, list[list[str]]] = {}
    for m in METRICS:
        order = sorted(
            ((n, getattr(v, m)) for n, v in ranked.items() if getattr(v, m) is not None),
            key=lambda t: (-t[1] if m in BETTER_HIGH else t[1], t[0]),
        )
        ranking[m] = [name for name, _ in order]
        tiers[m] = []  # judges with the same value share a tier: ties are ties
        for k, (name, value) in enumerate(order):
            if k and math.isclose(value, order[k - 1][1], rel_tol=1e-9, abs_tol=1e-12):
                tiers[m][-1].append(name)
            else:
                tiers[m].append([name])
    return Indeterminacy(
        **common,
        judges=judges,
        ranking_min_shared_pairs=MIN_SHARED_PAIRS,
        shared_pairs={n: v.units for n, v in judges.items()},
        unranked=sorted(n for n in judges if n not in ranked),
        ranking=ranking,
        ranking_tiers=tiers,
    )


def _group(rows: list[Row]) -> dict[int, list[Row]]:
    out: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        out[r.pair_id].append(r)
    return out


def _omega(rows: list[Row], beta: float) -> np.ndarray:
    """Omega of one unit: response sets as given; forced choices (a tie = both) with sensitivity beta."""
    return indeterminacy.omega([r.response_set for r in rows], [r.effective_choice for r in rows], beta)


def _omegas(
    human_by_pair: dict[int, list[Row]], judge_by_pair: dict[int, list[Row]], units: list[int], beta: float
) -> tuple[np.ndarray, np.ndarray]:
    omega_h = np.array([_omega(human_by_pair[u], beta) for u in units])
    omega_j = np.array([_omega(judge_by_pair[u], 0.0) for u in units])
    return omega_h, omega_j


def _judge_metrics(
    human_by_pair: dict[int, list[Row]], judge_by_pair: dict[int, list[Row]], beta: float, judge_rows: list[Row]
) -> JudgeMetrics:
    units = sorted(judge_by_pair)
    omega_h, omega_j = _omegas(human_by_pair, judge_by_pair, units, beta)
    fc_h = np.array(
        [indeterminacy.forced_choice_distribution([r.effective_choice for r in human_by_pair[u]]) for u in units]
    )
    fc_j = np.array(
        [indeterminacy.forced_choice_distribution([r.effective_choice for r in judge_by_pair[u]]) for u in units]
    )
    judge_choice = [_plurality([r.effective_choice for r in judge_by_pair[u]]) for u in units]
    human_choice = [_plurality([r.effective_choice for r in human_by_pair[u]]) for u in units]
    both = [(h, j) for h, j in zip(human_choice, judge_choice, strict=True) if h and j]
    # every verdict on its own (each presentation order counts) against the human majority of its pair (a split
    # with no single most common answer is a tie; the other split rules are reported beside it), and how often
    # the judge picked the output shown first
    verdicts = _verdicts_against(human_by_pair, judge_by_pair, units, "tie")
    sided = [(r.effective_choice, r.a_shown_first, r.item_id) for _, r in verdicts if r.effective_choice in ("a", "b")]
    first = [orientation.to_display(choice, a_shown_first) == "first" for choice, a_shown_first, _ in sided]
    sweep = indeterminacy.threshold_sweep(omega_h, omega_j, option=0)
    # Cohen's kappa two ways: per item (the judge's plurality over its verdicts on the pair, both orders, against
    # the human majority: a judge that flips with the order counts as a tie) and per verdict (each verdict on its
    # own against the human majority of its pair, as agreement is counted)
    kappa_per_item = agreement.cohen_kappa([h for h, _ in both], [j for _, j in both]) if both else float("nan")
    paired = [(r.choice, r.response_set) for r in judge_rows if r.choice and r.response_set]
    return JudgeMetrics(
        units=len(units),
        verdicts=len(verdicts),
        agreement=_agreement(verdicts),
        agreement_split_first=_agreement(_verdicts_against(human_by_pair, judge_by_pair, units, "first")),
        agreement_split_left_out=_agreement(_verdicts_against(human_by_pair, judge_by_pair, units, "left_out")),
        p_first=sum(first) / len(sided) if sided else float("nan"),
        # clustered by item: the judge answers an item in both orders (docs/comparative-assessment.md#positional-bias)
        p_first_p_value=bias.positional_bias(np.array(first, dtype=bool), np.array([i for *_, i in sided])).p_value,
        first_share=sum(first) / len(verdicts) if verdicts else float("nan"),
        mse=indeterminacy.mse(omega_h, omega_j),
        hit_rate=indeterminacy.hit_rate(human_choice, judge_choice),
        coverage=indeterminacy.coverage(omega_h, judge_choice),
        kappa=kappa_per_item,
        kappa_per_item=kappa_per_item,
        kappa_per_verdict=(
            agreement.cohen_kappa([h for h, _ in verdicts], [r.effective_choice for _, r in verdicts])
            if verdicts
            else float("nan")
        ),
        kl=indeterminacy.kl_divergence(fc_h, fc_j),
        jsd=indeterminacy.js_divergence(fc_h, fc_j),
        omega_human_mean=np.nanmean(omega_h, axis=0) if len(units) else [None, None],
        omega_judge_mean=np.nanmean(omega_j, axis=0) if len(units) else [None, None],
        threshold_sweep=[
            ThresholdPoint(float(t), c, b) for t, c, b in zip(sweep.taus, sweep.consistency, sweep.bias, strict=True)
        ],
        beta_sensitivity=[
            BetaPoint(float(b), indeterminacy.mse(*_omegas(human_by_pair, judge_by_pair, units, float(b))))
            for b in BETA_SWEEP
        ],
        beta_hat=indeterminacy.beta_hat([c for c, _ in paired], [s for _, s in paired]) if paired else None,
    )


def _verdicts_against(
    human_by_pair: dict[int, list[Row]], judge_by_pair: dict[int, list[Row]], units: list[int], split: str
) -> list[tuple[str, Row]]:
    """Each judge verdict with the human majority of its pair under the split rule ``split``
    (analytics/core/agreement.py: plurality); pairs with no human majority are left out."""
    out: list[tuple[str, Row]] = []
    for u in units:
        human = _plurality([r.effective_choice for r in human_by_pair[u]], split)
        if human is not None:
            out.extend((human, r) for r in judge_by_pair[u] if r.effective_choice is not None)
    return out


def _plurality(choices: list[str | None], split: str = "tie") -> str | None:
    """``agreement.plurality`` of answers, read as an answer: it returns one of ``choices``, "tie" or None (its
    signature says Hashable)."""
    return cast("str | None", agreement.plurality(choices, split))


def _agreement(verdicts: list[tuple[str, Row]]) -> float:
    return sum(r.effective_choice == human for human, r in verdicts) / len(verdicts) if verdicts else float("nan")
