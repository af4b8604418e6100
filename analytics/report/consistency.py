"""Consistency: each rater's rating sets (Eq. 4 and Eq. 7 of the separability paper), their mean per item, the
headline mean per rater kind, and consistency by separability (Fig. 6 and Fig. 8) -- for one study, or pooled over
several (``pooled_consistency``)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Hashable
from typing import TypeGuard, cast

import numpy as np
from scipy.stats import spearmanr

from analytics.core import consistency
from analytics.core.consistency import BinSummary
from analytics.report.data import Deltas, Row, load_rows, separability_by_item
from analytics.report.serial import JsonForm, optional
from annotation.models import Study

KINDS = ("human", "judge")


@dataclasses.dataclass(frozen=True)
class RatingSetConsistency:
    """One rater's judgments of one item for one system pair (systems in name order, ratings flipped to it)."""

    rater: str
    kind: str
    item: str
    system_a: str
    system_b: str
    n: int
    consistency: float | None  # Eq. 4; undefined (NaN, None once stored) for fewer than two judgments
    preference_strength: float  # Eq. 7; negative favours system_a
    separability: float | None


@dataclasses.dataclass(frozen=True)
class ItemConsistency:
    """The mean over one item's rating sets by raters of one kind."""

    kind: str
    item: str
    system_a: str
    system_b: str
    raters: int
    consistency: float | None
    preference_strength: float
    separability: float | None


@dataclasses.dataclass(frozen=True)
class MeanInterval:
    """A headline mean with its n (of ``of`` values looked at) and 95 % interval clustered by item (none for one item);
    not available, with the reason, when no value is defined."""

    available: bool
    n: int
    of: int
    mean: float | None
    low: float | None
    high: float | None
    reason: str | None = optional()


@dataclasses.dataclass(frozen=True)
class SeparabilityBins:
    """Consistency over 4 equal-width separability bins (Fig. 6) and 5 equal-count bins (Fig. 8)."""

    equal_width: list[BinSummary]
    equal_count: list[BinSummary]


@dataclasses.dataclass(frozen=True)
class Consistency:
    summary: dict[str, MeanInterval]  # rater kind -> the mean rating-set consistency
    rating_sets: list[RatingSetConsistency]
    per_item: list[ItemConsistency]
    by_separability: dict[str, SeparabilityBins]  # rater kind -> its bins


def defined(value: float | None) -> TypeGuard[float]:
    """Whether a consistency is defined: undefined is NaN as computed, None once stored."""
    return value is not None and not np.isnan(value)


def consistency_section(rows: list[Row], deltas: Deltas) -> Consistency:
    # (rater, item, item id, system_a, system_b), systems in name order
    sets: dict[tuple[str, str, int, str, str], list[int]] = defaultdict(list)
    kinds: dict[tuple[str, str, int, str, str], str] = {}
    for row in rows:
        r = row.rating
        if r is None:
            continue
        first, second = sorted((row.system_a, row.system_b))
        key = (row.rater, row.item, row.item_id, first, second)
        # ratings of a rater who saw the pair as (B, A) are flipped to the canonical order
        sets[key].append(r if (row.system_a, row.system_b) == tuple(sorted((row.system_a, row.system_b))) else -r)
        kinds[key] = row.kind
    rating_sets = []
    for key, rs in sets.items():
        rater, item, item_id, sa, sb = key
        rating_sets.append(
            RatingSetConsistency(
                rater=rater,
                kind=kinds[key],
                item=item,
                system_a=sa,
                system_b=sb,
                n=len(rs),
                consistency=consistency.rating_set_consistency(rs),
                preference_strength=consistency.preference_strength(rs),
                separability=deltas.get((sa, sb), {}).get(item_id),
            )
        )
    per_item: list[ItemConsistency] = []
    for kind in KINDS:
        groups: dict[tuple[str, str, str], list[RatingSetConsistency]] = defaultdict(list)
        for s in rating_sets:
            if s.kind == kind:
                groups[(s.item, s.system_a, s.system_b)].append(s)
        for (item, sa, sb), group in groups.items():
            known = [g.consistency for g in group if defined(g.consistency)]
            per_item.append(
                ItemConsistency(
                    kind=kind,
                    item=item,
                    system_a=sa,
                    system_b=sb,
                    raters=len(group),
                    consistency=float(np.mean(known)) if known else None,
                    preference_strength=float(np.mean([g.preference_strength for g in group])),
                    separability=group[0].separability,
                )
            )
    summary = {}
    for kind in KINDS:
        of_kind = [s for s in rating_sets if s.kind == kind]
        if of_kind:
            rated = [s for s in of_kind if defined(s.consistency)]
            summary[kind] = mean_with_interval(
                [cast(float, s.consistency) for s in rated],
                of=len(of_kind),
                reason=consistency.NOT_APPLICABLE,
                items=[s.item for s in rated],
            )
    return Consistency(summary, rating_sets, per_item, consistency_bins(rating_sets))


def mean_with_interval(values: list[float], of: int, reason: str, items: list[Hashable] | None = None) -> MeanInterval:
    """A headline mean with its n and 95 % interval clustered by ``items`` (each value's item; None: every value its
    own), Student's t on G - 1 degrees of freedom (``consistency.mean_by_item``: an item's raters saw the same
    outputs, so its rating sets are not independent), clipped to [0, 1]; none for fewer than two items. "Not
    applicable" with ``reason`` when no value is defined (``of`` values were looked at)."""
    n = len(values)
    if not n:
        return MeanInterval(False, 0, of, None, None, None, reason)
    result = consistency.mean_by_item(values, None if items is None else _numbers(items))
    if result.items > 1:
        return MeanInterval(True, n, of, result.mean, max(0.0, result.low), min(1.0, result.high))
    return MeanInterval(True, n, of, result.mean, None, None)


def _numbers(keys: list[Hashable]) -> list[int]:
    """Each key (an item, or a (study, item) pair) as a number, equal keys equal numbers."""
    seen: dict[Hashable, int] = {}
    return [seen.setdefault(k, len(seen)) for k in keys]


def consistency_bins(
    rating_sets: list[RatingSetConsistency], items: list[Hashable] | None = None
) -> dict[str, SeparabilityBins]:
    """Per rater kind: rating-set consistency over 4 equal-width separability bins (Fig. 6) and 5
    equal-count bins (Fig. 8), from rating sets that have a separability and a defined consistency (n >= 2), each
    bin's standard error clustered by item (``items``: each rating set's item; None: its ``item``)."""
    keys = _numbers([s.item for s in rating_sets] if items is None else items)
    bins = {}
    for kind in KINDS:
        subset = [
            (s, key)
            for s, key in zip(rating_sets, keys, strict=True)
            if s.kind == kind and s.separability is not None and defined(s.consistency)
        ]
        if not subset:
            continue
        x = np.array([s.separability for s, _ in subset])
        y = np.array([s.consistency for s, _ in subset])
        clusters = np.array([key for _, key in subset])
        width_index, _ = consistency.equal_width_bins(x, 4)
        count_index = consistency.equal_count_bins(x, 5)
        bins[kind] = SeparabilityBins(
            equal_width=consistency.summarize_bins(x, y, width_index, 4, clusters),
            equal_count=consistency.summarize_bins(x, y, count_index, 5, clusters),
        )
    return bins


@dataclasses.dataclass(frozen=True)
class PooledStudy:
    """One study in the pooled bins: its rating sets with a defined consistency, those with a separability, the mean
    separability of its items and Spearman's rank correlation between an item's separability and its mean human
    consistency."""

    study: str
    metric: str
    rating_sets: int
    with_separability: int
    mean_separability: float | None
    spearman_separability_consistency: float | None


@dataclasses.dataclass(frozen=True)
class PooledConsistency(JsonForm):
    metric: str
    studies: list[PooledStudy]
    bins: dict[str, SeparabilityBins]


def pooled_consistency(studies: list[Study], metric: str | None = None) -> PooledConsistency:
    """Fig. 8 across studies: every rating set of every study with its item's separability under ``metric``
    (default: each study's own), pooled into one set of bins, as the paper pools its four configurations.
    Also per study: mean separability and Spearman's rank correlation between an item's separability and
    its mean human consistency. Separability is min-max normalised within each study and system pair
    (docs/separability.md#delta-is-relative-to-the-study), so pooled values compare positions within each study's
    range."""
    pooled: list[RatingSetConsistency] = []
    pooled_items: list[Hashable] = []  # (study, item): items of different studies are different items
    per_study = []
    for study in studies:
        used = metric or study.selection_settings.separability_metric
        section = consistency_section(load_rows(study), separability_by_item(study, used))
        pooled.extend(section.rating_sets)
        pooled_items.extend((study.pk, s.item) for s in section.rating_sets)
        sets = [s for s in section.rating_sets if defined(s.consistency)]
        items = [
            (i.separability, i.consistency)
            for i in section.per_item
            if i.kind == "human" and i.separability is not None and i.consistency is not None
        ]
        deltas = [delta for delta, _ in items]
        rho = (
            spearmanr(deltas, [c for _, c in items]).statistic
            if len(items) > 2 and len(set(deltas)) > 1
            else float("nan")
        )
        per_study.append(
            PooledStudy(
                study=study.name,
                metric=used,
                rating_sets=len(sets),
                with_separability=sum(1 for s in sets if s.separability is not None),
                mean_separability=float(np.mean(deltas)) if deltas else None,
                spearman_separability_consistency=rho,
            )
        )
    return PooledConsistency(metric or "each study's own", per_study, consistency_bins(pooled, pooled_items))
