"""How a study is going: progress per system pair and per rater, with the signs of careless rating."""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from typing import cast

from django.db.models import Count, Q, QuerySet

from annotation.models import (
    Assignment,
    AssignmentTask,
    Judgment,
    Rater,
    Skip,
    Study,
    Task,
)
from annotation.rating import pace


@dataclasses.dataclass
class ComparisonProgress:
    """One system pair's human work against the plan; imported human judgments and judge verdicts apart."""

    label: str
    tasks: int
    target: int
    judgments: int
    places_done: int  # item places taken in finished assignments (an assignment bundles several items)
    imported_human: int = 0
    judge: int = 0

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.judgments / self.target)) if self.target else 0


def study_progress(study: Study) -> list[ComparisonProgress]:
    """Per system pair: the human judgments made in the study's assignments (the plan's work; a revised
    answer counts once) against the plan's target, and apart from them imported human judgments and judge
    verdicts, which never fill the plan. A constant number of queries."""
    comparisons = list(study.comparisons.select_related("system_a", "system_b"))
    tasks: dict[int, int] = {}
    targets: dict[int, int] = {}
    for comparison_id, n_pairs, raters in (
        Task.objects.filter(study=study)
        .annotate(p=Count("task_pairs"))
        .values_list("comparison_id", "p", "raters_required")
    ):
        tasks[comparison_id] = tasks.get(comparison_id, 0) + 1
        targets[comparison_id] = targets.get(comparison_id, 0) + n_pairs * raters
    done = dict(  # completed places (an assignment bundles several)
        AssignmentTask.objects.filter(assignment__study=study, assignment__status=Assignment.Status.COMPLETED)
        .values_list("task__comparison_id")
        .annotate(n=Count("id"))
    )
    counts: dict[tuple[frozenset[int], str], int] = defaultdict(int)
    human = Q(rater__kind=Rater.Kind.HUMAN)
    for a, b, planned, imported, judge in (
        Judgment.objects.filter(study=study, revised=False)
        .values_list("pair__generation_a__system_id", "pair__generation_b__system_id")
        .annotate(
            planned=Count("id", filter=human & Q(assignment__isnull=False)),
            imported=Count("id", filter=human & Q(assignment__isnull=True)),
            judge=Count("id", filter=Q(rater__kind=Rater.Kind.JUDGE)),
        )
        .order_by()
    ):
        for name, n in (("planned", planned), ("imported", imported), ("judge", judge)):
            counts[(frozenset((a, b)), name)] += n
    return [
        ComparisonProgress(
            label=f"{c.system_a.name} vs {c.system_b.name}",
            tasks=tasks.get(c.pk, 0),
            target=targets.get(c.pk, 0),
            judgments=counts[(frozenset((c.system_a_id, c.system_b_id)), "planned")],
            places_done=done.get(c.pk, 0),
            imported_human=counts[(frozenset((c.system_a_id, c.system_b_id)), "imported")],
            judge=counts[(frozenset((c.system_a_id, c.system_b_id)), "judge")],
        )
        for c in comparisons
    ]


FAST_SECONDS, LONG_OUTPUT_WORDS = pace.FAST_SECONDS, pace.LONG_OUTPUT_WORDS  # the one rule: annotation/rating/pace.py


def _by_rater(rows: QuerySet) -> dict[int, int]:
    """The number of ``rows`` (of a model with a ``rater`` key) of each rater that has any, in one query."""
    return dict(rows.order_by().values_list("rater").annotate(n=Count("*")))


def rater_progress(study: Study) -> list[Rater]:
    """Raters with their completed / active assignments and judgment counts (a replaced answer counted once, as the
    report counts it), and ``median_long_seconds``:
    the median server-measured time per pair on pairs with an output over ``LONG_OUTPUT_WORDS`` words (None
    without such a pair); ``too_fast`` flags a median under ``FAST_SECONDS``."""
    raters: list[Rater] = list(study.raters.order_by("id"))
    # each count an aggregate of its own table over the study, by rater: counted in one query, the rows of a rater's
    # assignments × judgments × skips were joined; a subquery per rater read each judgment through the rater index
    # (1.6 s at 10⁶ judgments on PostgreSQL, against one scan)
    assignments = Assignment.objects.filter(study=study)
    completed = _by_rater(assignments.filter(status=Assignment.Status.COMPLETED))
    active = _by_rater(assignments.filter(status=Assignment.Status.ACTIVE))
    judged = _by_rater(Judgment.objects.filter(study=study, revised=False))  # a changed answer once
    skipped = _by_rater(Skip.objects.filter(rater__study=study))
    for rater in raters:
        rater.completed, rater.active = completed.get(rater.pk, 0), active.get(rater.pk, 0)
        rater.n_judgments, rater.n_skipped = judged.get(rater.pk, 0), skipped.get(rater.pk, 0)
    times: dict[int, list[int]] = {}
    long_pairs = Q(pair__generation_a__n_words__gt=LONG_OUTPUT_WORDS) | Q(
        pair__generation_b__n_words__gt=LONG_OUTPUT_WORDS
    )
    for rater_id, ms in Judgment.objects.filter(long_pairs, study=study, time_on_task_ms__isnull=False).values_list(
        "rater_id", "time_on_task_ms"
    ):
        times.setdefault(rater_id, []).append(cast(int, ms))  # time_on_task_ms__isnull=False: an int
    for rater in raters:
        spent = times.get(rater.pk)
        rater.median_long_seconds = statistics.median(spent) / 1000 if spent else None
        rater.too_fast = pace.implausibly_fast([ms / 1000 for ms in spent or []])
    return raters
