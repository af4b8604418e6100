"""Win rates with honest intervals: per system pair, the first system's win rate estimated the way its sample
design allows (``selection.services.sample_designs``) -- people alone, and people with each judge in one estimate."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from analytics.core import ppi
from analytics.report.data import Row, item_means, system_pairs
from analytics.report.serial import key
from annotation.models import Study
from selection.services import UNRECORDED, SampleDesign
from selection.strategies import COARSE_DISAGREEMENT, PURPOSIVE, STRATIFIED, UNIFORM, WEIGHTED

ALL_JUDGES = "all judges"  # the several-judges predictor: the mean of every judge's verdicts on an item

DESIGN_WORDS = {
    UNIFORM: "a uniform random sample",
    WEIGHTED: "a random sample with unequal, known chances, each judged item weighted by one over its chance",
    STRATIFIED: "a random sample of a fixed number from each band, each band weighted by its size",
    PURPOSIVE: "items chosen on purpose",
    UNRECORDED: "items chosen in a way no selection run records",
}


WIN_RATE = (0.0, 1.0)  # a win rate's scores: 1 a win, 1/2 a tie, 0 a loss (the estimators' bounds)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Estimate:
    """One estimate of a pair's win rate: its estimator and label (``short``: its name in the plot), the judge it
    combines with people (None: people alone), the items judged by people and by the judge only, the estimate with
    its 95 % interval, the judge's weight λ, the efficiency and what it is worth in labels by people alone on a
    uniform sample, and its target."""

    estimator: str
    label: str
    short: str
    judge: str | None
    labelled: int
    judge_only: int
    estimate: float
    low: float
    high: float
    lam: float | None = key("lambda")
    efficiency: float | None
    labels_worth: float | None
    target: str


@dataclasses.dataclass(frozen=True)
class PairEstimates:
    """One system pair: its sample design (method, kind and words), the items it stands for (``frame``), the
    candidates and the items drawn, a note, the target; its estimates (a probability sample, or a census) or why
    none (``reason``), with the mean of the judged items describing them only (``description``) where they were
    chosen on purpose; and the items judged by people (``labelled``)."""

    system_a: str
    system_b: str
    method: str
    design: str
    design_words: str
    frame: int
    candidates: int
    drawn: int
    note: str
    target: str
    estimates: list[Estimate]
    reason: str
    description: float | None
    labelled: int


def _estimate(name: str, label: str, judge: str | None, est: ppi.MeanEstimate) -> Estimate:
    """One estimate as the report keeps it; ``short``: its name in the plot."""
    short = "people alone" if judge is None else ("+ all judges" if judge == ALL_JUDGES else f"+ {judge}")
    return Estimate(
        estimator=name,
        label=label,
        short=short,
        judge=judge,
        labelled=est.n_labelled,
        judge_only=est.n_unlabelled,
        estimate=est.estimate,
        low=est.low,
        high=est.high,
        lam=None if judge is None or math.isnan(est.lam) else est.lam,
        efficiency=est.efficiency,
        labels_worth=est.labels_equivalent,
        target=est.target,
    )


def _pair_estimates(
    design: SampleDesign, y_by: dict[int, float], predictors: dict[str, dict[int, float]], finite: bool
) -> tuple[int, list[Estimate], str]:
    """The win-rate estimates one design allows: (labelled items, rows, why none when empty). ``predictors``: judge
    name -> the judge's score per item (``ALL_JUDGES``: every judge's verdicts pooled); an item a judge did not
    score takes 1/2, a fixed value that keeps the estimate unbiased."""
    frame = design.frame
    drawn = set(design.chosen) if design.kind != UNRECORDED else set(frame)
    labelled = [i for i in frame if i in y_by and i in drawn]
    n = len(labelled)
    if n < 2:
        return n, [], "needs two or more judged items of the sample"
    y = np.array([y_by.get(i, np.nan) for i in frame])
    sampled = np.array([i in y_by and i in drawn for i in frame])
    rows = []
    if design.kind in (UNIFORM, UNRECORDED):  # unrecorded: only a census reaches here
        people = ppi.classical_mean(y[sampled], population_size=len(frame) if finite else None, bounds=WIN_RATE)
        rows.append(_estimate("people", "People alone", None, people))
        rest = [i for i in frame if i not in set(labelled)]
        if rest:
            for name, f_by in predictors.items():
                if not any(i in f_by for i in rest):
                    continue  # a judge that scored none of the items people did not judge adds nothing
                f_lab = np.array([f_by.get(i, 0.5) for i in labelled])
                f_rest = np.array([f_by.get(i, 0.5) for i in rest])
                est = ppi.ppi_mean(y[sampled], f_lab, f_rest, finite=finite, bounds=WIN_RATE)
                label = "People + all judges (their mean verdict)" if name == ALL_JUDGES else f"People + {name}"
                rows.append(_estimate("ppi", label, name, est))
        return n, rows, ""
    share = n / len(design.inclusion)  # released in random order: the judged ones are a random part of the draw
    pi = np.array([design.inclusion.get(i, 1.0) * share for i in frame])
    if design.kind == STRATIFIED:
        strata = np.array([design.strata.get(i, -1) for i in frame])
        counts = {h: (int(np.sum(sampled & (strata == h))), int(np.sum(strata == h))) for h in np.unique(strata)}
        if all(k >= 2 or k == size for k, size in counts.values()):
            est = ppi.stratified_mean(y, strata, sampled, finite=finite, bounds=WIN_RATE)
            rows.append(_estimate("stratified", f"People alone, band by band ({len(counts)} bands)", None, est))
            return n, rows, ""
        # some band has fewer than two judged items yet: its share cannot be estimated on its own, and merging bands
        # drawn at different rates would bias the mean; weighting each item by one over its chance stays unbiased
        est = ppi.active_mean(y, np.full(len(frame), 0.5), pi, sampled, lam=0.0, finite=finite, bounds=WIN_RATE)
        rows.append(_estimate("weighted", "People alone, weighted (a band has fewer than two judged items)", None, est))
        return n, rows, ""
    people = ppi.active_mean(y, np.full(len(frame), 0.5), pi, sampled, lam=0.0, finite=finite, bounds=WIN_RATE)
    rows.append(_estimate("weighted", "People alone, weighted", None, people))
    for name, f_by in predictors.items():
        if not any(i in f_by for i in frame):
            continue  # a judge that scored none of these items adds nothing
        f = np.array([f_by.get(i, 0.5) for i in frame])
        est = ppi.active_mean(y, f, pi, sampled, finite=finite, bounds=WIN_RATE)
        label = "People + all judges, weighted" if name == ALL_JUDGES else f"People + {name}, weighted"
        rows.append(_estimate("weighted", label, name, est))
    return n, rows, ""


def _design_note(design: SampleDesign, predictors: dict) -> str:
    """What a reader should know about a design's rows beyond the numbers."""
    chances = list(design.inclusion.values())
    if design.method == "judge-disagreement" and design.kind == WEIGHTED and chances:
        if max(chances) - min(chances) <= 1e-9 * max(chances):  # the design fell back to equal chances
            return f"Not drawn by the judges' disagreement: {COARSE_DISAGREEMENT}."
    if design.kind == STRATIFIED and predictors:
        if design.method in ("judge-stratified", "judge-neyman"):
            return (
                "The judges chose this sample: their verdicts made the bands, so what they know is in the "
                "estimate already, with nothing fitted on people's labels; no row adds a judge again."
            )
        return "A judge is not combined with a stratified sample here: the estimate is people's, by band."
    return ""


def win_rate_estimates(
    study: Study, humans: list[Row], judges: list[Row], designs: dict[tuple[str, str], SampleDesign], finite: bool
) -> list[PairEstimates]:
    """Per system pair: the first system's win rate among the items people judged, estimated the way the pair's
    sample design allows (``designs``: ``selection.services.sample_designs``), for the study's target (items like
    these, or these items with the finite-population correction when ``finite``; analytics/core/ppi.py):

    - a probability sample: people alone (the labelled mean, weighted by one over each item's chance, or by
      stratum) and, for each judge and for all judges together, people and the judge in one estimate
      (prediction-powered with power tuning on a uniform sample, the weighted difference estimator on a weighted
      one; a stratified sample already uses its strata). Each with its 95 % interval and what it is worth in
      labels by people alone on a uniform sample (``MeanEstimate.efficiency``, checked against the realised
      efficiency on PRD by tests/analytics/core/test_coverage_prd.py);
    - items chosen on purpose (DiffUse, a threshold) or a draw no run records: the mean over the judged items,
      which describes those items only, and why no estimate beyond them is given.

    Per item, Y = the humans' mean score for the first system (1 a win, 1/2 a tie, 0 a loss), f = a judge's."""
    judge_names = sorted({r.rater for r in judges})
    out = []
    for pair in system_pairs(study):
        design = designs.get(pair)
        if design is None:
            continue
        y_by = item_means(humans, pair)
        predictors = {name: item_means([r for r in judges if r.rater == name], pair) for name in judge_names}
        predictors = {name: f_by for name, f_by in predictors.items() if f_by}
        if len(predictors) > 1:  # the several-judges predictor, when two or more judges scored this pair
            predictors[ALL_JUDGES] = item_means([r for r in judges if r.rater in predictors], pair)
        judged = [i for i in (design.chosen or design.frame) if i in y_by]
        estimates: list[Estimate] = []
        reason, description = "", None
        if design.probability_sample or (design.kind == UNRECORDED and census(design, y_by)):
            labelled, estimates, reason = _pair_estimates(design, y_by, predictors, finite)
        else:
            labelled = len(judged)
            reason = design.reason  # the page: the mean describes the judged items only, and why
            if judged:
                description = float(np.mean([y_by[i] for i in judged]))
        out.append(
            PairEstimates(
                system_a=pair[0],
                system_b=pair[1],
                method=design.method,
                design=design.kind,
                design_words=DESIGN_WORDS[design.kind],
                frame=len(design.frame),
                candidates=design.candidates,
                drawn=len(design.chosen) or len(design.frame),
                note=_design_note(design, predictors),
                target=ppi.THESE_ITEMS if finite else ppi.ITEMS_LIKE_THESE,
                estimates=estimates,
                reason=reason,
                description=description,
                labelled=labelled,
            )
        )
    return out


def census(design: SampleDesign, y_by: dict[int, float]) -> bool:
    """Whether people judged every item a design stands for (a census needs no record of how items were drawn)."""
    return bool(design.frame) and all(i in y_by for i in design.frame)
