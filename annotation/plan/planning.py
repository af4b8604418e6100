"""The comparison plan: which system pairs are compared, which items of each are released as rating tasks
(chosen by the strategy the selection app registers: ``annotation/extensions.py``), rebuilt when the settings
change and grown by the live loop. The only annotation room that talks to item selection."""

from __future__ import annotations

import random

from django.db import connection, models, transaction
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from annotation import extensions, jobs
from annotation.errors import ServiceError
from annotation.exchange.rules import Problem
from annotation.models import (
    Assignment,
    AssignmentTask,
    Battle,
    Comparison,
    Generation,
    Item,
    Job,
    Pair,
    Study,
    System,
    Task,
    TaskPair,
)
from annotation.plan import scheduling

MAX_SYSTEM_PAIRS = 5000  # system pairs one study compares: 100 systems, all pairs (400 systems made 79,800)


def pair_pools(study: Study) -> dict[int, int]:
    """System pair id -> the items its plan holds (its tasks): the pool a pair's planned looks are planned over and
    the most a budget can buy of it."""
    return dict(
        Task.objects.filter(study=study)
        .order_by()
        .values("comparison_id")
        .annotate(n=Count("id"))
        .values_list("comparison_id", "n")
    )


def comparison_systems(study: Study, explicit: list[tuple[int, int]] | None = None) -> list[tuple[System, System]]:
    """The system pairs the study compares, as (A, B), per its pair mode; more than ``MAX_SYSTEM_PAIRS`` is
    refused with what to do instead. Only systems with all their outputs take part (``systems_with_outputs``)."""
    systems = systems_with_outputs(study)
    by_id = {s.pk: s for s in systems}
    if study.pair_mode == Study.PairMode.BASELINE and study.baseline_id:
        if study.baseline_id not in by_id:  # the baseline's outputs are still being generated
            return []
        return [(s, by_id[study.baseline_id]) for s in systems if s.pk != study.baseline_id]
    if study.pair_mode == Study.PairMode.EXPLICIT:
        if explicit is None:  # the pairs ticked before (a system still being generated cannot have been ticked)
            explicit = list(study.comparisons.values_list("system_a_id", "system_b_id"))
        pairs = [(by_id[a], by_id[b]) for a, b in explicit if a in by_id and b in by_id]
    else:
        pairs = [(a, b) for i, a in enumerate(systems) for b in systems[i + 1 :]]
    if len(pairs) > MAX_SYSTEM_PAIRS:
        raise ServiceError(
            f"{len(systems)} systems make {len(pairs):,} system pairs; a study compares at most "
            f"{MAX_SYSTEM_PAIRS:,}. Compare each system with a baseline, or tick the pairs you need."
        )
    return pairs


def systems_with_outputs(study: Study) -> list[System]:
    """The study's systems that can be compared, in the order they were added: every imported one, and a system
    generated from an endpoint (``annotation/generating``) once each item has its samples 0..K-1 (the one definition
    of a generated system being complete: one output per item and sample, a database constraint, so counting those
    below K is exact); one query. An arena's systems are all compared from the start (its items are its battles'
    prompts, each answered by two of them)."""
    if study.is_arena:
        return list(study.systems.order_by("id"))
    n_items = study.items.count()
    wanted = Count("generations", filter=Q(generations__sample_index__lt=F("endpoint__samples")))
    return list(
        study.systems.annotate(n=wanted)
        .filter(Q(endpoint__isnull=True) | Q(n__gte=F("endpoint__samples") * n_items))
        .order_by("id")
    )  # a grouped query has no default order: the pairs' A and B must not swap


def do_limit_system_pairs(study: Study) -> Problem | None:
    """A new study whose systems would make more than ``MAX_SYSTEM_PAIRS`` pairs compares each with the first
    system instead (a warning says so; the settings page changes it)."""
    systems = list(study.systems.order_by("id")[:1])
    n = study.systems.count()
    if study.pair_mode != Study.PairMode.ALL or n * (n - 1) // 2 <= MAX_SYSTEM_PAIRS or not systems:
        return None
    Study.objects.filter(pk=study.pk).update(pair_mode=Study.PairMode.BASELINE, baseline=systems[0])
    study.pair_mode, study.baseline = Study.PairMode.BASELINE, systems[0]
    return Problem(
        None,
        "systems",
        f"{n} systems would make {n * (n - 1) // 2:,} system pairs (at most "
        f"{MAX_SYSTEM_PAIRS:,}): each is compared with {systems[0].name} instead; change "
        "it on the settings page",
    )


@transaction.atomic
def do_rebuild_plan(study: Study, explicit: list[tuple[int, int]] | None = None) -> int:
    """(Re)build the study's comparisons and tasks from its settings; returns the number of tasks.

    Which items each system pair gets comes from the study's selection strategy; the sampled output
    pairs and display orders come from ``annotation.plan.scheduling``. Refuses once raters have started.
    """
    lock_plan(study, exclusive=True)
    if study.has_started():
        raise ServiceError("Raters have already started on this study, so its comparison plan is frozen.")
    releases, rng = do_plan_releases(study, explicit)
    return len(_release_tasks(study, releases, rng))


def do_plan_releases(
    study: Study, explicit: list[tuple[int, int]] | None = None
) -> tuple[list[tuple[Item, Comparison]], random.Random]:
    """The plan's (item, system pair) units in release order, and the random generator that draws their pairs
    next: the study's comparisons are made to match its settings (in the caller's transaction), its tasks are
    cleared, and each system pair's selection runs on its candidates. An arena's plan releases nothing: its tasks are
    its battles' (``annotation/arena/battles.py``) and are kept; a system pair that has battles is never dropped."""
    pairs_wanted = comparison_systems(study, explicit)
    if not study.is_arena:
        Task.objects.filter(study=study).delete()
    # Keep the system pairs that stay (their separability results hang off them); drop the others.
    existing = {(c.system_a_id, c.system_b_id): c for c in study.comparisons.all()}
    comparisons = [
        existing.pop((a.pk, b.pk))
        if (a.pk, b.pk) in existing
        else Comparison.objects.create(study=study, system_a=a, system_b=b)
        for a, b in pairs_wanted
    ]
    for dropped in existing.values():
        if study.is_arena and Battle.objects.filter(comparison=dropped).exists():
            raise ServiceError(
                f"This arena has battles of {dropped}, so its system pairs can no longer change (the battles, "
                "their votes and their samples hang off them)."
            )
        dropped.delete()
    if study.is_arena:
        return [], random.Random(study.seed)
    comparisons.sort(key=lambda c: c.pk)  # the order study.comparisons has, so `select` sees the same candidates
    items = list(study.items.all())
    rng = random.Random(study.seed)
    per_comparison: dict[int, list[scheduling.Unit]] = {}
    position_of = {item.pk: i for i, item in enumerate(items)}
    chooser = extensions.item_chooser()
    for c, (comparison, candidates) in enumerate(
        zip(comparisons, plan_candidates(study, comparisons, rng, items), strict=True)
    ):
        try:
            chosen = chooser.do_choose(study, comparison, candidates)
        except ValueError as exc:
            raise ServiceError(f"{comparison}: {exc}") from None
        per_comparison[c] = [scheduling.Unit(position_of[item.pk], c) for item in chosen]
    return [(items[u.item], comparisons[u.comparison]) for u in scheduling.interleave(per_comparison)], rng


def plan_candidates(
    study: Study, comparisons: list[Comparison], rng: random.Random, items: list[Item] | None = None
) -> list[list[Item]]:
    """The candidate items of each system pair under the study's comparison schedule (before selection),
    drawn with ``rng`` (the plan's, seeded by the study's seed)."""
    items = list(study.items.all()) if items is None else items
    units = scheduling.candidate_units(len(items), len(comparisons), study.scheduling, rng)
    return [[items[u.item] for u in units if u.comparison == c] for c in range(len(comparisons))]


def do_advance_live_selection(assignment: Assignment) -> list:
    """After an assignment completed, let a live selection loop (iterative DiffUse) react: release the next
    items it asks for, in the caller's transaction (``annotation/rating/recording.py``, which also flags the
    judgments the loop no longer counts). Returns the loop's decisions (``extensions.ItemChooser.do_advance``)."""
    releases = []
    comparisons = sorted(set(assignment.places.values_list("task__comparison_id", flat=True)))
    for comparison_id in comparisons:  # each system pair the assignment had a place in
        release = extensions.item_chooser().do_advance(assignment.study, comparison_id)
        if release is None:
            continue
        releases.append(release)
        if release.items:
            _release_tasks(
                assignment.study, [(item, release.comparison) for item in release.items], random.Random(release.seed)
            )
    return releases


def do_close_decided_pairs(assignment: Assignment) -> None:
    """After an assignment completed: the system pairs the study no longer buys (decided, or not needed by the
    ranking) get no new places (``Comparison.closed``; places already held are honoured and their answers counted),
    and a pair the ranking needs again is opened."""
    change = extensions.item_chooser().do_decide(assignment.study, assignment)
    if change is None:
        return
    _close_and_reopen(*change)


def _close_and_reopen(close, reopen) -> None:
    """Close these system pairs and open those (one update each, only when there are any)."""
    if close:
        Comparison.objects.filter(pk__in=close, closed=False).update(closed=True)
    if reopen:
        Comparison.objects.filter(pk__in=reopen, closed=True).update(closed=False)


def _set_closed(study: Study, closed: set[int]) -> None:
    """Make exactly these system pairs of the study closed."""
    now = dict(study.comparisons.values_list("pk", "closed"))
    _close_and_reopen(
        [pk for pk, is_closed in now.items() if pk in closed and not is_closed],
        [pk for pk, is_closed in now.items() if pk not in closed and is_closed],
    )


def do_reconsider_closed_pairs(study: Study) -> None:
    """After the settings changed (the study starts or stops buying decided pairs): which pairs are closed, and
    whether raters finish started items first."""
    chooser = extensions.item_chooser()
    fill = chooser.fills_items_first(study)
    if study.fill_items_first != fill:
        Study.objects.filter(pk=study.pk).update(fill_items_first=fill)
        study.fill_items_first = fill
    _set_closed(study, chooser.do_reconsider_decisions(study))
    first = chooser.first_raters(study)
    if first == study.raters_per_item:  # no longer one rater first: every task asks for all its raters again
        Task.objects.filter(study=study, raters_required__lt=first).update(raters_required=first)


def do_recount_decisions(study: Study, item_ids: list[int]) -> None:
    """After the data manager excluded items or included them again (``Item.excluded``): the decisions of their
    system pairs decided again over the judgments that count now, and which pairs are closed brought in line."""
    _set_closed(study, extensions.item_chooser().do_recount_decisions(study, item_ids))


RELEASE_CHUNK = 2000  # units per batch: every query's parameters stay far below PostgreSQL's 65,535


def _release_tasks(study: Study, releases: list[tuple[Item, Comparison]], rng: random.Random) -> list[Task]:
    """Create the rating tasks of (item, system pair) units, after the study's existing tasks: N sampled
    output pairs each, with base display orders. Units that already have a task are skipped. Works in batches
    of ``RELEASE_CHUNK`` units (bulk inserts; the same random draws in the same order as one by one)."""
    if not releases:
        return []
    position = (Task.objects.filter(study=study).aggregate(m=models.Max("position"))["m"] or -1) + 1
    created: list[Task] = []
    for start in range(0, len(releases), RELEASE_CHUNK):
        tasks, position = do_release_chunk(study, releases[start : start + RELEASE_CHUNK], rng, position)
        created += tasks
    return created


def do_release_chunk(
    study: Study, releases: list[tuple[Item, Comparison]], rng: random.Random, position: int
) -> tuple[list[Task], int]:
    items = {item.pk for item, _ in releases}
    counts: dict[tuple[int, int], int] = {
        (row["item_id"], row["system_id"]): row["k"]
        for row in Generation.objects.filter(item_id__in=items).values("item_id", "system_id").annotate(k=Count("id"))
    }
    generations = {
        (g.item_id, g.system_id, g.sample_index): g.pk
        for g in Generation.objects.filter(item_id__in=items).only("id", "item_id", "system_id", "sample_index")
    }
    pair_ids = {
        (a, b): pk
        for pk, a, b in Pair.objects.filter(item_id__in=items).values_list("pk", "generation_a_id", "generation_b_id")
    }
    have = set(Task.objects.filter(study=study, item_id__in=items).values_list("item_id", "comparison_id"))
    # a study whose answers cover several outputs (a ranking, best and worst): one task per item, its first release,
    # holding one place -- the screen that shows the item's outputs (annotation/rating/rankings.screen)
    ranked_items = {item for item, _ in have} if study.ranks else set()
    per_task = study.places_per_task
    raters = extensions.item_chooser().first_raters(study)
    tasks: list[Task] = []
    wanted: list[list[tuple[int, int, int, bool]]] = []  # per task: (item, generation a, generation b, a first)
    for item, comparison in releases:
        if (item.pk, comparison.pk) in have or item.pk in ranked_items:
            continue
        have.add((item.pk, comparison.pk))
        if study.ranks:
            ranked_items.add(item.pk)
        plan = scheduling.plan_task(
            scheduling.Unit(0, 0),
            counts[(item.pk, comparison.system_a_id)],
            counts[(item.pk, comparison.system_b_id)],
            per_task,
            rng,
            study.sample_pairing,
        )
        tasks.append(Task(study=study, item=item, comparison=comparison, raters_required=raters, position=position))
        position += 1
        wanted.append(
            [
                (
                    item.pk,
                    generations[(item.pk, comparison.system_a_id, ja)],
                    generations[(item.pk, comparison.system_b_id, jb)],
                    a_first,
                )
                for (ja, jb), a_first in zip(plan.pairs, plan.a_first, strict=True)
            ]
        )
    Task.objects.bulk_create(tasks)
    missing = {(ga, gb): item for row in wanted for item, ga, gb, _ in row if (ga, gb) not in pair_ids}
    for pair in Pair.objects.bulk_create(
        Pair(item_id=item, generation_a_id=ga, generation_b_id=gb) for (ga, gb), item in missing.items()
    ):
        pair_ids[(pair.generation_a_id, pair.generation_b_id)] = pair.pk
    TaskPair.objects.bulk_create(
        TaskPair(task=task, pair_id=pair_ids[(ga, gb)], position=index, a_first=a_first)
        for task, row in zip(tasks, wanted, strict=True)
        for index, (_, ga, gb, a_first) in enumerate(row)
    )
    return tasks, position


def lock_plan(study: Study, *, exclusive: bool) -> None:
    """Order plan rebuilds against assignment starts (inside the caller's transaction). PostgreSQL: a rebuild
    holds the study row FOR UPDATE, a start FOR SHARE, so starts never wait for each other, a start waits for
    a rebuild in progress (and then sees the new plan), and a rebuild waits for starts in progress (and then
    sees that raters have started). SQLite's IMMEDIATE transactions already run one writer at a time."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {Study._meta.db_table} WHERE id = %s FOR {'UPDATE' if exclusive else 'SHARE'}", [study.pk]
        )


def plan_needs_worker(study: Study) -> bool:
    """Whether building the study's plan would embed outputs that are not embedded yet (tens of seconds for a few
    thousand outputs: never inside a request, and never while holding the database's write lock)."""
    return extensions.item_chooser().needs_worker(study)


def do_queue_plan(study: Study):
    """Build the plan in the background: embed the outputs first (cached, outside any transaction), then rebuild
    the plan in one short transaction (``plan_job``)."""
    return jobs.start(study, PLAN_KIND, total=2, message="Building the plan: embedding the outputs first")


def do_set_explicit_pairs(study: Study, explicit: list[tuple[int, int]]) -> None:
    """Make the study's comparisons the ticked pairs (explicit pair mode reads them back when it plans)."""
    wanted = set(explicit)
    existing = {(c.system_a_id, c.system_b_id): c for c in study.comparisons.all()}
    for key, comparison in existing.items():
        if key not in wanted:
            comparison.delete()
    for a, b in explicit:
        if (a, b) not in existing:
            Comparison.objects.create(study=study, system_a_id=a, system_b_id=b)


def do_recount_places(task_ids) -> None:
    """Set Task.taken from the assignments that hold a place (repairs a counter that fell out of step,
    e.g. after assignments were written by hand)."""
    held = (
        AssignmentTask.objects.filter(task_id=OuterRef("pk"), slot__isnull=False)
        .order_by()
        .values("task_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    Task.objects.filter(pk__in=task_ids).update(taken=Coalesce(Subquery(held), 0))


PLAN_KIND = "plan"


def plan_job(job: Job, progress: jobs.Progress) -> jobs.Outcome:
    """A study's plan, built by the worker: the slow preparation first (the outputs embedded, outside any
    transaction, cached), then the plan rebuilt from the study's current settings in one short transaction. A newer
    plan job of the same study makes this one needless."""
    study = job.study
    if Job.objects.filter(study=study, kind=PLAN_KIND, pk__gt=job.pk).exists():
        return jobs.Outcome("A newer change of the settings builds the plan.")
    try:
        extensions.item_chooser().do_prepare(study, lambda done, total: progress(done, total + 1))
        progress.say("Building the plan: choosing the items")
        tasks = do_rebuild_plan(study)
    except Exception as exc:  # the study page says what went wrong; saving the settings again retries
        if jobs.is_outage(exc):
            raise  # the database was unreachable: the job waits and builds the plan again
        raise jobs.JobFailed(f"The plan could not be built: {exc}") from exc
    return jobs.Outcome(f"Plan built: {tasks} rating tasks.", complete=True)
