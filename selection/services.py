"""Where the ORM meets the selection core: load texts and embeddings, call the core, store results."""

from __future__ import annotations

import dataclasses
import hashlib
import zlib
from collections.abc import Callable
from typing import cast

import numpy as np
from django.db import transaction

from annotation import elicitation
from annotation.models import Comparison, Generation, Item, Judgment, Rater, Study, SystemEndpoint, Task
from selection import embedding
from selection.core import separability as sep
from selection.core import winners
from selection.core.diffuse import Dendrogram, difference_vectors, ward_tree
from selection.models import Embedding, ItemSeparability, IterativeRun, SelectionRun, SeparabilityRun, StoredTree
from selection.strategies import (
    PURPOSIVE,
    STRATEGIES,
    STRATIFIED,
    UNIFORM,
    WEIGHTED,
    SelectionContext,
    get_strategy,
    is_live,
)

LIVE_METHOD = "diffuse-iterative"

Progress = Callable[[int, int], None]


def parse_metric(metric: str) -> tuple[str, bool]:
    """'cosine' | 'rouge1' | 'bleu', optionally with '-la' for the length-adjusted form."""
    base, _, suffix = metric.partition("-")
    if base not in sep.METRICS or suffix not in ("", "la"):
        names = ", ".join(f"{m}, {m}-la" for m in sep.METRICS)
        raise ValueError(f"unknown metric {metric!r}; choose one of {names}")
    return base, suffix == "la"


def embedding_coverage(study: Study) -> tuple[int, int]:
    """(distinct outputs already embedded with the study encoder, distinct outputs)."""
    hashes = Generation.objects.filter(item__study=study).values("text_hash").distinct()
    done = Embedding.objects.filter(encoder=embedding.encoder_name(), text_hash__in=hashes).count()
    return done, hashes.count()


def do_embed_study(study: Study, progress: Progress | None = None) -> int:
    """Embed every distinct output of the study (cached ones are skipped); returns how many there are."""
    texts = list(dict.fromkeys(Generation.objects.filter(item__study=study).values_list("text", flat=True)))
    embedding.do_embed_texts(texts, progress=progress)
    return len(texts)


def _samples(study: Study) -> dict[tuple[int, int], list[Generation]]:
    """Generations per (item id, system id), in sample order."""
    out: dict[tuple[int, int], list[Generation]] = {}
    for g in Generation.objects.filter(item__study=study).order_by("item_id", "system_id", "sample_index"):
        out.setdefault((g.item_id, g.system_id), []).append(g)
    return out


Matrix = Callable[[list[Generation], list[Generation]], np.ndarray]


def do_similarity(metric: str, generations: list[Generation], progress: Progress | None = None) -> Matrix:
    """The similarity matrix of two lists of these generations under ``metric`` (docs/separability.md): the cosine
    metric embeds them first (cached), ``progress(done, total)`` reporting it; ``-la`` is the length adjustment."""
    base, length_adjusted = parse_metric(metric)
    vectors: dict[int, np.ndarray] = {}
    if base == "cosine":
        embedded = embedding.do_embed_texts([g.text for g in generations], progress=progress)
        vectors = {g.pk: v for g, v in zip(generations, embedded, strict=True)}
        text_similarity = None
    else:
        text_similarity = sep.rouge1_similarity() if base == "rouge1" else sep.bleu_similarity()

    def matrix(x: list[Generation], y: list[Generation]) -> np.ndarray:
        if text_similarity is None:  # cosine
            m = sep.cosine_matrix(np.stack([vectors[g.pk] for g in x]), np.stack([vectors[g.pk] for g in y]))
        else:
            m = sep.text_similarity_matrix([g.text for g in x], [g.text for g in y], text_similarity)
        return sep.length_adjust(m, [g.text for g in x], [g.text for g in y]) if length_adjusted else m

    return matrix


def item_alignments(a: list[Generation], b: list[Generation], matrix: Matrix) -> tuple[float, float, float]:
    """One item's raw alignments from its samples of the two systems: self A, self B (NaN with one sample) and cross
    (docs/separability.md#alignments). Normalised over all of a pair's items together into delta (``sep.separability``):
    the one computation of both a whole study's separability and an arena's, prompt by prompt."""
    return sep.self_alignment(matrix(a, a)), sep.self_alignment(matrix(b, b)), sep.cross_alignment(matrix(a, b))


def samples_needed(study: Study) -> dict[int, int]:
    """System id -> the samples an item needs of it before its separability is computed: in an arena every sample its
    endpoint asks for (the reply shown and K more: a prompt still being sampled waits); otherwise none are missing
    (a study file gives every item all its outputs), so 1."""
    if not study.is_arena:
        return {}
    return dict(SystemEndpoint.objects.filter(system__study=study).values_list("system_id", "samples"))


def do_compute_separability(
    study: Study, metric: str = sep.DEFAULT_METRIC, progress: Progress | None = None
) -> list[SeparabilityRun]:
    """Separability of every system pair of the study under ``metric`` (docs/separability.md), stored per item.

    Items where a system has a single sample get no delta (undefined, stored as NULL), never 0. A pair's items are
    those with samples of both its systems (in an arena: its battles' prompts, once all their samples are in).
    ``progress(done, total)`` reports embedding progress for the cosine metric.
    """
    parse_metric(metric)
    samples = _samples(study)
    needed = samples_needed(study)
    matrix = do_similarity(metric, [g for group in samples.values() for g in group], progress)
    runs = []
    items = list(study.items.order_by("position"))
    for comparison in Comparison.objects.filter(study=study).select_related("system_a", "system_b"):
        first, second = comparison.system_a_id, comparison.system_b_id
        pair_items = [
            item
            for item in items
            if len(samples.get((item.pk, first), ())) >= needed.get(first, 1)
            and len(samples.get((item.pk, second), ())) >= needed.get(second, 1)
        ]
        aligned = [item_alignments(samples[(i.pk, first)], samples[(i.pk, second)], matrix) for i in pair_items]
        self_a, self_b, cross = (np.array([row[j] for row in aligned], dtype=np.float64) for j in range(3))
        result = sep.separability(self_a, self_b, cross)
        runs.append(_store(study, comparison, metric, pair_items, result))
    return runs


def _nullable(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _float(value: float | None) -> float:
    return float("nan") if value is None else value


@transaction.atomic
def _store(study: Study, comparison: Comparison, metric: str, items, result: sep.Separability) -> SeparabilityRun:
    SeparabilityRun.objects.filter(comparison=comparison, metric=metric).delete()
    run = SeparabilityRun.objects.create(
        study=study,
        comparison=comparison,
        metric=metric,
        low=_nullable(result.low),
        high=_nullable(result.high),
        encoder=embedding.encoder_name() if metric.startswith("cosine") else "",
    )
    ItemSeparability.objects.bulk_create(
        ItemSeparability(
            run=run, item=item, self_a=_nullable(a), self_b=_nullable(b), cross=float(c), delta=_nullable(d)
        )
        for item, a, b, c, d in zip(items, result.self_a, result.self_b, result.cross, result.delta, strict=True)
    )
    return run


def do_add_item_separability(
    study: Study, comparison: Comparison, metric: str, aligned: dict[int, tuple[float, float, float]]
) -> SeparabilityRun:
    """Add items' raw alignments (item id -> ``item_alignments``) to the pair's stored separability under ``metric``
    (created when it has none), then normalise every item of the run again (the bounds are over all of them:
    docs/separability.md#normalisation-and-delta), so the stored deltas are exactly those ``do_compute_separability``
    would store over the same items. An item already stored keeps its alignments. Under the run's row lock."""
    with transaction.atomic():
        run, _ = SeparabilityRun.objects.get_or_create(
            comparison=comparison,
            metric=metric,
            defaults={"study": study, "encoder": embedding.encoder_name() if metric.startswith("cosine") else ""},
        )
        run = SeparabilityRun.objects.select_for_update().get(pk=run.pk)
        ItemSeparability.objects.bulk_create(
            [
                ItemSeparability(run=run, item_id=item_id, self_a=_nullable(a), self_b=_nullable(b), cross=float(c))
                for item_id, (a, b, c) in aligned.items()
            ],
            ignore_conflicts=True,  # stored already (by an earlier job): kept
        )
        rows = list(run.items.order_by("pk"))
        result = sep.separability(
            np.array([_float(r.self_a) for r in rows]),
            np.array([_float(r.self_b) for r in rows]),
            np.array([r.cross for r in rows]),
        )
        for row, delta in zip(rows, result.delta, strict=True):
            row.delta = _nullable(delta)
        ItemSeparability.objects.bulk_update(rows, ["delta"], batch_size=500)
        run.low, run.high = _nullable(result.low), _nullable(result.high)
        run.save(update_fields=["low", "high", "created"])  # created: auto_now, when the run last changed
    return run


def separability_values(run: SeparabilityRun) -> np.ndarray:
    """The defined deltas of a run (items with K >= 2 for both systems)."""
    return np.array([d for d in run.items.values_list("delta", flat=True) if d is not None], dtype=np.float64)


# --------------------------------------------------------------------------------------------
# Selection


def do_build_selection_context(
    study: Study, comparison: Comparison, items: list[Item], params: dict | None = None
) -> SelectionContext:
    """The candidates of one system pair for a strategy: difference vectors of sample 0 of each system
    (embedded on first use, cached) and separability under a metric (computed if not stored yet)."""

    def vectors() -> np.ndarray:
        first = {
            (g.item_id, g.system_id): g.text
            for g in Generation.objects.filter(
                item__in=items, sample_index=0, system_id__in=[comparison.system_a_id, comparison.system_b_id]
            )
        }
        texts_a = [first[(i.pk, comparison.system_a_id)] for i in items]
        texts_b = [first[(i.pk, comparison.system_b_id)] for i in items]
        embedded = embedding.do_embed_texts(texts_a + texts_b)
        return difference_vectors(embedded[: len(items)], embedded[len(items) :])

    def deltas(metric: str) -> np.ndarray:
        run = SeparabilityRun.objects.filter(comparison=comparison, metric=metric).first()
        if run is None:
            run = next(r for r in do_compute_separability(study, metric) if r.comparison_id == comparison.pk)
        by_item = dict(run.items.values_list("item_id", "delta"))
        return np.array([np.nan if by_item.get(i.pk) is None else by_item[i.pk] for i in items], dtype=np.float64)

    def tree(x: np.ndarray) -> Dendrogram:
        return _stored_tree(comparison, items, x, seed=study.seed)

    return SelectionContext(
        len(items), vectors, deltas, dict(params or {}), tree, load_judges=lambda: judge_scores(comparison, items)
    )


def judge_scores(comparison: Comparison, items: list[Item]) -> np.ndarray:
    """The LLM judges' verdicts on each item of a system pair (the judgments of raters of kind judge, current
    ones only), as their scores for the pair's first system (1 a win, 1/2 no preference, 0 a loss, whichever
    system the judgment calls A): one row per item, NaN-padded to the item with the most verdicts."""
    first, second = comparison.system_a_id, comparison.system_b_id
    rows = (
        Judgment.objects.counted()
        .filter(
            pair__item__in=items,
            rater__kind=Rater.Kind.JUDGE,
            pair__generation_a__system_id__in=[first, second],
            pair__generation_b__system_id__in=[first, second],
        )
        .values_list(
            "pair__item_id",
            "pair__generation_a__system_id",
            "pair__generation_b__system_id",
            "choice",
            "response_set",
            "probability_a",
        )
    )
    by_item: dict[int, list[float]] = {}
    for item_id, system_a, system_b, choice, response_set, probability_a in rows:
        answer = elicitation.effective_choice(choice, response_set, probability_a)
        if answer is None or system_a == system_b:
            continue
        rating = winners.rating_for(answer, flipped=system_a != first)
        by_item.setdefault(item_id, []).append(float(winners.score_for_a(rating)))
    width = max((len(v) for v in by_item.values()), default=0)
    out = np.full((len(items), width), np.nan)
    for row, item in enumerate(items):
        scores = by_item.get(item.pk, [])
        out[row, : len(scores)] = scores
    return out


def _stored_tree(comparison: Comparison, items: list[Item], vectors: np.ndarray, seed: int = 0) -> Dendrogram:
    """The Ward tree of these candidates: computed once, stored, then read back (docs/diffuse.md#ward-tree)."""
    digest = hashlib.sha256(",".join(str(i.pk) for i in items).encode()).hexdigest()
    key = {"comparison": comparison, "encoder": embedding.encoder_name(), "candidates_digest": digest}
    found = StoredTree.objects.filter(**key).first()
    if found is not None:
        z = np.frombuffer(bytes(found.linkage), dtype="<f8").reshape(-1, 4)
        groups = [np.array(g, dtype=np.int64) for g in found.leaf_groups] or None
        return Dendrogram(vectors, z, groups)
    tree = ward_tree(vectors, seed=seed)
    groups = [] if tree.n == tree.n_items else [tree.members(leaf).tolist() for leaf in range(tree.n)]
    StoredTree.objects.get_or_create(**key, defaults={"linkage": tree.z.astype("<f8").tobytes(), "leaf_groups": groups})
    return tree


def do_run_selection(
    study: Study,
    comparison: Comparison,
    method: str,
    budget: int | None,
    seed: int,
    params: dict | None = None,
    items: list[Item] | None = None,
) -> tuple[list[Item], SelectionRun]:
    """Run a strategy for one system pair over ``items`` (default: all of the study's items), store the
    run (method, parameters, seed, chosen items) and return the chosen items in release order.
    The same inputs and seed always give the same items."""
    strategy = get_strategy(method)
    items = list(study.items.order_by("position")) if items is None else items
    context = do_build_selection_context(study, comparison, items, params)
    # Seeded by the system names, not database ids, so the same file, settings and seed reproduce the
    # same items in any database.
    pair_key = zlib.crc32(f"{comparison.system_a.name}\x00{comparison.system_b.name}".encode())
    rng = np.random.default_rng([seed, pair_key])
    chosen = [items[i] for i in strategy.select(context, budget, rng)]
    frame = context.notes.pop("frame", None)
    if strategy.design != PURPOSIVE and (frame is not None or len(chosen) < len(items)):
        # a sample of part of the candidates: keep what it was drawn from (selection.services.sample_designs)
        context.notes["candidate_items"] = [
            items[i].external_id for i in (range(len(items)) if frame is None else frame)
        ]
    run = SelectionRun.objects.create(
        study=study,
        comparison=comparison,
        system_a=comparison.system_a.name,
        system_b=comparison.system_b.name,
        method=method,
        params=dict(params or {}),
        budget=budget,
        seed=seed,
        items=[i.external_id for i in chosen],
        candidates=len(items),
        details=context.notes,
    )
    return chosen, run


def plan_runs(study: Study) -> dict[int, SelectionRun | IterativeRun | None]:
    """Comparison id -> the selection behind the items the study's plan released for it (the one home of "which run
    is this pair's"): its live iterative run while the study's method is live; else the latest selection run whose
    chosen items are the items released (a ``select`` run without --apply chose items nobody was sent, and does not
    count); the latest run when nothing was released; None when released items match no stored run."""
    released: dict[int, set[str]] = {}
    for comparison_id, external_id in Task.objects.filter(study=study).values_list(
        "comparison_id", "item__external_id"
    ):
        released.setdefault(comparison_id, set()).add(external_id)
    runs: dict[int, list[SelectionRun]] = {}
    for run in SelectionRun.objects.filter(study=study, comparison__isnull=False).order_by("created", "id"):
        runs.setdefault(cast(int, run.comparison_id), []).append(run)  # comparison__isnull=False
    live = (
        {run.comparison_id: run for run in IterativeRun.objects.filter(study=study).defer(*TREE_ONLY)}
        if is_live(study.selection_settings.selection_method)
        else {}
    )
    out: dict[int, SelectionRun | IterativeRun | None] = {}
    for comparison_id in study.comparisons.values_list("id", flat=True):
        if comparison_id in live:
            out[comparison_id] = live[comparison_id]
            continue
        stored = runs.get(comparison_id, [])
        items = released.get(comparison_id)
        if items is None:
            out[comparison_id] = stored[-1] if stored else None
        else:
            out[comparison_id] = next((run for run in reversed(stored) if set(run.items) == items), None)
    return out


TREE_ONLY = ("linkage", "leaf_groups", "schedule")  # what an iterative run's design never reads


def selection_pools(study: Study) -> dict[int, int]:
    """Comparison id -> N_pool, the number of candidate items the comparison's selection drew from (``plan_runs``:
    the live iterative run's candidates, else the plan's selection run's); the study's items when no run says."""
    total = study.items.count()
    return {
        comparison_id: (len(run.item_ids) if isinstance(run, IterativeRun) else run.candidates) if run else total
        for comparison_id, run in plan_runs(study).items()
    }


def chosen_items(study: Study) -> list[dict]:
    """What the selection did, per system pair: the items released to raters (the plan's tasks, in release
    order), each with its DiffUse cluster size when the strategy reported one (how many candidates the
    representative stands for), its inclusion probability when the strategy drew with known chances, and
    its separability under the study's metric; the pair's sample design (``sample_designs``) and the number of
    candidates it drew from."""
    settings = study.selection_settings
    runs = plan_runs(study)
    designs = sample_designs(study, runs)
    deltas = {
        (c, i): d
        for c, i, d in ItemSeparability.objects.filter(
            run__study=study, run__metric=settings.separability_metric
        ).values_list("run__comparison_id", "item_id", "delta")
    }
    released: dict[int, list[tuple[int, str]]] = {}
    for comparison_id, item_id, external_id in (
        Task.objects.filter(study=study)
        .order_by("position")
        .values_list("comparison_id", "item_id", "item__external_id")
    ):
        released.setdefault(comparison_id, []).append((item_id, external_id))
    out = []
    for c in study.comparisons.select_related("system_a", "system_b"):
        run = runs.get(c.pk)
        run = run if isinstance(run, SelectionRun) else None
        design = designs[(c.system_a.name, c.system_b.name)]
        sizes = dict(zip(run.items, run.details.get("cluster_sizes", []), strict=False)) if run else {}
        chances = dict(zip(run.items, run.details.get("inclusion", []), strict=False)) if run else {}
        out.append(
            {
                "comparison": c,
                "label": f"{c.system_a.name} vs {c.system_b.name}",
                "method": design.method or settings.selection_method,
                "candidates": design.candidates,
                "design": design.kind,
                "items": [
                    {
                        "item_id": item_id,
                        "external_id": external_id,
                        "cluster_size": sizes.get(external_id),
                        "inclusion": chances.get(external_id),
                        "delta": deltas.get((c.pk, item_id)),
                        "band": None if item_id not in design.strata else design.strata[item_id] + 1,
                    }
                    for item_id, external_id in released.get(c.pk, [])
                ],
                "has_clusters": bool(sizes),
                "has_inclusion": bool(chances),
                "has_bands": bool(design.strata),
            }
        )
    return out


UNRECORDED = "unrecorded"


@dataclasses.dataclass(frozen=True)
class SampleDesign:
    """How the items people judge for one system pair were drawn: the one home of "what kind of sample is this",
    read by the study report's estimates and the selection page. Built from the run behind the
    pair's plan (``plan_runs``).

    ``kind``: strategies.UNIFORM (every frame item had the same chance), WEIGHTED (unequal chances, stored),
    STRATIFIED (a fixed share of each stratum, stored with the strata), PURPOSIVE (chosen on purpose: a mean over
    the judged items describes them and estimates nothing beyond them; ``reason`` says why) or UNRECORDED (no
    selection run says how the items were chosen: only a census -- every item judged -- allows an estimate)."""

    method: str
    kind: str
    frame: list[int]  # the item ids the sample stands for (the candidates it was drawn from)
    chosen: list[int]  # the item ids drawn, in release order
    inclusion: dict[int, float]  # chosen item id -> its inclusion probability (weighted and stratified designs)
    strata: dict[int, int]  # frame item id -> its stratum (stratified designs)
    reason: str = ""
    candidates: int = 0  # how many items the selection chose from

    @property
    def probability_sample(self) -> bool:
        return self.kind in (UNIFORM, WEIGHTED, STRATIFIED)


def sample_designs(study: Study, runs: dict | None = None) -> dict[tuple[str, str], SampleDesign]:
    """(system a, system b) of each comparison -> how its items were drawn (``SampleDesign``), from ``plan_runs``."""
    runs = plan_runs(study) if runs is None else runs
    ids = dict(study.items.values_list("external_id", "id"))
    all_items = list(study.items.order_by("position").values_list("id", flat=True))
    released: dict[int, list[int]] = {}
    for comparison_id, item_id in (
        Task.objects.filter(study=study).order_by("position").values_list("comparison_id", "item_id")
    ):
        released.setdefault(comparison_id, []).append(item_id)
    out = {}
    for c in study.comparisons.select_related("system_a", "system_b"):
        pair = (c.system_a.name, c.system_b.name)
        run = runs.get(c.pk)
        if isinstance(run, IterativeRun):
            out[pair] = SampleDesign(
                LIVE_METHOD,
                PURPOSIVE,
                list(run.item_ids),
                released.get(c.pk, []),
                {},
                {},
                get_strategy(LIVE_METHOD).purposive_reason,
                len(run.item_ids),
            )
            continue
        if run is None:
            reason = (
                "the items released to raters match no stored selection run"
                if c.pk in released
                else "no selection run records how the judged items were chosen"
            )
            out[pair] = SampleDesign("", UNRECORDED, all_items, released.get(c.pk, []), {}, {}, reason, len(all_items))
            continue
        out[pair] = _design_of(run, ids, all_items)
    return out


def _design_of(run: SelectionRun, ids: dict[str, int], all_items: list[int]) -> SampleDesign:
    strategy = STRATEGIES.get(run.method)
    kind = strategy.design if strategy else UNRECORDED
    chosen = [ids[i] for i in run.items if i in ids]
    frame_ids = run.details.get("candidate_items")
    frame = [ids[i] for i in frame_ids if i in ids] if frame_ids is not None else chosen
    inclusion = {
        ids[i]: float(p) for i, p in zip(run.items, run.details.get("inclusion", []), strict=False) if i in ids
    }
    strata = {ids[i]: int(h) for i, h in zip(frame_ids or [], run.details.get("strata", []), strict=False) if i in ids}
    everything = len(chosen) == run.candidates  # every candidate chosen: whatever the method, a census of them
    if kind in (WEIGHTED, STRATIFIED) and (not inclusion or (kind == STRATIFIED and not strata)):
        kind = UNIFORM if everything else UNRECORDED  # stored before its chances were kept
    if kind != PURPOSIVE and frame_ids is None and not everything:
        kind = UNRECORDED  # a sample stored before its candidates were kept: what it stands for is unknown
    reason = (
        strategy.purposive_reason
        if kind == PURPOSIVE and strategy
        else "the selection run does not record what its items were drawn from"
        if kind == UNRECORDED
        else ""
    )
    if kind == UNRECORDED:
        frame = all_items
    return SampleDesign(
        run.method, kind, frame, chosen, inclusion if kind != UNIFORM else {}, strata, reason, run.candidates
    )
