"""Iterative DiffUse run live with human raters (docs/diffuse.md#iterative-diffuse-with-human-raters, Algorithm 1 of
the DiffUse paper).

At plan time the Ward linkage and Algorithm 1's split schedule are computed once and stored (which
representatives each split releases does not depend on the labels, only when to stop does), and the
first ``min_n`` representatives are released. Each time an item's required judgments are in (its task
has all its raters' assignments completed), the algorithm is replayed from the stored schedule and the
item labels — no vectors, no tree: if the risk is still above p and the budget allows, the next split's
representatives are released into the rater queue and judgments of items that left the decision set are
flagged superseded (kept, never deleted).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from django.db import transaction
from django.db.models import Count, F, Q

from annotation.models import Assignment, Comparison, Item, Judgment, Study, Task
from selection import embedding, rating_sets
from selection.core import winners
from selection.core.diffuse import Dendrogram, IterativeDiffUse, SplitSchedule
from selection.models import IterativeRun
from selection.services import do_build_selection_context
from selection.strategies import is_live, iterative_parameters

# What only the one-time schedule computation reads (megabytes at 10^5 items): never loaded per completion.
TREE_FIELDS = ("linkage", "leaf_groups", "item_ids")


def do_start(study: Study, comparison: Comparison, items: list[Item]) -> list[Item]:
    """Store the tree of the candidates and return the first representatives to release."""
    if len(items) < 2:
        raise ValueError("iterative DiffUse needs at least two candidate items")
    tree = do_build_selection_context(study, comparison, items).tree
    exact = tree.n == tree.n_items
    groups = [] if exact else [tree.members(leaf).tolist() for leaf in range(tree.n)]
    params = iterative_parameters(study)
    pks = [i.pk for i in items]
    schedule = SplitSchedule.from_tree(tree, params["min_n"], params["budget"]).relabelled(pks)
    run, _ = IterativeRun.objects.update_or_create(
        comparison=comparison,
        defaults={
            "study": study,
            "item_ids": pks,
            "linkage": tree.z.astype("<f8").tobytes(),
            "leaf_groups": groups,
            "schedule": schedule.to_json(),
            "encoder": embedding.encoder_name(),
            "risk": params["risk"],
            "min_n": params["min_n"],
            "budget": params["budget"],
            "outcome": "",
        },
    )
    by_pk = {item.pk: item for item in items}
    return [by_pk[pk] for pk in _algorithm(run).released]


def _schedule(run: IterativeRun) -> SplitSchedule:
    if not run.schedule:  # a run stored before schedules were: computed once from its stored tree, then kept
        by_pk = Item.objects.in_bulk(run.item_ids)
        vectors = do_build_selection_context(run.study, run.comparison, [by_pk[pk] for pk in run.item_ids]).vectors
        groups = [np.array(g, dtype=np.int64) for g in run.leaf_groups] or None
        tree = Dendrogram(vectors, run.linkage_matrix(), groups)
        run.schedule = SplitSchedule.from_tree(tree, run.min_n, run.budget).relabelled(run.item_ids).to_json()
        run.save(update_fields=["schedule"])
    return SplitSchedule.from_json(run.schedule)


def _algorithm(run: IterativeRun) -> IterativeDiffUse:
    return IterativeDiffUse(
        risk=run.risk,
        min_n=run.min_n,
        budget=run.budget,
        ties_count_in_n=iterative_parameters(run.study)["ties_count_in_n"],
        schedule=_schedule(run),
    )


def item_labels(comparison: Comparison) -> dict[int, str]:
    """The oracle of every item whose required judgments are in, by the one item-winner rule
    (``selection.core.winners.item_winner``): each rater's preference is the sign of Eq. 7 over their
    rating set, the item goes to the majority of raters, a level count is a tie."""
    completed = Q(places__assignment__status=Assignment.Status.COMPLETED)
    done_tasks = (
        Task.objects.filter(comparison=comparison)
        .annotate(done=Count("places", filter=completed))
        .filter(done__gte=F("raters_required"))
    )
    judgments = _of_comparison(
        Judgment.objects.analysed().filter(assignment__status=Assignment.Status.COMPLETED),
        assignment__places__task__in=done_tasks,
    ).values_list("pair__item_id", "assignment_id", "choice", "response_set", "probability_a")
    # one rating set per assignment (a rater's place) of an item; the plan's pairs have the pair's first system as A
    by_item = rating_sets.rating_sets(
        [
            (item, assignment, choice, response, probability, False)
            for item, assignment, choice, response, probability in judgments
        ]
    )
    return {item_id: winners.item_winner(list(by_assignment.values())) for item_id, by_assignment in by_item.items()}


def _of_comparison(judgments, **place):
    """The judgments made in an assignment place matching ``place`` (an assignment holds one place per item,
    so the place of a judgment is the one of its pair's item)."""
    return judgments.filter(assignment__places__item_id=F("pair__item_id"), **place)


def replay(run: IterativeRun) -> IterativeDiffUse:
    """The algorithm's state from the stored schedule and the labels available now; the schedule names
    items by primary key, so released and decision items are keys."""
    algorithm = _algorithm(run)
    labels = item_labels(run.comparison)
    while True:
        for pk in algorithm.to_annotate():
            label = labels.get(pk)
            if label is not None:
                algorithm.record(pk, label)
        if not algorithm.advance():
            break
    return algorithm


@dataclasses.dataclass(frozen=True)
class Release:
    """What the live loop decided: the items of one system pair to release now and the seed of their plans, and the
    items whose judgments count (the decision set: the judgments of the others are superseded, kept but not
    counted -- annotation's rating wing flags them)."""

    comparison: Comparison
    items: list[Item]
    seed: str
    counted: frozenset[int]


def do_advance(study: Study, comparison_id: int) -> Release | None:
    """Advance the live loop of one system pair after an assignment with a place in it completed: store the
    outcome, and return the items to release and the decision set (annotation creates the tasks and flags the
    judgments, in the caller's transaction, so selection never writes annotation's rows). Locks the run's row until
    the caller's transaction ends."""
    if not is_live(study.selection_settings.selection_method):
        return None
    with transaction.atomic():
        run = (
            IterativeRun.objects.select_for_update()
            .select_related("study", "comparison")
            .defer(*TREE_FIELDS)
            .filter(comparison_id=comparison_id)
            .first()
        )
        if run is None:
            return None
        algorithm = replay(run)
        wanted = algorithm.released
        have = set(Task.objects.filter(comparison=run.comparison, item_id__in=wanted).values_list("item_id", flat=True))
        new = [pk for pk in wanted if pk not in have]
        by_pk = Item.objects.in_bulk(new) if new else {}
        run.outcome = algorithm.outcome or ""
        run.save(update_fields=["outcome", "updated"])
    return Release(
        run.comparison,
        [by_pk[pk] for pk in new],
        f"{study.seed}:{run.comparison_id}:{algorithm.k}",
        frozenset(algorithm.decision_items()),
    )


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
    algorithm = replay(run)
    status = algorithm.status()
    names = {"a": run.comparison.system_a.name, "b": run.comparison.system_b.name}
    state = {"decided": "decided", "inconclusive": "inconclusive"}.get(algorithm.outcome or "", "undecided")
    return LiveStatus(
        str(run.comparison),
        names.get(status.leader or ""),
        status.k,
        status.n,
        status.ties,
        status.risk,
        run.risk,
        state,
        len(algorithm.labels),
        len(algorithm.released),
        run.budget,
    )


def statuses(study: Study) -> list[LiveStatus]:
    """The live status of every iterative system pair of the study (empty for other methods)."""
    if not is_live(study.selection_settings.selection_method):
        return []
    runs = (
        IterativeRun.objects.filter(study=study)
        .defer(*TREE_FIELDS)
        .select_related("study", "comparison__system_a", "comparison__system_b")
    )
    return [live_status(run) for run in runs]
