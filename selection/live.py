"""Iterative DiffUse run live with human raters (SPEC §4, Algorithm 1 of the DiffUse paper).

At plan time the first ``min_n`` representatives are released; the Ward linkage is stored. Each time
an item's required judgments are in (its task has all its raters' assignments completed), the
algorithm is replayed from the stored tree and the judgments: if the risk is still above p and the
budget allows, the next split's representatives are released into the rater queue and judgments of
items that left the decision set are flagged superseded (kept, never deleted).
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
from django.db import transaction
from django.db.models import Count, F, Q

from analytics.core import consistency
from annotation.models import Assignment, Comparison, Item, Judgment, Study, Task
from selection import embedding
from selection.core.diffuse import Dendrogram, IterativeDiffUse
from selection.models import IterativeRun
from selection.services import selection_context

DEFAULT_BUDGET = 200


def start(study: Study, comparison: Comparison, items: list[Item]) -> list[Item]:
    """Store the tree of the candidates and return the first representatives to release."""
    if len(items) < 2:
        raise ValueError("iterative DiffUse needs at least two candidate items")
    context = selection_context(study, comparison, items)
    tree = context.tree
    exact = tree.n == tree.n_items
    groups = [] if exact else [tree.members(leaf).tolist() for leaf in range(tree.n)]
    run, _ = IterativeRun.objects.update_or_create(comparison=comparison, defaults={
        "study": study, "item_ids": [i.pk for i in items], "linkage": tree.z.astype("<f8").tobytes(),
        "leaf_groups": groups,
        "encoder": embedding.encoder_name(), "risk": study.risk, "min_n": study.min_n,
        "budget": study.budget or DEFAULT_BUDGET, "outcome": "",
    })
    algorithm = _algorithm(run, context.vectors)
    return [items[i] for i in algorithm.released]


def _algorithm(run: IterativeRun, vectors: np.ndarray) -> IterativeDiffUse:
    groups = [np.array(g, dtype=np.int64) for g in run.leaf_groups] or None
    tree = Dendrogram(vectors, run.linkage_matrix(), groups)
    return IterativeDiffUse(tree, risk=run.risk, min_n=run.min_n, budget=run.budget,
                            ties_count_in_n=run.study.stopping_ties_in_n)


def item_labels(comparison: Comparison) -> dict[int, str]:
    """The oracle of every item whose required judgments are in, by the one item-winner rule
    (``analytics.core.consistency.item_winner``): each rater's preference is the sign of Eq. 7 over their
    rating set, the item goes to the majority of raters, a level count is a tie."""
    done_tasks = (Task.objects.filter(comparison=comparison)
                  .annotate(done=Count("assignments", filter=Q(assignments__status=Assignment.Status.COMPLETED)))
                  .filter(done__gte=F("raters_required")))
    by_assignment: dict[int, tuple[int, list[int]]] = {}
    for item_id, assignment_id, choice, response, probability in (
        Judgment.objects.filter(assignment__task__in=done_tasks, assignment__status=Assignment.Status.COMPLETED)
        .values_list("pair__item_id", "assignment_id", "choice", "response_set", "probability_a")
    ):
        entry = by_assignment.setdefault(assignment_id, (item_id, []))
        answer = consistency.effective_choice(choice, response, probability)
        if answer is not None:
            entry[1].append(consistency.RATING[answer])
    rating_sets: dict[int, list[list[int]]] = {}
    for item_id, ratings in by_assignment.values():
        if ratings:
            rating_sets.setdefault(item_id, []).append(ratings)
    return {item_id: consistency.item_winner(sets) for item_id, sets in rating_sets.items()}


def replay(run: IterativeRun) -> tuple[IterativeDiffUse, list[Item]]:
    """Rebuild the algorithm's state from the stored tree and the labels available now."""
    by_pk = Item.objects.in_bulk(run.item_ids)
    items = [by_pk[pk] for pk in run.item_ids]
    vectors = selection_context(run.study, run.comparison, items).vectors
    algorithm = _algorithm(run, vectors)
    index = {item.pk: i for i, item in enumerate(items)}
    labels = {index[pk]: label for pk, label in item_labels(run.comparison).items() if pk in index}
    while True:
        for i in algorithm.to_annotate():
            if i in labels:
                algorithm.record(i, labels[i])
        if not algorithm.advance():
            break
    return algorithm, items


def on_assignment_completed(assignment: Assignment) -> list[Task]:
    """Advance the live loop of the assignment's system pair; returns the tasks newly released."""
    from annotation.services import release_tasks

    study = assignment.study
    if study.selection_method != "diffuse-iterative":
        return []
    with transaction.atomic():
        run = (IterativeRun.objects.select_for_update().select_related("study", "comparison")
               .filter(comparison_id=assignment.task.comparison_id).first())
        if run is None:
            return []
        algorithm, items = replay(run)
        rng = random.Random(f"{study.seed}:{run.comparison_id}:{algorithm.k}")
        released = release_tasks(study, [(items[i], run.comparison) for i in algorithm.released], rng)
        current = {items[i].pk for i in algorithm.decision_items()}
        judgments = Judgment.objects.filter(study=study, assignment__task__comparison=run.comparison)
        judgments.exclude(pair__item_id__in=current).filter(superseded=False).update(superseded=True)
        judgments.filter(pair__item_id__in=current, superseded=True).update(superseded=False)
        run.outcome = algorithm.outcome or ""
        run.save(update_fields=["outcome", "updated"])
    return released


@dataclasses.dataclass(frozen=True)
class LiveStatus:
    comparison: str
    leader: str | None
    wins_leader: int
    n: int
    ties: int
    risk: float
    threshold: float
    state: str  # "decided" | "undecided" | "inconclusive"
    labelled: int
    released: int
    budget: int


def live_status(run: IterativeRun) -> LiveStatus:
    algorithm, _ = replay(run)
    status = algorithm.status()
    names = {"a": run.comparison.system_a.name, "b": run.comparison.system_b.name}
    state = {"decided": "decided", "inconclusive": "inconclusive"}.get(algorithm.outcome or "", "undecided")
    return LiveStatus(str(run.comparison), names.get(status.leader), status.k, status.n, status.ties, status.risk,
                      run.risk, state, len(algorithm.labels), len(algorithm.released), run.budget)


def statuses(study: Study) -> list[LiveStatus]:
    """The live status of every iterative system pair of the study (empty for other methods)."""
    if study.selection_method != "diffuse-iterative":
        return []
    runs = IterativeRun.objects.filter(study=study).select_related("study", "comparison__system_a",
                                                                   "comparison__system_b")
    return [live_status(run) for run in runs]
