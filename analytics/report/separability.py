"""Separability: every stored run's delta per item (docs/separability.md), by metric and system pair."""

from __future__ import annotations

import dataclasses

import numpy as np

from annotation.models import Study
from selection.models import SeparabilityRun


@dataclasses.dataclass(frozen=True)
class PairSeparability:
    """One system pair's deltas under one metric: per item (external id; None where undefined), their mean and how
    many are undefined (an item with a single sample of a system)."""

    items: dict[str, float | None]
    mean: float | None
    undefined: int


def separability_section(study: Study) -> dict[str, dict[str, PairSeparability]]:
    """metric -> "system a vs system b" -> its deltas."""
    out: dict[str, dict[str, PairSeparability]] = {}
    for run in SeparabilityRun.objects.filter(study=study).select_related(
        "comparison__system_a", "comparison__system_b"
    ):
        values = dict(run.items.values_list("item__external_id", "delta"))
        defined = [v for v in values.values() if v is not None]
        out.setdefault(run.metric, {})[f"{run.comparison.system_a.name} vs {run.comparison.system_b.name}"] = (
            PairSeparability(
                items=values,
                mean=float(np.mean(defined)) if defined else None,
                undefined=sum(1 for v in values.values() if v is None),
            )
        )
    return out
