"""How selection reads judgments: the one reader from judgments to rating sets (``rating_sets``) -- used by the plan's
pair decisions, the live DiffUse loop (``selection/live.py``), the budget planner and the study report
(``analytics/report/``) -- and the reads of a system pair's judgments built on it.

A rating set is one rater's ratings of one item for one system pair (docs/separability.md#consistency), in the
pair's coordinates (``winners.rating_for``: -1 its first system preferred, 0 no preference, +1 its second).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TypeVar

import numpy as np
from django.db.models import Count

from annotation import elicitation
from annotation.compiled import CompiledKeysQuery, CompiledQuery
from annotation.models import AssignmentTask, Comparison, Judgment, Rater, Study, Task
from selection.core import winners

ItemKey = TypeVar("ItemKey", bound=Hashable)
RaterKey = TypeVar("RaterKey", bound=Hashable)


def rating_sets(
    judgments: Iterable[tuple[ItemKey, RaterKey, str | None, list[str] | None, float | None, bool]],
) -> dict[ItemKey, dict[RaterKey, list[int]]]:
    """item -> rater -> their ratings, from ``judgments`` in the order they arrived, each (item, rater, choice,
    response set, probability of A, flipped): its stored answer as ``elicitation.effective_choice`` reads it in any
    elicitation mode, rated from the pair's order (``flipped``: the judgment's A is the pair's second system). A
    judgment without an answer is left out. Items come in the order their last judgment arrived, raters in the order
    their first one did."""
    by_item: dict[ItemKey, dict[RaterKey, list[int]]] = {}
    for item, rater, choice, response_set, probability_a, flipped in judgments:
        answer = elicitation.effective_choice(choice, response_set, probability_a)
        if answer is None:
            continue
        by_rater = by_item.pop(item, {})  # re-inserted: the item moves to the end of the arrival order
        by_rater.setdefault(rater, []).append(winners.rating_for(answer, flipped))
        by_item[item] = by_rater
    return by_item


def pair_judgments(comparison: Comparison, **where):
    """The current judgments of a system pair (either display order, either system as A), narrowed by ``where``."""
    systems = [comparison.system_a_id, comparison.system_b_id]
    return Judgment.objects.counted().filter(
        study_id=comparison.study_id,
        pair__generation_a__system_id__in=systems,
        pair__generation_b__system_id__in=systems,
        **where,
    )


JUDGMENT_ROW = ("pair__item_id", "rater_id", "pair__generation_a__system_id", "choice", "response_set", "probability_a")


def ratings_by_item(comparison: Comparison, judgments) -> tuple[dict[int, dict[int, list[int]]], int]:
    """item -> rater -> their ratings for the pair's first system (-1 a win, in ``winners``' coordinates), items in
    the order their last judgment arrived; and how many judgments had an answer."""
    return ratings_from_rows(comparison, judgments.order_by("created", "id").values_list(*JUDGMENT_ROW))


def ratings_from_rows(comparison: Comparison, rows) -> tuple[dict[int, dict[int, list[int]]], int]:
    """``ratings_by_item`` from rows of ``JUDGMENT_ROW`` already read, in the order the judgments arrived."""
    first = comparison.system_a_id
    by_item = rating_sets((item, rater, c, s, p, system_a != first) for item, rater, system_a, c, s, p in rows)
    return by_item, sum(len(ratings) for by_rater in by_item.values() for ratings in by_rater.values())


def pair_item_scores(comparison: Comparison, raters: int | None = None) -> tuple[list[tuple[int, float]], int]:
    """A system pair's item scores for its first system (``winners.item_score``) from the human judgments collected
    in the study's assignments (the plan's work; imported judgments never fill the plan), one per item whose every
    planned rater has answered (its score no longer changes), in the order the last of them arrived -- what the
    pair's anytime-valid decision observes -- as (item id, score); and the judgments read. ``raters``: the raters
    an item waits for (default: the study's raters per item; 1 while one rater per item comes first, the score then
    being that rater's). The decision step after a completed assignment reads only its items
    (``assignment_reads``)."""
    judgments = pair_judgments(
        comparison, assignment__isnull=False, rater__kind=Rater.Kind.HUMAN, rater__screened_out=False
    )
    by_item, read = ratings_by_item(comparison, judgments)
    held = dict(
        Task.objects.filter(comparison=comparison, item_id__in=list(by_item))
        .order_by()
        .annotate(pairs=Count("task_pairs"))
        .values_list("item_id", "pairs")
    )
    return whole_item_scores(comparison.study, by_item, held, raters), read


def whole_item_scores(
    study: Study, by_item: dict[int, dict[int, list[int]]], held: Mapping[int, int], raters: int | None = None
) -> list[tuple[int, float]]:
    """The scores of the items whose planned raters are all in: every one of ``raters`` (default: the study's
    raters per item) has answered every pair of the item they were shown -- ``held[item]``, the output pairs the
    item's task holds (one when each system has one output per item, whatever the study's pairs per task says) --
    (a rater part-way through could still revise or add answers, and the score would change after it was
    observed). An item without a task (``held`` lacks it) is not the plan's and is not scored."""
    wanted = study.raters_per_item if raters is None else raters
    scored = []
    for item_id, by_rater in by_item.items():
        pairs = held.get(item_id, 0)
        if not pairs:
            continue
        whole = [v for v in by_rater.values() if len(v) >= pairs]
        if len(whole) >= wanted:  # the first ``wanted`` raters to finish it (one, while one rater comes first)
            scored.append((item_id, winners.item_score(whole[:wanted])))
    return scored


@dataclasses.dataclass
class PairReads:
    """One system pair of a completed assignment: its systems, the items the assignment held of it, the current
    plan judgments of those items by counted raters (rows of ``JUDGMENT_ROW``, in arrival order) and how many of the
    assignment's own current judgments are of the pair."""

    comparison: Comparison
    items: set[int]
    rows: list[tuple]
    judged: int
    held: dict[int, int] = dataclasses.field(default_factory=dict)  # item -> the output pairs its task holds


# The decision step after a completed assignment runs inside the rater's submit: its reads are compiled once per
# thread (annotation/compiled.py), the ORM's building and compiling of each query cost more than PostgreSQL's answer.
_PLACES = CompiledQuery(
    lambda assignment: (
        AssignmentTask.objects.filter(assignment_id=assignment)
        .order_by()
        .values(
            "task__comparison_id",
            "item_id",
            "task__comparison__system_a_id",
            "task__comparison__system_b_id",
            "task__task_pairs__pair_id",
        )
    ),
    assignment=int,
)
_PAIR_JUDGMENTS = CompiledKeysQuery(
    lambda pairs: (
        Judgment.objects.counted()
        .filter(pair_id__in=pairs, assignment__isnull=False)
        .order_by("created", "id")
        .values("pair_id", "assignment_id", *JUDGMENT_ROW, "rater__kind", "rater__screened_out")
    )
)


def assignment_reads(
    assignment, study: Study, before_judgments: Callable[[list[int]], object] | None = None
) -> dict[int, PairReads]:
    """What the decision step needs after an assignment completed, per system pair it held, in two queries whatever
    the study's size: the assignment's places with their pairs' systems and their tasks' output pairs; the current
    plan judgments of those output pairs (by the judgments' pair index: every rater's, as an item's score needs them
    all) with their raters' kind and standing, which are read, not filtered on (a filter on the raters lets a planner
    start from the study's raters: PostgreSQL without fresh statistics did, 40 ms at 10,000 raters).
    ``before_judgments(comparison ids)`` runs between the two (the decision step locks the pairs' decisions there, so
    that an exclusion committed meanwhile is either seen by the read or waits for the step: ``do_recount_decisions``
    locks the same rows)."""
    out: dict[int, PairReads] = {}
    by_pair: dict[int, int] = {}
    for place in _PLACES.rows(assignment=assignment.pk):
        comparison_id = place["task__comparison_id"]
        if comparison_id not in out:
            out[comparison_id] = PairReads(
                Comparison(
                    pk=comparison_id,
                    study=study,
                    system_a_id=place["task__comparison__system_a_id"],
                    system_b_id=place["task__comparison__system_b_id"],
                ),
                set(),
                [],
                0,
            )
        out[comparison_id].items.add(place["item_id"])
        if place["task__task_pairs__pair_id"] is not None:
            by_pair[place["task__task_pairs__pair_id"]] = comparison_id
            held = out[comparison_id].held
            held[place["item_id"]] = held.get(place["item_id"], 0) + 1
    if before_judgments is not None:
        before_judgments(sorted(out))
    for row in _PAIR_JUDGMENTS.rows(list(by_pair)):
        reads = out[by_pair[row["pair_id"]]]
        if row["assignment_id"] == assignment.pk:
            reads.judged += 1
        if row["rater__kind"] == Rater.Kind.HUMAN and not row["rater__screened_out"]:
            reads.rows.append(tuple(row[name] for name in JUDGMENT_ROW))
    return out


def pilot_outcomes(comparison: Comparison) -> tuple[str, list[list[float]]]:
    """What a budget plan learns from (``selection.core.budget.pilot_of``): per item, each rater's mean outcome for
    the pair's first system -- from the pair's human judgments (collected or imported), else from its LLM judges'
    verdicts as a prior, else nothing. Returns the source ("humans", "judges", "none") and the outcomes."""
    for source, kind in (("humans", Rater.Kind.HUMAN), ("judges", Rater.Kind.JUDGE)):
        by_item, _ = ratings_by_item(comparison, pair_judgments(comparison, rater__kind=kind))
        if by_item:
            return source, [
                [float(np.mean(winners.score_for_a(v))) for v in by_rater.values()] for by_rater in by_item.values()
            ]
    return "none", []
