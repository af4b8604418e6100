"""Bradley-Terry strengths from the humans and a judge together (PPI++ logistic M-estimation), beside the humans
alone, when every system pair's judged items are a uniform random sample."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from analytics.core import ppi, ratings
from analytics.report.data import Row, item_means, system_pairs
from analytics.report.estimates import census
from analytics.report.serial import key
from annotation.models import Study
from selection.services import UNRECORDED, SampleDesign
from selection.strategies import UNIFORM


@dataclasses.dataclass(frozen=True, kw_only=True)
class HybridStrength:
    """One system's rating on the Arena scale from the humans alone and with the judge (``lam``: its weight), with
    their 95 % intervals, over ``labelled`` units both judged and ``judge_only`` units; ``efficiency``: what one
    labelled unit with the judge is worth in units by people alone."""

    judge: str
    system: str
    labelled: int
    judge_only: int
    human_only: float
    human_low: float
    human_high: float
    hybrid: float
    low: float
    high: float
    lam: float = key("lambda")
    efficiency: float | None


def hybrid_strengths(
    study: Study, humans: list[Row], judges: list[Row], designs: dict[tuple[str, str], SampleDesign]
) -> list[HybridStrength]:
    """Per judge: Bradley-Terry strengths of every system from the humans alone and from the humans and the judge
    (PPI++ logistic M-estimation, analytics/core/ppi.py), on the Arena scale against the study's first system
    (1000 + 400 log10-odds; that system is the reference, without an interval). A unit is one item of one system
    pair: Y the humans' mean score for its first system, f the judge's; labelled where both judged it. Only when
    every system pair's items were drawn uniformly at random (or all judged): the fit takes its labelled units for
    a uniform sample. ``efficiency``: the squared ratio of the two intervals' widths, what one labelled unit with
    the judge is worth in units by people alone (checked against the realised ratio of mean squared errors on PRD
    by tests/analytics/core/test_coverage_prd.py)."""
    systems = list(study.systems.order_by("id").values_list("name", flat=True))
    index = {s: i for i, s in enumerate(systems)}

    def arena(theta: float) -> float:  # log-odds against the reference -> 1000 + 400 log10-odds
        return ratings.INITIAL + ratings.SCALE / math.log(ratings.BASE) * theta

    if strengths_blocked(designs, humans):
        return []  # its M-estimation takes the labelled units for a uniform sample; any other would bias it
    pairs = system_pairs(study)
    out = []
    for name in sorted({r.rater for r in judges}):
        rows = [r for r in judges if r.rater == name]
        lab: list[tuple[int, int, float, float]] = []
        rest: list[tuple[int, int, float]] = []
        for pair in pairs:
            y_by, f_by = item_means(humans, pair), item_means(rows, pair)
            a, b = index[pair[0]], index[pair[1]]
            lab += [(a, b, y_by[i], f_by[i]) for i in sorted(set(y_by) & set(f_by))]
            rest += [(a, b, f_by[i]) for i in sorted(set(f_by) - set(y_by))]
        if len(lab) < 2 or not rest:
            continue
        la, lb, y, f = (np.array(v) for v in zip(*lab, strict=True))
        ra, rb, fu = (np.array(v) for v in zip(*rest, strict=True))
        try:
            human = ppi.ppi_bradley_terry(la, lb, y, f, ra, rb, fu, len(systems), lam=0.0)
            hybrid = ppi.ppi_bradley_terry(la, lb, y, f, ra, rb, fu, len(systems))
        except ValueError:  # the labelled units do not connect every system
            continue
        for i, system in enumerate(systems):
            width = human.high[i] - human.low[i]
            out.append(
                HybridStrength(
                    judge=name,
                    system=system,
                    labelled=len(lab),
                    judge_only=len(rest),
                    human_only=arena(human.theta[i]),
                    human_low=arena(human.low[i]),
                    human_high=arena(human.high[i]),
                    hybrid=arena(hybrid.theta[i]),
                    low=arena(hybrid.low[i]),
                    high=arena(hybrid.high[i]),
                    lam=hybrid.lam,
                    efficiency=(width / (hybrid.high[i] - hybrid.low[i])) ** 2 if width else None,
                )
            )
    return out


def strengths_blocked(designs: dict[tuple[str, str], SampleDesign], humans: list[Row]) -> list[str]:
    """The system pairs whose judged items are not a uniform random sample (nor all judged): the strengths' fit,
    which takes its labelled units for one, is not computed while any pair is one."""
    return [
        f"{a} vs {b}"
        for (a, b), design in designs.items()
        if design.kind != UNIFORM and not (design.kind == UNRECORDED and census(design, item_means(humans, (a, b))))
    ]
