"""Where the ORM meets the selection core: load texts and embeddings, call the core, store results."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from django.db import transaction

from annotation.models import Comparison, Generation, Study
from selection import embedding
from selection.core import separability as sep
from selection.models import ItemSeparability, SeparabilityRun

Progress = Callable[[int, int], None]


def parse_metric(metric: str) -> tuple[str, bool]:
    """'cosine' | 'rouge1' | 'bleu', optionally with '-la' for the length-adjusted form."""
    base, _, suffix = metric.partition("-")
    if base not in sep.METRICS or suffix not in ("", "la"):
        names = ", ".join(f"{m}, {m}-la" for m in sep.METRICS)
        raise ValueError(f"unknown metric {metric!r}; choose one of {names}")
    return base, suffix == "la"


def _samples(study: Study) -> dict[tuple[int, int], list[Generation]]:
    """Generations per (item id, system id), in sample order."""
    out: dict[tuple[int, int], list[Generation]] = {}
    for g in Generation.objects.filter(item__study=study).order_by("item_id", "system_id", "sample_index"):
        out.setdefault((g.item_id, g.system_id), []).append(g)
    return out


def compute_separability(
    study: Study, metric: str = "cosine", progress: Progress | None = None
) -> list[SeparabilityRun]:
    """Separability of every system pair of the study under ``metric`` (SPEC §1), stored per item.

    Items where a system has a single sample get no delta (undefined, stored as NULL), never 0.
    ``progress(done, total)`` reports embedding progress for the cosine metric.
    """
    base, length_adjusted = parse_metric(metric)
    samples = _samples(study)
    vectors: dict[int, np.ndarray] = {}
    if base == "cosine":
        generations = [g for group in samples.values() for g in group]
        embedded = embedding.embed_texts([g.text for g in generations], progress=progress)
        vectors = {g.pk: v for g, v in zip(generations, embedded, strict=True)}
        similarity = None
    else:
        similarity = sep.rouge1_similarity() if base == "rouge1" else sep.bleu_similarity()

    def matrix(x: list[Generation], y: list[Generation]) -> np.ndarray:
        if base == "cosine":
            m = sep.cosine_matrix(np.stack([vectors[g.pk] for g in x]), np.stack([vectors[g.pk] for g in y]))
        else:
            m = sep.text_similarity_matrix([g.text for g in x], [g.text for g in y], similarity)
        return sep.length_adjust(m, [g.text for g in x], [g.text for g in y]) if length_adjusted else m

    runs = []
    items = list(study.items.order_by("position"))
    for comparison in Comparison.objects.filter(study=study).select_related("system_a", "system_b"):
        self_a, self_b, cross = [], [], []
        for item in items:
            a = samples[(item.pk, comparison.system_a_id)]
            b = samples[(item.pk, comparison.system_b_id)]
            self_a.append(sep.self_alignment(matrix(a, a)))
            self_b.append(sep.self_alignment(matrix(b, b)))
            cross.append(sep.cross_alignment(matrix(a, b)))
        result = sep.separability(np.array(self_a), np.array(self_b), np.array(cross))
        runs.append(_store(study, comparison, metric, items, result))
    return runs


def _nullable(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


@transaction.atomic
def _store(study: Study, comparison: Comparison, metric: str, items, result: sep.Separability) -> SeparabilityRun:
    SeparabilityRun.objects.filter(comparison=comparison, metric=metric).delete()
    run = SeparabilityRun.objects.create(
        study=study, comparison=comparison, metric=metric, low=_nullable(result.low), high=_nullable(result.high),
        encoder=embedding.encoder_name() if metric.startswith("cosine") else "",
    )
    ItemSeparability.objects.bulk_create(
        ItemSeparability(run=run, item=item, self_a=_nullable(a), self_b=_nullable(b), cross=float(c),
                         delta=_nullable(d))
        for item, a, b, c, d in zip(items, result.self_a, result.self_b, result.cross, result.delta, strict=True)
    )
    return run


def separability_values(run: SeparabilityRun) -> np.ndarray:
    """The defined deltas of a run (items with K >= 2 for both systems)."""
    return np.array([d for d in run.items.values_list("delta", flat=True) if d is not None], dtype=np.float64)
