"""Agreement between the population's raters: Krippendorff's alpha over rated pairs and Cohen's kappa between
raters who share enough pairs."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Hashable

from analytics.core import agreement
from analytics.report.data import Row

MIN_OVERLAP = 10  # shared pairs for a Cohen's kappa between two raters


@dataclasses.dataclass(frozen=True)
class RaterPairKappa:
    rater_1: str
    rater_2: str
    overlap: int  # the pairs both rated
    kappa: float | None


@dataclasses.dataclass(frozen=True)
class Agreement:
    """Krippendorff's alpha (nominal) over the rated pairs (None, with the reason, when no pair has two raters) and
    Cohen's kappa for each two raters with at least ``MIN_OVERLAP`` shared pairs."""

    krippendorff_alpha: float | None
    units_with_two_or_more: int
    krippendorff_reason: str | None
    cohen_kappa: list[RaterPairKappa]


def agreement_section(rows: list[Row]) -> Agreement:
    """Agreement between the population's raters (Krippendorff's alpha over rated pairs, Cohen's kappa
    between raters with at least 10 shared pairs)."""
    units: dict[int, list[str]] = defaultdict(list)
    labels: dict[str, dict[Hashable, Hashable]] = defaultdict(dict)  # rater -> {pair id: answer}
    for r in rows:
        if r.effective_choice is not None:
            units[r.pair_id].append(r.effective_choice)
            labels[r.rater][r.pair_id] = r.effective_choice
    pairable = sum(1 for u in units.values() if len(u) >= 2)
    return Agreement(
        krippendorff_alpha=agreement.krippendorff_alpha_nominal(list(units.values())),
        units_with_two_or_more=pairable,
        krippendorff_reason=None if pairable else "not applicable: no pair has judgments by two raters",
        cohen_kappa=[RaterPairKappa(**k) for k in agreement.pairwise_kappas(labels, min_overlap=MIN_OVERLAP)],
    )
