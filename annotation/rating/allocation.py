"""Who rates what: starting an assignment (screening, limits, places claimed as work is shown, attention
checks mixed in), growing it item by item, expiring abandoned ones, and the pace a study's raters keep."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Final, cast

from django.db import IntegrityError, connection, models, transaction
from django.db.models import Count, F, Q
from django.db.models.functions import Greatest
from django.utils import timezone
from django.utils.translation import gettext, ngettext

from annotation import orientation, questions
from annotation.compiled import CompiledUpdate
from annotation.errors import AllocationBusy, NetworkHoldsEnough, RaterLimitReached, RaterScreenedOut
from annotation.models import (
    DEFAULT_SECONDS_PER_PAIR,
    Assignment,
    AssignmentPair,
    AssignmentTask,
    Judgment,
    Rater,
    Study,
    Task,
    TaskPair,
    WorkerSession,
)
from annotation.plan import planning, scheduling
from annotation.rating import holds
from annotation.rating import pace as pace_rules
from annotation.rating.holds import UNANSWERED_PER_CLIENT
from annotation.text import whole_number


def _unseen_open_tasks(rater: Rater) -> models.QuerySet[Task]:
    """Tasks of the rater's study with a place left, on items the rater has not had, of system pairs still open
    (a decided pair is closed when the study stops buying decided pairs), on items no researcher excluded."""
    seen_items = AssignmentTask.objects.filter(rater=rater).values("item_id")
    return _open(rater.study_id).exclude(item_id__in=seen_items)


def _open(study_id: int) -> models.QuerySet[Task]:
    """The tasks with a place left, of system pairs still open, on items not excluded (``Task.objects.buyable``: the
    data manager's exclusion stops buying judgments of an item)."""
    return Task.objects.buyable().filter(study_id=study_id, taken__lt=F("raters_required"), comparison__closed=False)


def open_places(study: Study) -> int:
    """Places a newcomer could still take: raters still wanted by the tasks of system pairs that are open. 0 means
    a link has run out (the crowd preview says so, so that nobody accepts work that does not exist)."""
    return _open(study.pk).aggregate(n=models.Sum(F("raters_required") - F("taken")))["n"] or 0


LOOKAHEAD = 16  # open tasks read beyond ``size``, for when several of the first are on the same item


def _open_tasks(rater: Rater, size: int) -> list[Task]:
    """Inside the start's transaction: open tasks the rater has not seen, breadth first (the fewest raters so
    far, then plan order), one per item, whole tasks up to ``size`` pairs (at least one task). On PostgreSQL
    their rows are locked until the start commits, and rows another start holds are skipped (``FOR UPDATE SKIP
    LOCKED``, the queue idiom), so starts at the same moment take different tasks without waiting for or
    colliding with each other. Earlier, starts read the open tasks unlocked and spread out by a random draw
    among the first 16; at 50 raters at maximum pace most of them still collided, waited for the other
    start's commit and retried, and a start took 2-3 s (bench/README.md, "Raters under load").

    Tasks of system pairs behind (``Comparison.behind``: far from a decision, docs/decisions.md#racing-across-pairs)
    come second: a second read, only when the pairs ahead have too few tasks left for the rater to fill the
    assignment, so the common case stays one read and a rater is never sent away while a pair behind has work."""
    # Task.taken is kept in step with the held places, so this reads the (study, taken, position) index
    # and stops after a few rows instead of counting the places of every task of the study.
    lookahead = LOOKAHEAD if size > 1 else 0  # one task: the first open one fits, locking more only adds contention
    # breadth first (an item's raters spread over time), or depth first while the study's decisions wait for whole
    # items (``Study.fill_items_first``)
    order = ("-taken", "position") if rater.study.fill_items_first else ("taken", "position")
    chosen: list[Task] = []
    items: set[int] = set()
    total = 0
    for behind in (False, True):
        limit = size - total + lookahead
        candidates = list(
            _unseen_open_tasks(rater)
            .filter(comparison__behind=behind)
            .exclude(item_id__in=items)
            .select_for_update(skip_locked=True, of=("self",))
            .order_by(*order)[:limit]
        )
        pairs = dict(  # no query when there are no candidates
            TaskPair.objects.filter(task__in=candidates)
            .values("task_id")
            .annotate(n=Count("id"))
            .values_list("task_id", "n")
        )
        for task in candidates:
            n = pairs.get(task.pk, 0)
            if task.item_id in items or (chosen and total + n > size):
                continue
            chosen.append(task)
            items.add(task.item_id)
            total += n
            if total >= size:
                return chosen
        if len(candidates) == limit:  # more tasks of the pairs ahead may be open: no need for those behind
            return chosen
    return chosen


def do_expire_stale_assignments(study: Study) -> int:
    """Active assignments idle for longer than the study's timeout expire: their place returns to the
    queue (slot freed) and their answers stay stored. Returns how many expired."""
    now = timezone.now()
    cutoff = now - timedelta(minutes=study.crowd_settings.assignment_timeout_minutes)
    # a crowd worker or an open-link visitor who has not answered yet holds places for a short while only
    # (invented worker ids or a script signing up through the open link cannot drain a study's places for an hour)
    unanswered = now - timedelta(minutes=study.crowd_settings.first_answer_minutes)
    stale = Assignment.objects.filter(
        Q(last_activity__lt=cutoff) | Q(answered=0, created__lt=unanswered, rater__source__in=Rater.ANONYMOUS_SOURCES),
        study=study,
        status=Assignment.Status.ACTIVE,
    )
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


def do_start_assignment(rater: Rater, session: WorkerSession | None = None) -> Assignment | None:
    """The rater's active assignment, or a new one on the open tasks with the fewest raters so far;
    None when nothing is left for this rater. A crowd worker's new assignment is started within the caps of the links
    they came through (``holds.check_link_holds``) and attached to ``session``, their visit, in the same transaction.

    Concurrency: a start reads and claims its tasks in one transaction, their rows locked (PostgreSQL skips
    the rows other starts hold, see ``_open_tasks``; SQLite runs one writer at a time). The database's unique
    constraints (one rater per task place, one active assignment per rater, never the same item twice for a
    rater) still decide any race the locks do not cover; the loser retries.
    Raises ``RaterScreenedOut`` / ``RaterLimitReached`` when the rater may not take more work.
    """
    study = rater.study
    do_expire_stale_assignments(study)
    pace = seconds_per_pair(study)[0]  # read before the transaction: it holds its tasks' rows no longer than needed
    outcome: Assignment | None | _Retry = AGAIN
    for _ in range(25):
        if outcome is WAIT:  # give the other starts a moment to commit
            time.sleep(random.uniform(0.005, 0.02))
        active = Assignment.objects.filter(rater=rater, status=Assignment.Status.ACTIVE).first()
        if active:
            return active
        check_may_start(rater)
        outcome = _start_once(rater, pace, session)
        if outcome is not AGAIN and outcome is not WAIT:
            return outcome
    raise AllocationBusy(gettext("Many raters are starting at the same moment; please try again in a few seconds."))


class _Retry(enum.Enum):
    """A start to try again at once, or after the other starts committed."""

    AGAIN = "again"
    WAIT = "wait"


AGAIN: Final = _Retry.AGAIN
WAIT: Final = _Retry.WAIT


def check_may_start(rater: Rater) -> None:
    """``RaterScreenedOut`` / ``RaterLimitReached`` when the rater may not take more work."""
    if rater.screened_out:
        raise RaterScreenedOut(
            gettext(
                "Thank you for your time. Your answers did not pass the study's attention "
                "checks, so there is no more work for you here."
            )
        )
    limit = rater.study.crowd_settings.max_assignments_per_rater
    if (
        limit is not None
        and Assignment.objects.filter(rater=rater, status=Assignment.Status.COMPLETED).count() >= limit
    ):
        raise RaterLimitReached(
            ngettext(
                "You have completed the maximum of %(limit)d assignment for this study. Thank you!",
                "You have completed the maximum of %(limit)d assignments for this study. Thank you!",
                limit,
            )
            % {"limit": limit}
        )


def _start_once(rater: Rater, pace: float, session: WorkerSession | None = None) -> Assignment | None | _Retry:
    """One try at a new assignment, in one transaction: its places claimed and held, attention checks mixed in.
    None when nothing is left for the rater; ``AGAIN`` / ``WAIT`` when other starts got in the way."""
    study = rater.study
    # a crowd worker or open-link visitor holds the task on their screen and no more; the rest of their
    # assignment is claimed a task at a time as they reach it (do_try_claim_next)
    anonymous = rater.source in Rater.ANONYMOUS_SOURCES
    size = 1 if anonymous else study.judgments_per_assignment
    try:
        with transaction.atomic():
            if rater.source == Rater.Source.EXTERNAL:
                holds.check_link_holds(rater)  # the links' locks first, then the network's
            if anonymous and rater.client:
                _check_network_holds(study, rater)
            planning.lock_plan(study, exclusive=False)  # a plan rebuild in progress finishes first
            claim = _claim_places(rater, size)
            if claim is None:
                return AGAIN
            tasks, slots = claim
            if not tasks:
                # every open task is being claimed by other starts, which commit in milliseconds: look again
                return WAIT if _unseen_open_tasks(rater).exists() else None
            shown = _with_gold(
                study,
                [p for t in tasks for p in _task_pairs(study, t, slots[t.pk])],
                tasks[0],
                slots,
                whole=size == study.judgments_per_assignment,
            )
            held = sum(1 for pair_id, _, _ in shown if pair_id is not None)
            # whole tasks only, up to the assignment's size, as a whole start takes them (tasks of one study
            # have the same number of pairs), and no more than the items still open to this rater (never an
            # item twice): the page's "Pair 1 of N" and its time left promise only what the rater can get
            more = (study.judgments_per_assignment - held) // held if anonymous and held else 0
            if more > 0:
                left = (
                    _unseen_open_tasks(rater)
                    .exclude(item_id__in=[t.item_id for t in tasks])
                    .values("item_id")
                    .distinct()
                    .count()
                )
                more = min(more, left)
            unclaimed = more * held
            assignment = Assignment.objects.create(
                study=study, rater=rater, n_pairs=len(shown), seconds_per_pair=pace, unclaimed=max(0, unclaimed)
            )
            _hold(assignment, tasks, slots, shown)
            if session is not None:
                WorkerSession.objects.filter(pk=session.pk).update(assignment=assignment)
        if session is not None:
            session.assignment = assignment
        return assignment
    except IntegrityError:
        return AGAIN  # another request took one of these places (or started this rater); look again


def _check_network_holds(study: Study, rater: Rater) -> None:
    """Inside the start's transaction: refuse a new start when the anonymous raters of the rater's network already
    hold ``UNANSWERED_PER_CLIENT`` unanswered assignments of the study. Starts from one network are serialised for
    the count (PostgreSQL: an advisory lock until the transaction ends, which PgBouncer's transaction pooling keeps;
    SQLite runs one writer at a time), so parallel requests cannot all see room."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"seplab-hold:{study.pk}:{rater.client}"]
            )
    if (
        Assignment.objects.filter(study=study, status=Assignment.Status.ACTIVE, answered=0, rater__client=rater.client)
        .exclude(rater=rater)
        .count()
        >= UNANSWERED_PER_CLIENT
    ):
        raise NetworkHoldsEnough(
            ngettext(
                "%(people)d person on your network has started this study and not "
                "answered yet; please try again once they have.",
                "%(people)d people on your network have started this study and not "
                "answered yet; please try again once one of them has.",
                UNANSWERED_PER_CLIENT,
            )
            % {"people": UNANSWERED_PER_CLIENT}
        )


def _claim_places(rater: Rater, size: int) -> tuple[list[Task], dict[int, int]] | None:
    """Inside a transaction: open tasks for the rater (``_open_tasks``, up to ``size`` pairs, at least one task)
    and the free place of each; ([], {}) when none is open to this start, None when a task's place counter was
    behind the places held (it is repaired: look again)."""
    tasks = _open_tasks(rater, size)
    if not tasks:
        return [], {}
    ids = [t.pk for t in tasks]
    held: dict[int, set[int | None]] = {}
    for task_id, slot in AssignmentTask.objects.filter(task_id__in=ids, slot__isnull=False).values_list(
        "task_id", "slot"
    ):
        held.setdefault(task_id, set()).add(slot)
    free = {t.pk: next((s for s in range(t.raters_required) if s not in held.get(t.pk, ())), None) for t in tasks}
    full = [pk for pk, slot in free.items() if slot is None]
    if full:
        planning.do_recount_places(full)
        return None
    models.prefetch_related_objects(tasks, "task_pairs")  # one query for every task's pairs
    return tasks, {pk: slot for pk, slot in free.items() if slot is not None}  # all of them: none is full


def _hold(
    assignment: Assignment, tasks: list[Task], slots: dict[int, int], shown: list[tuple[int | None, int | None, bool]]
) -> None:
    """Inside the claim's transaction: the assignment takes the tasks' places and shows ``shown`` after the pairs
    it already has (positions from ``n_pairs - len(shown)``)."""
    AssignmentTask.objects.bulk_create(
        AssignmentTask(assignment=assignment, task=t, rater_id=assignment.rater_id, item_id=t.item_id, slot=slots[t.pk])
        for t in tasks
    )
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(taken=F("taken") + 1)
    start = assignment.n_pairs - len(shown)
    AssignmentPair.objects.bulk_create(
        AssignmentPair(
            assignment=assignment, pair_id=pair_id, gold_id=gold_id, position=start + offset, a_shown_first=a_first
        )
        for offset, (pair_id, gold_id, a_first) in enumerate(shown)
    )


def do_try_claim_next(assignment: Assignment, now: dt.datetime) -> bool | None:
    """Inside a transaction holding the assignment's row lock, when its rater has answered every pair it holds and
    it has pairs ``unclaimed``: take the next open task's place and show its pairs (attention checks mixed in as
    the study's rate asks of the assignment so far). With no task left for the rater, the assignment is complete
    (True). None when every open task is being claimed by other starts this moment (the rating page tries again)."""
    rater = assignment.rater
    study = assignment.study
    if Rater.objects.filter(pk=rater.pk, screened_out=True).exists():  # failed the attention checks: no more work
        Assignment.objects.filter(pk=assignment.pk).update(
            unclaimed=0, status=Assignment.Status.COMPLETED, completed=now
        )
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
                        unclaimed=0, status=Assignment.Status.COMPLETED, completed=now
                    )
                    assignment.unclaimed, assignment.status, assignment.completed = (
                        0,
                        Assignment.Status.COMPLETED,
                        now,
                    )
                    return True
                before = list(assignment.pairs.values_list("pair_id", "gold_id"))
                shown = _with_gold(
                    study,
                    [p for t in tasks for p in _task_pairs(study, t, slots[t.pk])],
                    tasks[0],
                    slots,
                    whole=False,
                    before=before,
                )
                study_pairs = sum(1 for pair_id, _, _ in shown if pair_id is not None)
                assignment.n_pairs += len(shown)
                assignment.unclaimed = max(0, assignment.unclaimed - study_pairs)
                Assignment.objects.filter(pk=assignment.pk).update(
                    n_pairs=assignment.n_pairs, unclaimed=assignment.unclaimed
                )
                _hold(assignment, tasks, slots, shown)
            return False
        except IntegrityError:
            assignment.refresh_from_db(fields=["n_pairs", "unclaimed"])
    return None


def _task_pairs(study: Study, task: Task, slot: int) -> list[tuple[int | None, int | None, bool]]:
    """What one rater place of a task shows, in order: (pair id, None, A shown first) per position -- the
    task's pairs in this place's display orders."""
    base = list(task.task_pairs.all())
    rng = random.Random(f"{study.seed}:{task.pk}:{slot}")
    orders = scheduling.display_orders([tp.a_first for tp in base], slot, study.scheduling, rng)
    return [(tp.pair_id, None, o) for tp, o in zip(base, orders, strict=True)]


def _with_gold(
    study: Study,
    shown: list[tuple[int | None, int | None, bool]],
    first: Task,
    slots: dict[int, int],
    *,
    whole: bool = True,
    before: Sequence[tuple[int | None, int | None]] = (),
) -> list[tuple[int | None, int | None, bool]]:
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
    pair=int,
    now=dt.datetime,
)


def do_mark_shown(assignment_pair: AssignmentPair) -> None:
    """Record when the rater first saw the pair (for the server-side time on task)."""
    if assignment_pair.shown_at is None:
        now = timezone.now()
        _MARK_SHOWN(pair=assignment_pair.pk, now=now)
        assignment_pair.shown_at = now


def preview_seed(value: str | None = None) -> int:
    """The seed of a preview's display orders: the one given (a preview going on from pair to pair keeps its
    sides), else a fresh one, so each preview shows the sides as a different rater would see them."""
    seed = whole_number(value)
    return seed % 2**31 if seed is not None else random.SystemRandom().randrange(2**31)


def preview_pairs(study: Study, seed: int) -> list[dict[str, Any]]:
    """What a full assignment of the plan shows a rater, pair by pair (the researcher's "preview as a rater" and the
    crowd preview): whole tasks in release order, one per item, up to the study's pairs per assignment (attention
    checks left out), each with the input and both outputs in the display order of a random rater place of its task
    (``scheduling.display_orders``, as ``_task_pairs`` draws them for a real rater), seeded by ``seed``."""
    rng = random.Random(f"{study.seed}:{seed}:preview")
    limit = pairs_per_bundle(study)
    # Three bounded queries: crowd previews are opened by many workers. Each task holds at least one pair, so the
    # first ``limit`` tasks of distinct items are enough.
    candidates: list[tuple[int, int]] = []
    items: set[int] = set()
    for task_id, item_id, places in (
        Task.objects.buyable()
        .filter(study=study)
        .order_by("position")
        .values_list("pk", "item_id", "raters_required")
        .iterator(chunk_size=500)
    ):
        if len(candidates) >= limit:
            break
        if item_id not in items:
            items.add(item_id)
            candidates.append((task_id, places))
    sizes = dict(
        TaskPair.objects.filter(task_id__in=[t for t, _ in candidates])
        .values("task_id")
        .annotate(n=Count("id"))
        .values_list("task_id", "n")
    )
    tasks, total = [], 0
    for task_id, places in candidates:
        if total >= limit:
            break
        if sizes.get(task_id):
            tasks.append((task_id, places))
            total += sizes[task_id]
    rows: dict[int, list] = {}
    for task_id, *row in (
        TaskPair.objects.filter(task_id__in=[t for t, _ in tasks])
        .order_by("position")
        .values_list(
            "task_id",
            "a_first",
            "pair__item_id",
            "pair__item__input",
            "pair__item__messages",
            "pair__generation_a__text",
            "pair__generation_b__text",
        )
    ):
        rows.setdefault(task_id, []).append(row)
    shown: list[dict[str, Any]] = []
    for task_id, places in tasks:
        pairs = rows[task_id]
        orders = scheduling.display_orders(
            [row[0] for row in pairs], rng.randrange(max(1, places)), study.scheduling, rng
        )
        shown += [
            {
                "item_id": item_id,
                "input": item,
                "messages": messages,
                **dict(zip(("first", "second"), orientation.in_display_order(a, b, a_first), strict=True)),
            }
            for a_first, (_, item_id, item, messages, a, b) in zip(orders, pairs, strict=True)
        ]
    return shown


MIN_TIMED_JUDGMENTS = 10


@dataclasses.dataclass(frozen=True)
class AssignmentSize:
    """What one assignment asks of a rater, as the welcome page, the previews and the study page state it."""

    pairs: int  # pairs to judge, attention checks included (the typical assignment of the plan)
    seconds_per_pair: float  # this study's median time per pair, or the default before there is data
    measured: bool  # False: the default
    per_item: int = 0  # an item's pairs (the median task's): an assignment holds whole items
    # what comes with it: the consent asked before the first pair, the practice pairs (not counted), and the
    # further questions asked on every pair -- the welcome page and the crowd preview say so up front
    consent: bool = False
    practice: int = 0
    further: int = 0

    @property
    def minutes(self) -> int:
        return max(1, round(self.pairs * self.seconds_per_pair / 60))


def bundle(per_task: int, judgments_per_assignment: int) -> int:
    """The rated pairs one assignment holds: whole tasks (an item's pairs for one rater), as many as fit in the
    study's judgments per assignment, at least one."""
    return per_task * max(1, judgments_per_assignment // per_task)


def pairs_per_bundle(study: Study) -> int:
    """The rated pairs a full assignment of this study holds (what a crowd site pays one assignment for)."""
    return bundle(study.places_per_task, study.judgments_per_assignment)


def assignment_size(study: Study) -> AssignmentSize:
    """The plan's typical assignment -- whole tasks (the median task's pairs) up to the study's judgments per
    assignment, one per item, plus the attention checks the gold rate adds on average -- and the time it takes
    at this study's median server-measured time per pair."""
    sizes = sorted(
        Task.objects.buyable().filter(study=study).annotate(n=Count("task_pairs")).values_list("n", flat=True)
    )
    per_task = sizes[len(sizes) // 2] if sizes else 0
    items = Task.objects.buyable().filter(study=study).values("item_id").distinct().count()  # never an item twice
    pairs = min(bundle(per_task, study.judgments_per_assignment), per_task * items) if per_task else 0
    if study.gold_pairs.exists():
        pairs += round(study.crowd_settings.gold_rate * pairs)
    return AssignmentSize(
        pairs,
        *seconds_per_pair(study),
        per_item=per_task,
        consent=bool((study.consent_text or "").strip()),
        practice=study.practice_pairs,
        further=len(questions.further(study)),
    )


def next_assignment_pairs(rater: Rater) -> int:
    """The pairs a further assignment would give this rater now -- the study's typical assignment, capped at the
    items still open to them -- or 0 when none would start (screened out, at the study's limit of assignments per
    rater, the study paused, or no open item the rater has not had): the completed page offers "Rate N more" only
    when there are N to rate."""
    if not rater.study.accepts_raters:
        return 0
    try:
        check_may_start(rater)
    except (RaterScreenedOut, RaterLimitReached):
        return 0
    left = _unseen_open_tasks(rater).values("item_id").distinct().count()
    if not left:
        return 0
    size = assignment_size(rater.study)
    return min(size.pairs, left * size.per_item)


PACE_CACHE_SECONDS = 30  # how long a study's measured pace is reused (every assignment start reads it)


def seconds_per_pair(study: Study) -> tuple[float, bool]:
    """This study's median server-measured time per pair over the plausible ones among its latest 500 timed human
    judgments (``annotation/rating/pace.py``: flagged and screened-out raters and times under a reading floor left
    out), and True; or the default and False before there are ``MIN_TIMED_JUDGMENTS`` of them. Once there are that
    many timed judgments, plausible or not, the answer is reused for ``PACE_CACHE_SECONDS`` from the cache (shared
    by the servers through Redis): reading 500 judgments was a third of an assignment start's time (bench/README.md,
    "Past one machine"), and a median over 500 moves slowly."""
    from django.core.cache import cache

    key = f"pace:{study.pk}"
    try:
        cached = cache.get(key)
    except Exception:  # noqa: BLE001 - the cache (Redis) is down: read the pace from the database
        cached = None
    if cached is not None:
        return cached[0], cached[1]
    rows = list(
        Judgment.objects.filter(study=study, rater__kind=Rater.Kind.HUMAN, time_on_task_ms__isnull=False)
        .order_by("-created")
        .values_list(
            "rater_id",
            "time_on_task_ms",
            "pair__generation_a__n_words",
            "pair__generation_b__n_words",
            "rater__screened_out",
        )[:500]
    )
    if len(rows) < MIN_TIMED_JUDGMENTS:  # a cheap read (a few rows), not kept: the first timed answers count at once
        return DEFAULT_SECONDS_PER_PAIR, False
    # time_on_task_ms__isnull=False: every row's milliseconds are an int
    timed = pace_rules.plausible_times(cast(list[tuple[int, int, int, int, bool]], rows))
    # Too few plausible times among many is kept as well: a study flooded with implausibly fast answers made every
    # start read its latest 500 judgments (150 ms at 3,000 judgments on PostgreSQL without table statistics).
    pace = (statistics.median(timed), True) if len(timed) >= MIN_TIMED_JUDGMENTS else (DEFAULT_SECONDS_PER_PAIR, False)
    try:
        cache.set(key, pace, PACE_CACHE_SECONDS)
    except Exception:  # noqa: BLE001 - the cache (Redis) is down: the next start reads it again
        pass
    return pace
