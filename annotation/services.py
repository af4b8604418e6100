"""State changes of the annotation app. Views, commands and the API all call these (one ``do_*``
or ``record_*`` function per change), so the rules live in one place."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import random
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation import elicitation, formats, orientation, scheduling, study_settings
from annotation.compiled import CompiledUpdate
from annotation.formats import FormatError, Problem
from annotation.models import (
    DEFAULT_SECONDS_PER_PAIR,
    Assignment,
    AssignmentPair,
    AssignmentTask,
    Comparison,
    Generation,
    GoldAnswer,
    Item,
    Judgment,
    JudgmentUpload,
    Pair,
    Rater,
    Skip,
    Study,
    StudyUpload,
    System,
    Task,
    TaskPair,
    text_hash,
    word_count,
)
from selection import live as selection_live
from selection import services as selection_services
from selection.strategies import is_live, needs_embeddings, strategy_parameters

# Fields of Study that shape the comparison plan; frozen once raters have started.
PLAN_FIELDS = ("pairs_per_assignment", "sample_pairing", "raters_per_item", "pair_mode", "baseline", "scheduling",
               "selection_method", "budget", "seed", "separability_metric", "separability_threshold", "risk", "min_n",
               "stopping_ties_in_n", "sep_threshold_t", "sep_alpha", "sep_beta")
# What an answer is cannot change once raters have answered: forced choices and response sets would mix.
ANSWER_FIELDS = ("elicitation",)
FROZEN_AFTER_START = (*PLAN_FIELDS, *ANSWER_FIELDS)




class ServiceError(Exception):
    """An error a user caused; the message is shown to them as it is."""


class AllocationBusy(ServiceError):
    pass


class RaterScreenedOut(ServiceError):
    """The rater failed the study's attention checks and gets no more work."""


class RaterLimitReached(ServiceError):
    """The rater has done the study's maximum number of assignments."""


class NetworkHoldsEnough(ServiceError):
    """Crowd workers or open-link visitors from the rater's network already hold as many unanswered places as one
    network may (``UNANSWERED_PER_CLIENT``)."""


# Unanswered assignments the anonymous raters of one network (Rater.client) may hold in a study at once: a few people
# sharing a household or a lab start together; a script inventing ids holds no more than they would.
UNANSWERED_PER_CLIENT = 3


# --------------------------------------------------------------------------------------------
# Studies


# A study file with more items than this is imported in steps, each its own short transaction, into a study
# raters cannot see until the last step publishes it (from the browser: a background job with progress).
IMPORT_CHUNK = 2000


def do_create_study(owner: AbstractBaseUser, name: str, data: bytes, filename: str | None,
                    description: str = "", progress: Callable[[int, int], None] | None = None) -> Study:
    """Create a study from a study file (SPEC §8). All or nothing: a bad file raises ``FormatError`` listing
    every problem and leaves the database untouched. Up to ``IMPORT_CHUNK`` items it is one transaction;
    a larger file is imported by ``import_staged`` (short transactions, published at the end, removed again
    if a step fails)."""
    name = _new_study_name(owner, name)
    parsed = formats.parse_study(data, filename, max_bytes=settings.SEPLAB_MAX_IMPORT_BYTES)
    fewer = None
    if len(parsed.items) <= IMPORT_CHUNK:
        with transaction.atomic():
            study = _new_study(owner, name, description, Study.Status.ACTIVE)
            _insert_items(study, parsed, 0, len(parsed.items))
            fewer = _fewer_system_pairs(study)
            rebuild_plan(study)
    else:
        study = _new_study(owner, name, description, Study.Status.IMPORTING)
        try:
            import_staged(study, parsed, progress)
        except BaseException:
            study.delete()  # nothing of a failed import stays
            raise
    study.import_warnings = parsed.warnings + ([fewer] if fewer else [])  # for the page and the command; not stored
    return study


def do_start_study_import(owner: AbstractBaseUser, name: str, data: bytes, filename: str | None,
                          description: str = "") -> tuple[Study, Any]:
    """The browser's import: the file is checked whole in the request (every problem listed, nothing saved);
    a file of up to ``IMPORT_CHUNK`` items is imported at once, a larger one by a background job with
    progress (returned; None otherwise), into a study raters cannot see until it is published."""
    from annotation.tasks import start_study_import

    name = _new_study_name(owner, name)
    parsed = formats.parse_study(data, filename, max_bytes=settings.SEPLAB_MAX_IMPORT_BYTES)
    if len(parsed.items) <= IMPORT_CHUNK:
        return do_create_study(owner, name, data, filename, description), None
    with transaction.atomic():
        study = _new_study(owner, name, description, Study.Status.IMPORTING)
        StudyUpload.objects.create(study=study, filename=filename or "", data=data)
        job = start_study_import(study, len(parsed.items))
    study.import_warnings = parsed.warnings
    return study, job


def _new_study_name(owner: AbstractBaseUser, name: str) -> str:
    name = name.strip()
    if not name:
        raise FormatError([Problem(None, "name", "a study needs a name")])
    if Study.objects.filter(owner=owner, name=name).exists():
        raise FormatError([Problem(None, "name", f"you already have a study named '{name}'; choose another name")])
    return name


@transaction.atomic
def _new_study(owner: AbstractBaseUser, name: str, description: str, status: str) -> Study:
    study = Study.objects.create(owner=owner, name=name, description=description, status=status)
    study_settings.create_for(study)
    return study


def _insert_items(study: Study, parsed: formats.ParsedStudy, start: int, stop: int) -> None:
    """Items ``start``..``stop`` of the file, with their outputs (and the study's systems on first use)."""
    systems = {s.name: s for s in study.systems.all()}
    for name in parsed.systems:
        if name not in systems:
            systems[name] = System.objects.create(study=study, name=name)
    chunk = parsed.items[start:stop]
    items = Item.objects.bulk_create(
        Item(study=study, external_id=p.external_id, input=p.input, reference=p.reference,
             metadata=p.metadata, position=start + i)
        for i, p in enumerate(chunk)
    )
    Generation.objects.bulk_create(
        (Generation(item=item, system=systems[name], sample_index=k, text=text, text_hash=text_hash(text),
                    n_words=word_count(text))
         for item, p in zip(items, chunk, strict=True)
         for name, samples in p.outputs.items()
         for k, text in enumerate(samples)),
        batch_size=5000,
    )


def import_staged(study: Study, parsed: formats.ParsedStudy,
                  progress: Callable[[int, int], None] | None = None) -> Study:
    """Import a large file into ``study`` (status importing: invisible to raters) in steps of ``IMPORT_CHUNK``
    items or tasks, each its own transaction, so no step holds the database for long; the last step makes
    it active. ``progress(done, total)`` is told after every step."""
    n_items = len(parsed.items)
    item_steps = range(0, n_items, IMPORT_CHUNK)
    total = len(item_steps) * 2 + 1  # item steps, about as many plan steps, and the publication
    done = 0
    for start in item_steps:
        with transaction.atomic():
            _insert_items(study, parsed, start, min(start + IMPORT_CHUNK, n_items))
            if start == 0:
                _fewer_system_pairs(study)
        done += 1
        if progress:
            progress(done, total)
    with transaction.atomic():
        releases, rng = plan_releases(study)
    position = 0
    for start in range(0, len(releases), IMPORT_CHUNK):
        with transaction.atomic():
            _, position = _release_chunk(study, releases[start:start + IMPORT_CHUNK], rng, position)
        done = min(done + 1, total - 1)
        if progress:
            progress(done, total)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.ACTIVE)
    study.status = Study.Status.ACTIVE
    if progress:
        progress(total, total)
    return study


MAX_SYSTEM_PAIRS = 5000  # system pairs one study compares: 100 systems, all pairs (400 systems made 79,800)


def comparison_systems(study: Study, explicit: list[tuple[int, int]] | None = None) -> list[tuple[System, System]]:
    """The system pairs the study compares, as (A, B), per its pair mode; more than ``MAX_SYSTEM_PAIRS`` is
    refused with what to do instead."""
    systems = list(study.systems.all())
    if study.pair_mode == Study.PairMode.BASELINE and study.baseline_id:
        return [(s, study.baseline) for s in systems if s.pk != study.baseline_id]
    if study.pair_mode == Study.PairMode.EXPLICIT:
        by_id = {s.pk: s for s in systems}
        if explicit is None:
            return [(c.system_a, c.system_b) for c in study.comparisons.select_related("system_a", "system_b")]
        pairs = [(by_id[a], by_id[b]) for a, b in explicit]
    else:
        pairs = [(a, b) for i, a in enumerate(systems) for b in systems[i + 1:]]
    if len(pairs) > MAX_SYSTEM_PAIRS:
        raise ServiceError(f"{len(systems)} systems make {len(pairs):,} system pairs; a study compares at most "
                           f"{MAX_SYSTEM_PAIRS:,}. Compare each system with a baseline, or tick the pairs you need.")
    return pairs


def _fewer_system_pairs(study: Study) -> Problem | None:
    """A new study whose systems would make more than ``MAX_SYSTEM_PAIRS`` pairs compares each with the first
    system instead (a warning says so; the settings page changes it)."""
    systems = list(study.systems.order_by("id")[:1])
    n = study.systems.count()
    if study.pair_mode != Study.PairMode.ALL or n * (n - 1) // 2 <= MAX_SYSTEM_PAIRS or not systems:
        return None
    Study.objects.filter(pk=study.pk).update(pair_mode=Study.PairMode.BASELINE, baseline=systems[0])
    study.pair_mode, study.baseline = Study.PairMode.BASELINE, systems[0]
    return Problem(None, "systems", f"{n} systems would make {n * (n - 1) // 2:,} system pairs (at most "
                                    f"{MAX_SYSTEM_PAIRS:,}): each is compared with {systems[0].name} instead; change "
                                    "it on the settings page")


@transaction.atomic
def rebuild_plan(study: Study, explicit: list[tuple[int, int]] | None = None) -> int:
    """(Re)build the study's comparisons and tasks from its settings; returns the number of tasks.

    Which items each system pair gets comes from the study's selection strategy; the sampled output
    pairs and display orders come from ``annotation.scheduling``. Refuses once raters have started.
    """
    lock_plan(study, exclusive=True)
    if study.has_started():
        raise ServiceError("Raters have already started on this study, so its comparison plan is frozen.")
    releases, rng = plan_releases(study, explicit)
    return len(release_tasks(study, releases, rng))


def plan_releases(study: Study, explicit: list[tuple[int, int]] | None = None
                  ) -> tuple[list[tuple[Item, Comparison]], random.Random]:
    """The plan's (item, system pair) units in release order, and the random generator that draws their pairs
    next: the study's comparisons are made to match its settings (in the caller's transaction), its tasks are
    cleared, and each system pair's selection runs on its candidates."""
    pairs_wanted = comparison_systems(study, explicit)
    Task.objects.filter(study=study).delete()
    # Keep the system pairs that stay (their separability results hang off them); drop the others.
    existing = {(c.system_a_id, c.system_b_id): c for c in study.comparisons.all()}
    comparisons = [existing.pop((a.pk, b.pk), None) or Comparison.objects.create(study=study, system_a=a, system_b=b)
                   for a, b in pairs_wanted]
    for dropped in existing.values():
        dropped.delete()
    comparisons.sort(key=lambda c: c.pk)  # the order study.comparisons has, so `select` sees the same candidates
    items = list(study.items.all())
    rng = random.Random(study.seed)
    per_comparison: dict[int, list[scheduling.Unit]] = {}
    position_of = {item.pk: i for i, item in enumerate(items)}
    chosen_settings = study.selection_settings
    for c, (comparison, candidates) in enumerate(zip(comparisons, plan_candidates(study, comparisons, rng, items),
                                                     strict=True)):
        try:
            if is_live(chosen_settings.selection_method):
                chosen = selection_live.start(study, comparison, candidates)
            else:
                chosen, _ = selection_services.run_selection(
                    study, comparison, chosen_settings.selection_method, chosen_settings.budget, study.seed,
                    strategy_parameters(study), items=candidates)
        except ValueError as exc:
            raise ServiceError(f"{comparison}: {exc}") from None
        per_comparison[c] = [scheduling.Unit(position_of[item.pk], c) for item in chosen]
    return [(items[u.item], comparisons[u.comparison]) for u in scheduling.interleave(per_comparison)], rng


def plan_candidates(study: Study, comparisons: list[Comparison], rng: random.Random,
                    items: list[Item] | None = None) -> list[list[Item]]:
    """The candidate items of each system pair under the study's comparison schedule (before selection),
    drawn with ``rng`` (the plan's, seeded by the study's seed)."""
    items = list(study.items.all()) if items is None else items
    units = scheduling.candidate_units(len(items), len(comparisons), study.scheduling, rng)
    return [[items[u.item] for u in units if u.comparison == c] for c in range(len(comparisons))]


def advance_live_selection(assignment: Assignment) -> list[Task]:
    """After an assignment completed, let a live selection loop (iterative DiffUse) react: release the next
    items it asks for, in the same transaction as its decision. Returns the tasks newly created."""
    created: list[Task] = []
    comparisons = sorted(set(assignment.places.values_list("task__comparison_id", flat=True)))
    with transaction.atomic():
        for comparison_id in comparisons:  # each system pair the assignment had a place in
            release = selection_live.advance(assignment.study, comparison_id)
            if release is not None and release.items:
                created += release_tasks(assignment.study, [(item, release.comparison) for item in release.items],
                                         random.Random(release.seed))
    return created


RELEASE_CHUNK = 2000  # units per batch: every query's parameters stay far below PostgreSQL's 65,535


def release_tasks(study: Study, releases: list[tuple[Item, Comparison]], rng: random.Random) -> list[Task]:
    """Create the rating tasks of (item, system pair) units, after the study's existing tasks: N sampled
    output pairs each, with base display orders. Units that already have a task are skipped. Works in batches
    of ``RELEASE_CHUNK`` units (bulk inserts; the same random draws in the same order as one by one)."""
    if not releases:
        return []
    position = (Task.objects.filter(study=study).aggregate(m=models.Max("position"))["m"] or -1) + 1
    created: list[Task] = []
    for start in range(0, len(releases), RELEASE_CHUNK):
        tasks, position = _release_chunk(study, releases[start:start + RELEASE_CHUNK], rng, position)
        created += tasks
    return created


def _release_chunk(study: Study, releases: list[tuple[Item, Comparison]], rng: random.Random,
                   position: int) -> tuple[list[Task], int]:
    items = {item.pk for item, _ in releases}
    counts: dict[tuple[int, int], int] = {
        (row["item_id"], row["system_id"]): row["k"]
        for row in Generation.objects.filter(item_id__in=items).values("item_id", "system_id").annotate(k=Count("id"))
    }
    generations = {(g.item_id, g.system_id, g.sample_index): g.pk
                   for g in Generation.objects.filter(item_id__in=items).only("id", "item_id", "system_id",
                                                                              "sample_index")}
    pair_ids = {(a, b): pk for pk, a, b in Pair.objects.filter(item_id__in=items)
                .values_list("pk", "generation_a_id", "generation_b_id")}
    have = set(Task.objects.filter(study=study, item_id__in=items).values_list("item_id", "comparison_id"))
    tasks: list[Task] = []
    wanted: list[list[tuple[int, int, int, bool]]] = []  # per task: (item, generation a, generation b, a first)
    for item, comparison in releases:
        if (item.pk, comparison.pk) in have:
            continue
        have.add((item.pk, comparison.pk))
        plan = scheduling.plan_task(
            scheduling.Unit(0, 0),
            counts[(item.pk, comparison.system_a_id)],
            counts[(item.pk, comparison.system_b_id)],
            study.pairs_per_assignment,
            rng,
            study.sample_pairing,
        )
        tasks.append(Task(study=study, item=item, comparison=comparison, raters_required=study.raters_per_item,
                          position=position))
        position += 1
        wanted.append([(item.pk, generations[(item.pk, comparison.system_a_id, ja)],
                        generations[(item.pk, comparison.system_b_id, jb)], a_first)
                       for (ja, jb), a_first in zip(plan.pairs, plan.a_first, strict=True)])
    Task.objects.bulk_create(tasks)
    missing = {(ga, gb): item for row in wanted for item, ga, gb, _ in row if (ga, gb) not in pair_ids}
    for pair in Pair.objects.bulk_create(Pair(item_id=item, generation_a_id=ga, generation_b_id=gb)
                                         for (ga, gb), item in missing.items()):
        pair_ids[(pair.generation_a_id, pair.generation_b_id)] = pair.pk
    TaskPair.objects.bulk_create(
        TaskPair(task=task, pair_id=pair_ids[(ga, gb)], position=index, a_first=a_first)
        for task, row in zip(tasks, wanted, strict=True) for index, (_, ga, gb, a_first) in enumerate(row))
    return tasks, position


def lock_plan(study: Study, *, exclusive: bool) -> None:
    """Order plan rebuilds against assignment starts (inside the caller's transaction). PostgreSQL: a rebuild
    holds the study row FOR UPDATE, a start FOR SHARE, so starts never wait for each other, a start waits for
    a rebuild in progress (and then sees the new plan), and a rebuild waits for starts in progress (and then
    sees that raters have started). SQLite's IMMEDIATE transactions already run one writer at a time."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {Study._meta.db_table} WHERE id = %s FOR {'UPDATE' if exclusive else 'SHARE'}",
                       [study.pk])


@transaction.atomic
def do_update_settings(study: Study, changes: dict[str, Any], explicit: list[tuple[int, int]] | None,
                       background: bool = False) -> Study:
    """Apply a validated settings form; rebuild the plan when a plan field changed. ``background`` (a request):
    a plan that would first embed outputs not embedded yet is built by the worker (``queue_plan``), never in the
    request; commands and scripts build it at once."""
    plan_changed = any(study_settings.value(study, f) != changes[f] for f in PLAN_FIELDS if f in changes)
    if study.pair_mode == Study.PairMode.EXPLICIT or changes.get("pair_mode") == Study.PairMode.EXPLICIT:
        current = sorted(study.comparisons.values_list("system_a_id", "system_b_id"))
        plan_changed = plan_changed or (explicit is not None and sorted(explicit) != current)
    answer_changed = any(study_settings.value(study, f) != changes[f] for f in ANSWER_FIELDS if f in changes)
    if plan_changed or answer_changed:
        lock_plan(study, exclusive=True)  # no rater starts between the check below and the new plan
    if (plan_changed or answer_changed) and study.has_started():
        raise ServiceError("Raters have already started on this study, so its comparison plan "
                           "(pairs per assignment, raters per item, system pairs, scheduling) and how raters "
                           "answer (the elicitation mode) are frozen.")
    study_settings.apply(study, changes)
    if plan_changed:
        if background and plan_needs_worker(study):
            comparison_systems(study, explicit)  # too many pairs is said now, not by a failed job
            Task.objects.filter(study=study).delete()  # nobody starts on the old plan meanwhile
            if explicit is not None:  # the ticked pairs are the plan's input: kept for the job
                _set_explicit(study, explicit)
            queue_plan(study)
        else:
            rebuild_plan(study, explicit)
    return study


def plan_needs_worker(study: Study) -> bool:
    """Whether building the study's plan would embed outputs that are not embedded yet (tens of seconds for a few
    thousand outputs: never inside a request, and never while holding the database's write lock)."""
    stored = study.selection_settings
    if not needs_embeddings(stored.selection_method, stored.budget, stored.separability_metric):
        return False
    done, total = selection_services.embedding_coverage(study)
    return done < total


def queue_plan(study: Study):
    """Build the plan in the background: embed the outputs first (cached, outside any transaction), then rebuild
    the plan in one short transaction (annotation.tasks.run_plan)."""
    from annotation.tasks import start_plan

    return start_plan(study)


def _set_explicit(study: Study, explicit: list[tuple[int, int]]) -> None:
    """Make the study's comparisons the ticked pairs (explicit pair mode reads them back when it plans)."""
    wanted = set(explicit)
    existing = {(c.system_a_id, c.system_b_id): c for c in study.comparisons.all()}
    for key, comparison in existing.items():
        if key not in wanted:
            comparison.delete()
    for a, b in explicit:
        if (a, b) not in existing:
            Comparison.objects.create(study=study, system_a_id=a, system_b_id=b)


# --------------------------------------------------------------------------------------------
# Raters and assignments


def do_rotate_api_token(user: AbstractBaseUser) -> Token:
    """A new API token for the researcher; the old one stops working."""
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        return Token.objects.create(user=user)


def do_create_rater_link(study: Study, name: str) -> Rater:
    name = name.strip()
    if not name:
        raise ServiceError("Give the rater a name (for example their initials or an id).")
    try:
        with transaction.atomic():
            return Rater.objects.create(study=study, external_id=name, source=Rater.Source.PERSONAL_LINK)
    except IntegrityError:
        raise ServiceError(f"A rater named '{name}' already exists in this study.") from None


def do_join_open_link(study: Study, client: str = "") -> Rater:
    """A new anonymous rater for a visitor of the study's open link, from network ``client`` (ratelimit.client_key)."""
    for _ in range(5):
        external_id = f"anon-{random.SystemRandom().randrange(16**8):08x}"
        try:
            with transaction.atomic():
                return Rater.objects.create(study=study, external_id=external_id, source=Rater.Source.OPEN_LINK,
                                            client=client)
        except IntegrityError:
            continue
    raise ServiceError("Could not create a rater; please try again.")


def _unseen_open_tasks(rater: Rater) -> models.QuerySet[Task]:
    """Tasks of the rater's study with a place left, on items the rater has not had."""
    seen_items = AssignmentTask.objects.filter(rater=rater).values("item_id")
    return Task.objects.filter(study_id=rater.study_id, taken__lt=F("raters_required")).exclude(item_id__in=seen_items)


LOOKAHEAD = 16  # open tasks read beyond ``size``, for when several of the first are on the same item


def _open_tasks(rater: Rater, size: int) -> list[Task]:
    """Inside the start's transaction: open tasks the rater has not seen, breadth first (the fewest raters so
    far, then plan order), one per item, whole tasks up to ``size`` pairs (at least one task). On PostgreSQL
    their rows are locked until the start commits, and rows another start holds are skipped (``FOR UPDATE SKIP
    LOCKED``, the queue idiom), so starts at the same moment take different tasks without waiting for or
    colliding with each other. Earlier, starts read the open tasks unlocked and spread out by a random draw
    among the first 16; at 50 raters at maximum pace most of them still collided, waited for the other
    start's commit and retried, and a start took 2-3 s (bench/README.md, "Raters under load")."""
    # Task.taken is kept in step with the held places, so this reads the (study, taken, position) index
    # and stops after a few rows instead of counting the places of every task of the study.
    lookahead = LOOKAHEAD if size > 1 else 0  # one task: the first open one fits, locking more only adds contention
    candidates = list(_unseen_open_tasks(rater).select_for_update(skip_locked=True)
                      .order_by("taken", "position")[:size + lookahead])
    if not candidates:
        return []
    pairs = dict(TaskPair.objects.filter(task__in=candidates).values("task_id").annotate(n=Count("id"))
                 .values_list("task_id", "n"))
    chosen, items, total = [], set(), 0
    for task in candidates:
        n = pairs.get(task.pk, 0)
        if task.item_id in items or (chosen and total + n > size):
            continue
        chosen.append(task)
        items.add(task.item_id)
        total += n
        if total >= size:
            break
    return chosen


def expire_stale_assignments(study: Study) -> int:
    """Active assignments idle for longer than the study's timeout expire: their place returns to the
    queue (slot freed) and their answers stay stored. Returns how many expired."""
    now = timezone.now()
    cutoff = now - timedelta(minutes=study.crowd_settings.assignment_timeout_minutes)
    # a crowd worker or an open-link visitor who has not answered yet holds places for a short while only
    # (invented worker ids or a script signing up through the open link cannot drain a study's places for an hour)
    unanswered = now - timedelta(minutes=study.crowd_settings.first_answer_minutes)
    stale = Assignment.objects.filter(
        Q(last_activity__lt=cutoff) | Q(answered=0, created__lt=unanswered, rater__source__in=Rater.ANONYMOUS_SOURCES),
        study=study, status=Assignment.Status.ACTIVE)
    if not stale.exists():  # the common case: one cheap read, no transaction
        return 0
    with transaction.atomic():
        # Lock the stale rows (a submit racing with us waits, then finds its assignment expired) and give
        # their places back, keeping Task.taken in step.
        pks = list(stale.select_for_update(skip_locked=True).values_list("pk", flat=True))
        expired = Assignment.objects.filter(pk__in=pks).update(status=Assignment.Status.EXPIRED)
        places = AssignmentTask.objects.filter(assignment_id__in=pks, slot__isnull=False)
        freed = list(places.values_list("task_id", flat=True))
        places.update(slot=None)
        for task_id, n in Counter(freed).items():
            Task.objects.filter(pk=task_id).update(taken=Greatest(F("taken") - n, 0))
    return expired


def recount_places(task_ids) -> None:
    """Set Task.taken from the assignments that hold a place (repairs a counter that fell out of step,
    e.g. after assignments were written by hand)."""
    held = (AssignmentTask.objects.filter(task_id=OuterRef("pk"), slot__isnull=False).order_by()
            .values("task_id").annotate(n=Count("pk")).values("n"))
    Task.objects.filter(pk__in=task_ids).update(taken=Coalesce(Subquery(held), 0))


def do_start_assignment(rater: Rater) -> Assignment | None:
    """The rater's active assignment, or a new one on the open tasks with the fewest raters so far;
    None when nothing is left for this rater.

    Concurrency: a start reads and claims its tasks in one transaction, their rows locked (PostgreSQL skips
    the rows other starts hold, see ``_open_tasks``; SQLite runs one writer at a time). The database's unique
    constraints (one rater per task place, one active assignment per rater, never the same item twice for a
    rater) still decide any race the locks do not cover; the loser retries.
    Raises ``RaterScreenedOut`` / ``RaterLimitReached`` when the rater may not take more work.
    """
    study = rater.study
    expire_stale_assignments(study)
    pace = seconds_per_pair(study)[0]  # read before the transaction: it holds its tasks' rows no longer than needed
    claimed_elsewhere = False
    for _ in range(25):
        if claimed_elsewhere:  # give those starts a moment to commit
            time.sleep(random.uniform(0.005, 0.02))
            claimed_elsewhere = False
        active = Assignment.objects.filter(rater=rater, status=Assignment.Status.ACTIVE).first()
        if active:
            return active
        if rater.screened_out:
            raise RaterScreenedOut("Thank you for your time. Your answers did not pass the study's attention "
                                   "checks, so there is no more work for you here.")
        limit = study.crowd_settings.max_assignments_per_rater
        if limit is not None and Assignment.objects.filter(
                rater=rater, status=Assignment.Status.COMPLETED).count() >= limit:
            raise RaterLimitReached(f"You have completed the maximum of {limit} "
                                    "assignments for this study. Thank you!")
        # a crowd worker or open-link visitor holds the task on their screen and no more; the rest of their
        # assignment is claimed a task at a time as they reach it (_claim_next)
        anonymous = rater.source in Rater.ANONYMOUS_SOURCES
        size = 1 if anonymous else study.judgments_per_assignment
        try:
            with transaction.atomic():
                if anonymous and rater.client:
                    _check_network_holds(study, rater)
                lock_plan(study, exclusive=False)  # a plan rebuild in progress finishes first
                claim = _claim_places(rater, size)
                if claim is None:
                    continue
                tasks, slots = claim
                if not tasks:
                    # every open task is being claimed by other starts, which commit in milliseconds: look again
                    claimed_elsewhere = _unseen_open_tasks(rater).exists()
                    if claimed_elsewhere:
                        continue
                    return None
                shown = _with_gold(study, [p for t in tasks for p in _task_pairs(study, t, slots[t.pk])], tasks[0],
                                   slots, whole=size == study.judgments_per_assignment)
                held = sum(1 for pair_id, _, _ in shown if pair_id is not None)
                # whole tasks only, up to the assignment's size, as a whole start takes them (tasks of one study
                # have the same number of pairs)
                unclaimed = (study.judgments_per_assignment - held) // held * held if anonymous and held else 0
                assignment = Assignment.objects.create(
                    study=study, rater=rater, n_pairs=len(shown), seconds_per_pair=pace, unclaimed=max(0, unclaimed))
                _hold(assignment, tasks, slots, shown)
            return assignment
        except IntegrityError:
            continue  # another request took one of these places (or started this rater); look again
    raise AllocationBusy("Many raters are starting at the same moment; please try again in a few seconds.")


def _check_network_holds(study: Study, rater: Rater) -> None:
    """Inside the start's transaction: refuse a new start when the anonymous raters of the rater's network already
    hold ``UNANSWERED_PER_CLIENT`` unanswered assignments of the study. Starts from one network are serialised for
    the count (PostgreSQL: an advisory lock until the transaction ends, which PgBouncer's transaction pooling keeps;
    SQLite runs one writer at a time), so parallel requests cannot all see room."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                           [f"seplab-hold:{study.pk}:{rater.client}"])
    if Assignment.objects.filter(study=study, status=Assignment.Status.ACTIVE, answered=0,
                                 rater__client=rater.client).exclude(rater=rater).count() >= UNANSWERED_PER_CLIENT:
        raise NetworkHoldsEnough(f"{UNANSWERED_PER_CLIENT} people on your network have started this study and not "
                                 "answered yet; please try again once one of them has.")


def _claim_places(rater: Rater, size: int) -> tuple[list[Task], dict[int, int]] | None:
    """Inside a transaction: open tasks for the rater (``_open_tasks``, up to ``size`` pairs, at least one task)
    and the free place of each; ([], {}) when none is open to this start, None when a task's place counter was
    behind the places held (it is repaired: look again)."""
    tasks = _open_tasks(rater, size)
    if not tasks:
        return [], {}
    ids = [t.pk for t in tasks]
    held: dict[int, set[int]] = {}
    for task_id, slot in AssignmentTask.objects.filter(task_id__in=ids, slot__isnull=False).values_list("task_id",
                                                                                                       "slot"):
        held.setdefault(task_id, set()).add(slot)
    slots = {t.pk: next((s for s in range(t.raters_required) if s not in held.get(t.pk, ())), None) for t in tasks}
    full = [pk for pk, slot in slots.items() if slot is None]
    if full:
        recount_places(full)
        return None
    models.prefetch_related_objects(tasks, "task_pairs")  # one query for every task's pairs
    return tasks, slots


def _hold(assignment: Assignment, tasks: list[Task], slots: dict[int, int],
          shown: list[tuple[int | None, int | None, bool]]) -> None:
    """Inside the claim's transaction: the assignment takes the tasks' places and shows ``shown`` after the pairs
    it already has (positions from ``n_pairs - len(shown)``)."""
    AssignmentTask.objects.bulk_create(
        AssignmentTask(assignment=assignment, task=t, rater_id=assignment.rater_id, item_id=t.item_id,
                       slot=slots[t.pk]) for t in tasks)
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(taken=F("taken") + 1)
    start = assignment.n_pairs - len(shown)
    AssignmentPair.objects.bulk_create(
        AssignmentPair(assignment=assignment, pair_id=pair_id, gold_id=gold_id, position=start + offset,
                       a_shown_first=a_first)
        for offset, (pair_id, gold_id, a_first) in enumerate(shown))


def _claim_next(assignment: Assignment, now: dt.datetime) -> bool | None:
    """Inside a transaction holding the assignment's row lock, when its rater has answered every pair it holds and
    it has pairs ``unclaimed``: take the next open task's place and show its pairs (attention checks mixed in as
    the study's rate asks of the assignment so far). With no task left for the rater, the assignment is complete
    (True). None when every open task is being claimed by other starts this moment (the rating page tries again)."""
    rater = assignment.rater
    study = assignment.study
    if Rater.objects.filter(pk=rater.pk, screened_out=True).exists():  # failed the attention checks: no more work
        Assignment.objects.filter(pk=assignment.pk).update(unclaimed=0, status=Assignment.Status.COMPLETED,
                                                           completed=now)
        assignment.unclaimed, assignment.status, assignment.completed = 0, Assignment.Status.COMPLETED, now
        return True
    if not study.accepts_raters:  # paused: the next task is claimed when the study runs again
        return None
    for attempt in range(10):
        if attempt:
            time.sleep(random.uniform(0.005, 0.02) * attempt)  # other starts commit in milliseconds
        try:
            with transaction.atomic():  # a savepoint: a lost race undoes only this claim
                claim = _claim_places(rater, 1)
                if claim is None:
                    continue
                tasks, slots = claim
                # whole tasks only, up to the assignment's size (as a start takes them): a task with more pairs
                # than are left to claim ends the assignment
                too_big = bool(tasks) and sum(len(t.task_pairs.all()) for t in tasks) > assignment.unclaimed
                if too_big:
                    tasks = []
                if not tasks:
                    if not too_big and _unseen_open_tasks(rater).exists():
                        continue  # every open task is being claimed this moment: look again shortly
                    Assignment.objects.filter(pk=assignment.pk).update(
                        unclaimed=0, status=Assignment.Status.COMPLETED, completed=now)
                    assignment.unclaimed, assignment.status, assignment.completed = (
                        0, Assignment.Status.COMPLETED, now)
                    return True
                before = list(assignment.pairs.values_list("pair_id", "gold_id"))
                shown = _with_gold(study, [p for t in tasks for p in _task_pairs(study, t, slots[t.pk])], tasks[0],
                                   slots, whole=False, before=before)
                study_pairs = sum(1 for pair_id, _, _ in shown if pair_id is not None)
                assignment.n_pairs += len(shown)
                assignment.unclaimed = max(0, assignment.unclaimed - study_pairs)
                Assignment.objects.filter(pk=assignment.pk).update(n_pairs=assignment.n_pairs,
                                                                   unclaimed=assignment.unclaimed)
                _hold(assignment, tasks, slots, shown)
            return False
        except IntegrityError:
            assignment.refresh_from_db(fields=["n_pairs", "unclaimed"])
    return None


def claim_next(assignment: Assignment) -> None:
    """For the rating page: an active assignment whose held pairs are all answered takes its next task (the
    submit that answered the last one could not: other starts held every open task at that moment)."""
    with transaction.atomic():
        row = (Assignment.objects.select_for_update().filter(pk=assignment.pk, status=Assignment.Status.ACTIVE)
               .values("n_pairs", "answered", "unclaimed").first())
        if row is None or not row["unclaimed"] or row["answered"] < row["n_pairs"]:
            return
        assignment.n_pairs, assignment.unclaimed = row["n_pairs"], row["unclaimed"]
        completed = _claim_next(assignment, timezone.now())
    if completed:
        advance_live_selection(assignment)


def _task_pairs(study: Study, task: Task, slot: int) -> list[tuple[int | None, int | None, bool]]:
    """What one rater place of a task shows, in order: (pair id, None, A shown first) per position -- the
    task's pairs in this place's display orders."""
    base = list(task.task_pairs.all())
    rng = random.Random(f"{study.seed}:{task.pk}:{slot}")
    orders = scheduling.display_orders([tp.a_first for tp in base], slot, study.scheduling, rng)
    return [(tp.pair_id, None, o) for tp, o in zip(base, orders, strict=True)]


def _with_gold(study: Study, shown: list[tuple[int | None, int | None, bool]], first: Task,
               slots: dict[int, int], *, whole: bool = True,
               before: list[tuple[int | None, int | None]] = ()) -> list[tuple[int | None, int | None, bool]]:
    """An assignment's pairs with attention checks mixed in at the study's rate (distinct gold pairs at
    random positions, seeded by the assignment's first place).

    ``whole``: ``shown`` is the whole assignment (rounded to the nearest count; one check with the chance the rate
    gives when that rounds to none). Otherwise ``shown`` is the next part of an assignment that holds ``before``
    (its (pair, gold) so far) and grows as its rater goes: the checks so far are brought to the rate times the study
    pairs so far, rounded at random (the count stays within one of the rate at every point, never ahead of what
    the rater has seen), with gold pairs the assignment has not shown yet."""
    rng = random.Random(f"{study.seed}:{first.pk}:{slots[first.pk]}:gold")
    used = {gold_id for _, gold_id in before if gold_id is not None}
    golds = [pk for pk in study.gold_pairs.values_list("pk", flat=True) if pk not in used]
    gold_rate = study.crowd_settings.gold_rate
    if whole:
        n_gold = min(len(golds), round(gold_rate * len(shown))) if golds else 0
        if gold_rate > 0 and golds and n_gold == 0:
            n_gold = 1 if rng.random() < gold_rate * len(shown) else 0  # small assignments: in expectation
    else:
        study_pairs = sum(1 for pair_id, _ in before if pair_id is not None) + len(shown)
        n_gold = max(0, min(len(golds), math.floor(gold_rate * study_pairs - len(used) + rng.random())))
    shown = list(shown)
    for gold_id in rng.sample(golds, n_gold):
        shown.insert(rng.randrange(len(shown) + 1), (None, gold_id, rng.random() < 0.5))
    return shown


_MARK_SHOWN = CompiledUpdate(
    lambda pair, now: (AssignmentPair.objects.filter(pk=pair, shown_at__isnull=True), {"shown_at": now}),
    pair=int, now=dt.datetime,
)


def mark_shown(assignment_pair: AssignmentPair) -> None:
    """Record when the rater first saw the pair (for the server-side time on task)."""
    if assignment_pair.shown_at is None:
        now = timezone.now()
        _MARK_SHOWN(pair=assignment_pair.pk, now=now)
        assignment_pair.shown_at = now


@dataclasses.dataclass
class Recorded:
    judgment: Judgment | None  # None for an attention check (see gold_answer)
    created: bool  # False: this submission was a repeat and nothing new was stored
    gold_answer: GoldAnswer | None = None


def _submission_key(idempotency_key: str | None) -> str:
    """The exactly-once key of a rater's submission (answer, revision or skip), as stored."""
    key = (idempotency_key or "").strip()[:64]
    if not key:
        raise ServiceError("The form is missing its submission key; reload the page.")
    return key


def record_judgment(
    assignment_pair: AssignmentPair,
    *,
    idempotency_key: str,
    answer: elicitation.Answer,
    client_time_ms: int | None = None,
    comment: str = "",
) -> Recorded:
    """Store one rater answer, exactly once.

    ``answer`` is in display coordinates, as the study's elicitation mode read it from the form; it is
    checked and stored in model coordinates with the display order by that mode (``annotation/elicitation.py``).
    A repeated submission (same idempotency key, or a pair that already has its judgment) returns
    the stored judgment with ``created=False``.
    """
    assignment = assignment_pair.assignment
    study = assignment.study
    key = _submission_key(idempotency_key)
    if assignment_pair.gold_id is not None:
        return _record_gold(assignment_pair, key, answer)
    # The pair's own judgment (a repeat, or the back button with a new key); select_related("judgment")
    # by the caller makes this free. A key already used on another pair is caught by its unique
    # constraint below.
    previous = assignment_pair.judgment if hasattr(assignment_pair, "judgment") else None
    if previous:
        return Recorded(previous, False)
    _check_can_answer(assignment_pair)
    mode = _checked_mode(study, answer)
    stored = mode.to_model(answer, assignment_pair.a_shown_first)
    now = timezone.now()
    shown_at = assignment_pair.shown_at
    try:
        with transaction.atomic():
            completed = _count_answer(assignment, now)
            judgment = Judgment.objects.create(
                study=study, rater_id=assignment.rater_id, pair_id=assignment_pair.pair_id, assignment=assignment,
                assignment_pair=assignment_pair, a_shown_first=assignment_pair.a_shown_first, **stored.fields(),
                created=now, shown_at=shown_at,
                time_on_task_ms=_measured_ms(now, shown_at), client_time_ms=_client_ms(client_time_ms),
                idempotency_key=key, comment=comment if study.allow_comment else "",
            )
    except IntegrityError:
        # the pair's own judgment (a racing repeat) first; else the key's, which may be another pair's
        previous = (Judgment.objects.filter(assignment_pair=assignment_pair).first()
                    or Judgment.objects.filter(study=study, idempotency_key=key).first())
        if previous is None:
            raise
        if previous.assignment_pair_id != assignment_pair.pk:
            # the key of an answer to another pair: acknowledging it would lose this answer without a word
            raise ServiceError("This answer's submission key was already used for another pair; reload the page "
                               "and answer again.") from None
        return Recorded(previous, False)
    if completed:
        # An item's judgments may now be complete: let a live selection loop (iterative DiffUse) react.
        advance_live_selection(assignment)
    return Recorded(judgment, True)


def _measured_ms(now: dt.datetime, shown_at: dt.datetime | None) -> int | None:
    """Server-measured time on a pair, capped at what the column holds (24.8 days: a pair left open longer
    reads as that)."""
    return None if shown_at is None else min(int((now - shown_at).total_seconds() * 1000), formats.MAX_STORED_INT)


def _client_ms(value: int | None) -> int | None:
    """The browser's own timing, as the rating form checked it; out of range is the caller's error."""
    if value is not None and not 0 <= value <= formats.MAX_STORED_INT:
        raise ServiceError(f"client_ms must be a whole number from 0 to {formats.MAX_STORED_INT}.")
    return value


def _count_answer(assignment: Assignment, now: dt.datetime, pairs: int = 1) -> bool:
    """Inside a submit's transaction, before its insert: count ``pairs`` more answered (or skipped) pairs on a
    live assignment,
    record the activity, and complete the assignment when this answer is its last (an assignment with pairs still
    unclaimed takes its next task instead, ``_claim_next``) -- one UPDATE, which also
    holds the assignment's row lock until commit. Concurrent submits of its last pairs queue on that lock and
    each re-reads the row's own counter (PostgreSQL re-evaluates an UPDATE's row expressions on the latest
    row version), so exactly one of them completes it; an insert that fails rolls its count back. An expired
    assignment refuses the answer. True when this answer completed the assignment."""
    when = connection.ops.adapt_datetimefield_value(now)
    active, completed_, expired = Assignment.Status.ACTIVE, Assignment.Status.COMPLETED, Assignment.Status.EXPIRED
    with connection.cursor() as cursor:
        cursor.execute(_COUNT_ANSWER_SQL, [when, pairs, active, pairs, completed_, active, pairs, when, assignment.pk,
                                           expired])
        row = cursor.fetchone()
    if row is None:
        assignment.status = Assignment.Status.EXPIRED
        raise ServiceError(EXPIRED_MESSAGE)
    status, answered, n_pairs, unclaimed = row
    completed = status == Assignment.Status.COMPLETED and answered - pairs < n_pairs <= answered
    assignment.last_activity, assignment.answered = now, answered
    if completed:
        assignment.status, assignment.completed = status, now
    elif status == Assignment.Status.ACTIVE and unclaimed and answered >= n_pairs:
        # a crowd worker's or open-link visitor's assignment reaches its next task only now (claimed as shown)
        assignment.n_pairs, assignment.unclaimed = n_pairs, unclaimed
        completed = bool(_claim_next(assignment, now))
    return completed


def skip_item(assignment_pair: AssignmentPair, *, idempotency_key: str, reason: str) -> int:
    """Skip the item of a pair: its unanswered pairs in this assignment are stored as skips (never judgments)
    with the reason, counted as done for the assignment, and the item's task place returns to the queue for
    other raters. Exactly once by key. Returns how many pairs were skipped."""
    assignment, study = assignment_pair.assignment, assignment_pair.assignment.study
    key = _submission_key(idempotency_key)
    if not study.allow_skip:
        raise ServiceError("This study does not offer skipping.")
    if reason not in Skip.Reason.values:
        raise ServiceError("Choose why you skip this item.")
    if assignment_pair.gold_id is not None:
        raise ServiceError("Please answer this pair; it cannot be skipped.")
    if Skip.objects.filter(idempotency_key=key, rater_id=assignment.rater_id).exists():
        return 0
    _check_can_answer(assignment_pair)
    item_id = Pair.objects.filter(pk=assignment_pair.pair_id).values_list("item_id", flat=True).get()
    open_pairs = list(assignment.pairs.filter(pair__item_id=item_id, judgment__isnull=True, skip__isnull=True)
                      .values_list("pk", flat=True))
    if not open_pairs:
        return 0
    now = timezone.now()
    try:
        with transaction.atomic():
            completed = _count_answer(assignment, now, len(open_pairs))
            Skip.objects.bulk_create(Skip(assignment_pair_id=pk, rater_id=assignment.rater_id, reason=reason,
                                          idempotency_key=key, created=now) for pk in open_pairs)
            place = AssignmentTask.objects.filter(assignment=assignment, item_id=item_id, slot__isnull=False)
            freed = list(place.values_list("task_id", flat=True))
            place.update(slot=None)
            Task.objects.filter(pk__in=freed).update(taken=Greatest(F("taken") - 1, 0))
    except IntegrityError:
        return 0  # a repeat of this skip (or an answer that arrived first) won
    if completed:
        advance_live_selection(assignment)
    return len(open_pairs)


def revise_judgment(
    assignment_pair: AssignmentPair,
    *,
    idempotency_key: str,
    answer: elicitation.Answer,
    client_time_ms: int | None = None,
    comment: str = "",
) -> Recorded:
    """Replace the rater's answer to a pair of their active assignment: a new judgment takes the pair, the
    one it replaces stays stored, flagged ``revised`` (exported, left out of the analysis). Exactly once: a
    repeated key returns the judgment it stored; the assignment's answer count does not change."""
    assignment, study = assignment_pair.assignment, assignment_pair.assignment.study
    key = _submission_key(idempotency_key)
    if assignment_pair.gold_id is not None:
        raise ServiceError("That answer cannot be changed.")
    repeat = Judgment.objects.filter(study=study, idempotency_key=key).first()
    if repeat is not None:
        return Recorded(repeat, False)
    mode = _checked_mode(study, answer)
    stored = mode.to_model(answer, assignment_pair.a_shown_first)
    now = timezone.now()
    try:
        with transaction.atomic():
            # the assignment's row lock orders revisions of its pairs; a finished one keeps its answers
            if not Assignment.objects.filter(pk=assignment.pk, status=Assignment.Status.ACTIVE).update(
                    last_activity=now):
                raise ServiceError("This assignment is finished, so its answers can no longer be changed.")
            if not Judgment.objects.filter(assignment_pair=assignment_pair).update(assignment_pair=None, revised=True):
                raise ServiceError("There is no answer to change on that pair yet.")
            judgment = Judgment.objects.create(
                study=study, rater_id=assignment.rater_id, pair_id=assignment_pair.pair_id, assignment=assignment,
                assignment_pair=assignment_pair, a_shown_first=assignment_pair.a_shown_first, **stored.fields(),
                created=now, shown_at=assignment_pair.shown_at, idempotency_key=key,
                client_time_ms=_client_ms(client_time_ms),
                comment=comment if study.allow_comment else "",
            )
    except IntegrityError:
        repeat = Judgment.objects.filter(study=study, idempotency_key=key).first()
        if repeat is None:
            raise
        return Recorded(repeat, False)
    return Recorded(judgment, True)


# UPDATE ... RETURNING (PostgreSQL; SQLite >= 3.35): every right-hand side reads the row before the update.
_COUNT_ANSWER_SQL = f"""
UPDATE {Assignment._meta.db_table}
   SET last_activity = %s,
       answered = answered + %s,
       status = CASE WHEN status = %s AND answered + %s >= n_pairs AND unclaimed = 0 THEN %s ELSE status END,
       completed = CASE WHEN status = %s AND answered + %s >= n_pairs AND unclaimed = 0 THEN %s ELSE completed END
 WHERE id = %s AND status <> %s
RETURNING status, answered, n_pairs, unclaimed"""


EXPIRED_MESSAGE = ("This assignment expired after a long pause and its pairs went back to the queue; your answers "
                   "so far are kept. Start a new assignment to continue.")


def _check_can_answer(assignment_pair: AssignmentPair) -> None:
    assignment, study = assignment_pair.assignment, assignment_pair.assignment.study
    if assignment.status == Assignment.Status.EXPIRED:
        raise ServiceError(EXPIRED_MESSAGE)
    shown_at = assignment_pair.shown_at
    if shown_at is None:
        # Only the pair on the rater's screen can be answered: the rating page marks a pair shown when it shows
        # it, one at a time, so an answer to a pair further on (a guessed id) is refused, and every answer has
        # a server-measured time on task that the minimum time applies to.
        raise ServiceError("That pair has not been shown to you yet: answer the pair on your screen.")
    minimum = study.crowd_settings.min_seconds_per_pair
    if minimum:
        elapsed = (timezone.now() - shown_at).total_seconds()
        if elapsed < minimum:
            raise ServiceError(f"Please read both outputs before answering: take at least "
                               f"{minimum} seconds per pair.")


def _record_gold(assignment_pair: AssignmentPair, key: str, answer: elicitation.Answer) -> Recorded:
    """Score an attention-check answer (never a judgment) and screen the rater out when their gold
    accuracy falls below the study's bar."""
    previous = GoldAnswer.objects.filter(assignment_pair=assignment_pair).first()
    if previous:
        return Recorded(None, False, previous)
    assignment, study = assignment_pair.assignment, assignment_pair.assignment.study
    _check_can_answer(assignment_pair)
    mode = _checked_mode(study, answer)
    good = orientation.to_display("a", assignment_pair.a_shown_first)  # the gold pair's good output is its "a"
    correct = mode.gold_correct(answer, good)
    now = timezone.now()
    try:
        with transaction.atomic():
            completed = _count_answer(assignment, now)
            answer = GoldAnswer.objects.create(
                assignment_pair=assignment_pair, rater_id=assignment.rater_id, correct=correct, idempotency_key=key,
                answer=mode.describe(answer),
            )
    except IntegrityError:
        return Recorded(None, False, GoldAnswer.objects.get(assignment_pair=assignment_pair))
    _screen(assignment.rater)
    if completed:
        advance_live_selection(assignment)
    return Recorded(None, True, answer)


def gold_accuracy(rater: Rater) -> tuple[int, int]:
    """(correct, answered) attention checks of the rater."""
    answers = list(GoldAnswer.objects.filter(rater=rater).values_list("correct", flat=True))
    return sum(answers), len(answers)


def _screen(rater: Rater) -> None:
    study = rater.study
    correct, answered = gold_accuracy(rater)
    crowd = study.crowd_settings
    if answered >= max(1, crowd.screen_min_gold) and crowd.below_gold_bar(correct, answered):
        Rater.objects.filter(pk=rater.pk).update(screened_out=True)
        rater.screened_out = True


def _checked_mode(study: Study, answer: elicitation.Answer) -> elicitation.Mode:
    """The study's elicitation mode, once it has accepted the answer."""
    mode = elicitation.mode_of(study)
    try:
        mode.validate(study, answer)
    except elicitation.AnswerError as exc:
        raise ServiceError(str(exc)) from exc
    return mode


# --------------------------------------------------------------------------------------------
# Judgment import / export


@dataclasses.dataclass
class ImportSummary:
    created: int
    skipped: int


def study_samples(study: Study) -> dict[str, dict[str, int]]:
    samples: dict[str, dict[str, int]] = {}
    rows = (Generation.objects.filter(item__study=study)
            .values("item__external_id", "system__name").annotate(k=Count("id")))
    for row in rows:
        samples.setdefault(row["item__external_id"], {})[row["system__name"]] = row["k"]
    return samples


@transaction.atomic
def do_import_judgments(study: Study, data: bytes, filename: str | None) -> ImportSummary:
    """Import judgments (SPEC §8 JSONL or the CSV export layout) into a study. All or nothing;
    judgments already present (same id, or same content for lines without id) are skipped."""
    parsed = _parse_judgments(study, data, filename)
    new = _new_judgments(study, parsed)
    Judgment.objects.bulk_create(new, batch_size=IMPORT_INSERT_BATCH)
    return ImportSummary(created=len(new), skipped=len(parsed) - len(new))


LARGE_JUDGMENT_IMPORT = 5000  # lines: a larger file is checked in the request and imported by the worker, in steps


def do_start_judgment_import(study: Study, data: bytes, filename: str | None) -> tuple[ImportSummary | None, Any]:
    """The browser's import: the file is checked whole in the request (every problem listed, nothing saved); up to
    ``LARGE_JUDGMENT_IMPORT`` lines are imported at once (summary, None), a larger file by a background job in
    short steps (None, the job), so no request holds the database's write lock for seconds."""
    from annotation.tasks import start_judgment_import

    parsed = _parse_judgments(study, data, filename)
    if len(parsed) <= LARGE_JUDGMENT_IMPORT:
        return do_import_judgments(study, data, filename), None
    with transaction.atomic():
        upload = JudgmentUpload.objects.create(study=study, filename=filename or "", data=data)
        return None, start_judgment_import(study, upload, len(parsed))


def import_judgments_staged(study: Study, data: bytes, filename: str | None,
                            progress: Callable[[int, int], None] | None = None) -> ImportSummary:
    """A large judgments file, imported in steps of ``IMPORT_CHUNK`` judgments, each its own short transaction. All
    or nothing still: when a step fails, the judgments of the earlier steps are deleted again."""
    parsed = _parse_judgments(study, data, filename)
    with transaction.atomic():
        new = _new_judgments(study, parsed)  # the raters and output pairs it needs, created once
    done: list[str] = []
    try:
        for start in range(0, len(new), IMPORT_CHUNK):
            chunk = new[start:start + IMPORT_CHUNK]
            with transaction.atomic():
                Judgment.objects.bulk_create(chunk, batch_size=IMPORT_INSERT_BATCH)
            done += [j.idempotency_key for j in chunk]
            if progress:
                progress(min(start + IMPORT_CHUNK, len(new)), len(new))
    except BaseException:
        for start in range(0, len(done), IMPORT_QUERY_CHUNK):
            Judgment.objects.filter(study=study, idempotency_key__in=done[start:start + IMPORT_QUERY_CHUNK]).delete()
        raise
    return ImportSummary(created=len(new), skipped=len(parsed) - len(new))


def _parse_judgments(study: Study, data: bytes, filename: str | None) -> list:
    raters = dict(study.raters.values_list("external_id", "kind"))
    return formats.parse_judgments(data, filename, study_samples(study), rater_kinds=raters,
                                   max_bytes=settings.SEPLAB_MAX_IMPORT_BYTES)


def _new_judgments(study: Study, parsed: list) -> list[Judgment]:
    """The judgments of ``parsed`` the study does not have yet (unsaved), with the raters and output pairs they
    need created."""
    raters = {r.external_id: r for r in study.raters.all()}
    keys = [p.key for p in parsed]
    present: set[str] = set()
    for start in range(0, len(keys), IMPORT_QUERY_CHUNK):  # PostgreSQL takes at most 65,535 parameters a query
        present.update(Judgment.objects.filter(study=study, idempotency_key__in=keys[start:start + IMPORT_QUERY_CHUNK])
                       .values_list("idempotency_key", flat=True))
    items = {i.external_id: i for i in study.items.all()}
    generations = {
        (g.item_id, g.system.name, g.sample_index): g
        for g in Generation.objects.filter(item__study=study).select_related("system")
    }
    pairs = {(p.generation_a_id, p.generation_b_id): p for p in Pair.objects.filter(item__study=study)}
    now = timezone.now()
    new: list[Judgment] = []
    for p in parsed:
        if p.key in present:
            continue
        rater = raters.get(p.rater)
        if rater is None:
            rater = raters[p.rater] = Rater.objects.create(study=study, external_id=p.rater, kind=p.rater_kind,
                                                           source=Rater.Source.IMPORT)
        item = items[p.item]
        ga = generations[(item.pk, p.system_a, p.sample_a)]
        gb = generations[(item.pk, p.system_b, p.sample_b)]
        pair = pairs.get((ga.pk, gb.pk))
        if pair is None:
            pair = pairs[(ga.pk, gb.pk)] = Pair.objects.create(item=item, generation_a=ga, generation_b=gb)
        new.append(Judgment(
            study=study, rater=rater, pair=pair, a_shown_first=p.shown_first == p.system_a, choice=p.choice,
            response_set=p.response_set, probability_a=p.probability_a, strength=p.strength, comment=p.comment,
            created=p.created or now,
            time_on_task_ms=p.time_on_task_ms, client_time_ms=p.client_time_ms, idempotency_key=p.key,
            superseded=p.superseded, revised=p.revised, extra=p.extra,
        ))
    return new


IMPORT_QUERY_CHUNK = 5000  # keys per lookup query
IMPORT_INSERT_BATCH = 1000  # judgments per INSERT: 1,000 x 17 columns, far below PostgreSQL's 65,535 parameters


def judgment_queryset(study: Study):
    """The study's judgments, oldest first, with what ``judgment_line`` needs in one query."""
    return (
        Judgment.objects.filter(study=study)
        .select_related("rater", "pair__item", "pair__generation_a__system", "pair__generation_b__system")
        .order_by("created", "id")
    )


def judgment_line(j: Judgment) -> dict[str, Any]:
    """A judgment as a SPEC §8 JSONL object; unknown fields of an imported line come back as they were."""
    system_a = j.pair.generation_a.system.name
    system_b = j.pair.generation_b.system.name
    name = {"a": system_a, "b": system_b, "tie": "tie", None: None}
    line: dict[str, Any] = dict(j.extra)
    line.update({
        "id": j.idempotency_key,
        "item": j.pair.item.external_id,
        "system_a": system_a,
        "sample_a": j.pair.generation_a.sample_index,
        "system_b": system_b,
        "sample_b": j.pair.generation_b.sample_index,
        "shown_first": orientation.in_display_order(system_a, system_b, j.a_shown_first)[0],
        "rater": j.rater.external_id,
        "rater_kind": j.rater.kind,
        "choice": name[j.choice],
        "response_set": None if j.response_set is None else [name[s] for s in j.response_set],
        "probability_a": j.probability_a,
        "created": formats.format_timestamp(j.created),
        "time_on_task_ms": j.time_on_task_ms,
        "client_time_ms": j.client_time_ms,
        "superseded": j.superseded,
        "strength": j.strength,
        "comment": j.comment or None,
        "revised": j.revised,
    })
    if j.assignment_id is not None:
        line["assignment"] = j.assignment_id
    return line


def judgment_lines(study: Study) -> Iterator[dict[str, Any]]:
    """Every judgment of the study as a SPEC §8 JSONL object, oldest first."""
    for judgment in judgment_queryset(study).iterator(chunk_size=2000):
        yield judgment_line(judgment)


# --------------------------------------------------------------------------------------------
# Progress (read-only)

def preview_pairs(study: Study) -> list[dict[str, str]]:
    """What the first task of the plan shows a rater, pair by pair in its base display order: the input and
    both outputs (for the researcher's "preview as a rater")."""
    task = Task.objects.filter(study=study).order_by("position").first()
    if task is None:
        return []
    rows = (task.task_pairs.order_by("position")
            .values_list("a_first", "pair__item__input", "pair__generation_a__text", "pair__generation_b__text"))
    return [dict(zip(("input", "first", "second"), (item, *orientation.in_display_order(a, b, a_first)),
                     strict=True)) for a_first, item, a, b in rows]


MIN_TIMED_JUDGMENTS = 10


@dataclasses.dataclass(frozen=True)
class AssignmentSize:
    """What one assignment asks of a rater, as the welcome page, the previews and the study page state it."""

    pairs: int  # pairs to judge, attention checks included (the typical assignment of the plan)
    seconds_per_pair: float  # this study's median time per pair, or the default before there is data
    measured: bool  # False: the default

    @property
    def minutes(self) -> int:
        return max(1, round(self.pairs * self.seconds_per_pair / 60))


def assignment_size(study: Study) -> AssignmentSize:
    """The plan's typical assignment -- whole tasks (the median task's pairs) up to the study's judgments per
    assignment, one per item, plus the attention checks the gold rate adds on average -- and the time it takes
    at this study's median server-measured time per pair."""
    sizes = sorted(Task.objects.filter(study=study).annotate(n=Count("task_pairs")).values_list("n", flat=True))
    per_task = sizes[len(sizes) // 2] if sizes else 0
    items = Task.objects.filter(study=study).values("item_id").distinct().count()  # never an item twice
    pairs = per_task * min(items, max(1, study.judgments_per_assignment // per_task)) if per_task else 0
    if study.gold_pairs.exists():
        pairs += round(study.crowd_settings.gold_rate * pairs)
    return AssignmentSize(pairs, *seconds_per_pair(study))


PACE_CACHE_SECONDS = 30  # how long a study's measured pace is reused (every assignment start reads it)


def seconds_per_pair(study: Study) -> tuple[float, bool]:
    """This study's median server-measured time per pair over its latest 500 timed human judgments, and True;
    or the default and False before there are ``MIN_TIMED_JUDGMENTS`` of them. A measured pace is reused for
    ``PACE_CACHE_SECONDS`` from the cache (shared by the servers through Redis): reading 500 judgments was a third
    of an assignment start's time (bench/README.md, "Past one machine"), and a median over 500 moves slowly."""
    from django.core.cache import cache

    key = f"pace:{study.pk}"
    try:
        cached = cache.get(key)
    except Exception:  # noqa: BLE001 - the cache (Redis) is down: read the pace from the database
        cached = None
    if cached is not None:
        return cached[0], cached[1]
    timed = list(Judgment.objects.filter(study=study, rater__kind=Rater.Kind.HUMAN, time_on_task_ms__isnull=False)
                 .order_by("-created").values_list("time_on_task_ms", flat=True)[:500])
    if len(timed) < MIN_TIMED_JUDGMENTS:  # a cheap read (a few rows), not kept: the first timed answers count at once
        return DEFAULT_SECONDS_PER_PAIR, False
    pace = (statistics.median(timed) / 1000, True)
    try:
        cache.set(key, pace, PACE_CACHE_SECONDS)
    except Exception:  # noqa: BLE001 - the cache (Redis) is down: the next start reads it again
        pass
    return pace


@dataclasses.dataclass
class ComparisonProgress:
    """One system pair's human work against the plan; imported human judgments and judge verdicts apart."""

    label: str
    tasks: int
    target: int
    judgments: int
    assignments_completed: int
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
    for comparison_id, n_pairs, raters in (Task.objects.filter(study=study).annotate(p=Count("task_pairs"))
                                           .values_list("comparison_id", "p", "raters_required")):
        tasks[comparison_id] = tasks.get(comparison_id, 0) + 1
        targets[comparison_id] = targets.get(comparison_id, 0) + n_pairs * raters
    done = dict(  # completed places (an assignment bundles several)
        AssignmentTask.objects.filter(assignment__study=study, assignment__status=Assignment.Status.COMPLETED)
        .values_list("task__comparison_id").annotate(n=Count("id"))
    )
    counts: dict[tuple[frozenset[int], str], int] = defaultdict(int)
    human = Q(rater__kind=Rater.Kind.HUMAN)
    for a, b, planned, imported, judge in (
            Judgment.objects.filter(study=study, revised=False)
            .values_list("pair__generation_a__system_id", "pair__generation_b__system_id")
            .annotate(planned=Count("id", filter=human & Q(assignment__isnull=False)),
                      imported=Count("id", filter=human & Q(assignment__isnull=True)),
                      judge=Count("id", filter=Q(rater__kind=Rater.Kind.JUDGE)))
            .order_by()):
        for name, n in (("planned", planned), ("imported", imported), ("judge", judge)):
            counts[(frozenset((a, b)), name)] += n
    return [
        ComparisonProgress(
            label=f"{c.system_a.name} vs {c.system_b.name}",
            tasks=tasks.get(c.pk, 0),
            target=targets.get(c.pk, 0),
            judgments=counts[(frozenset((c.system_a_id, c.system_b_id)), "planned")],
            assignments_completed=done.get(c.pk, 0),
            imported_human=counts[(frozenset((c.system_a_id, c.system_b_id)), "imported")],
            judge=counts[(frozenset((c.system_a_id, c.system_b_id)), "judge")],
        )
        for c in comparisons
    ]


# Quality defaults: a rater whose median time per pair on long outputs is below this reads implausibly fast.
FAST_SECONDS = 1.5
LONG_OUTPUT_WORDS = 200


def rater_progress(study: Study) -> list[Rater]:
    """Raters with their completed / active assignments and judgment counts, and ``median_long_seconds``:
    the median server-measured time per pair on pairs with an output over ``LONG_OUTPUT_WORDS`` words (None
    without such a pair); ``too_fast`` flags a median under ``FAST_SECONDS``."""
    raters = list(study.raters.annotate(
        completed=Count("assignments", filter=Q(assignments__status=Assignment.Status.COMPLETED), distinct=True),
        active=Count("assignments", filter=Q(assignments__status=Assignment.Status.ACTIVE), distinct=True),
        n_judgments=Count("judgments", distinct=True),
        n_skipped=Count("skips", distinct=True),
    ).order_by("id"))
    times: dict[int, list[int]] = {}
    long_pairs = (Q(pair__generation_a__n_words__gt=LONG_OUTPUT_WORDS)
                  | Q(pair__generation_b__n_words__gt=LONG_OUTPUT_WORDS))
    for rater_id, ms in (Judgment.objects.filter(long_pairs, study=study, time_on_task_ms__isnull=False)
                         .values_list("rater_id", "time_on_task_ms")):
        times.setdefault(rater_id, []).append(ms)
    for rater in raters:
        spent = times.get(rater.pk)
        rater.median_long_seconds = statistics.median(spent) / 1000 if spent else None
        rater.too_fast = rater.median_long_seconds is not None and rater.median_long_seconds < FAST_SECONDS
    return raters
