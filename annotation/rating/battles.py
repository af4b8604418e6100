"""An arena battle in the rating wing (docs/arena.md#how-a-battle-is-stored): once both first replies are in, the
battle holds an assignment of one pair -- a task of its prompt and system pair, taken by its rater -- so that the vote
is that pair's judgment, recorded by ``recording.do_submit`` as the rating page records an answer; and the one writer
of a vote kept but not counted (``do_flag_votes``)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from annotation.compiled import instance, model_columns
from annotation.errors import ServiceError
from annotation.models import (
    Assignment,
    AssignmentPair,
    AssignmentTask,
    Battle,
    Judgment,
    Pair,
    Rater,
    Task,
    TaskPair,
)
from annotation.rating import recording

FLAG_CHARS = Battle._meta.get_field("flag").max_length or 300
LEFT_FOR_NEWER = "You started a newer battle, so this one can no longer be voted on (its prompt is kept)."


def do_hold_battle(battle: Battle, pair: Pair | None = None, *, locked: bool = False) -> AssignmentPair | None:
    """The battle's one assignment pair, held now if it has none: a ``Task`` of its prompt and system pair (one rater,
    taken), an ``Assignment`` of one pair with its ``AssignmentTask`` place and the ``AssignmentPair`` shown as the
    battle showed it (``pair``, the two first replies; an attention-check battle shows its ``GoldPair`` and holds no
    task). A rater votes on their latest battle only: a battle settling after its rater started a newer one holds
    nothing (None), and holding a battle ends the rater's other active assignment (an earlier battle left without a
    vote), as one rater may have one active assignment. Under the rater's row lock (``do_start_battle`` takes it
    too; SQLite's IMMEDIATE transactions let one writer in at a time, so there it takes none), so a start and a hold
    of one rater never cross. ``locked``: the caller read ``battle`` under its row lock (its assignment is current).
    """
    with transaction.atomic():
        if connection.features.has_select_for_update:
            Rater.objects.select_for_update().filter(pk=battle.rater_id).values_list("pk").first()
        held = None if locked and battle.assignment_id is None else _held(battle)
        if held is not None:
            return held
        if Battle.objects.filter(study_id=battle.study_id, rater_id=battle.rater_id, pk__gt=battle.pk).exists():
            return None
        now = timezone.now()
        Assignment.objects.filter(rater_id=battle.rater_id, status=Assignment.Status.ACTIVE).update(
            status=Assignment.Status.EXPIRED, last_activity=now
        )
        assignment = Assignment.objects.create(
            study_id=battle.study_id, rater_id=battle.rater_id, n_pairs=1, seconds_per_pair=0.0, last_activity=now
        )
        if battle.comparison_id is not None:  # a battle of two systems (an attention check has none)
            if pair is None:
                pair = Pair.objects.get(
                    item_id=battle.item_id, generation_a__sample_index=0, generation_b__sample_index=0
                )
            task = Task.objects.create(
                study_id=battle.study_id,
                item_id=battle.item_id,
                comparison_id=battle.comparison_id,
                raters_required=1,
                taken=1,
                position=battle.pk,
            )
            # the task's one pair, as a planned task lists its pairs: what the judges' "pairs shown" scope and the
            # study page read
            TaskPair.objects.create(task=task, pair=pair, position=0, a_first=battle.a_shown_first)
            AssignmentTask.objects.create(
                assignment=assignment, task=task, rater_id=battle.rater_id, item_id=battle.item_id, slot=0
            )
        held = AssignmentPair.objects.create(
            assignment=assignment,
            pair=pair if battle.comparison_id is not None else None,
            gold_id=battle.gold_id,
            position=0,
            a_shown_first=battle.a_shown_first,
            shown_at=now,  # the replies were on the rater's screen as they streamed
        )
        Battle.objects.filter(pk=battle.pk).update(assignment=assignment)
        battle.assignment = assignment
        return held


def _held(battle: Battle) -> AssignmentPair | None:
    if battle.assignment_id is None:
        battle.assignment_id = Battle.objects.filter(pk=battle.pk).values_list("assignment_id", flat=True).first()
    if battle.assignment_id is None:
        return None
    held = (
        AssignmentPair.objects.select_related("assignment", "judgment")
        .filter(assignment_id=battle.assignment_id)
        .first()
    )
    if held is not None:
        held.assignment.study = battle.study  # the battle's, read with its settings rows by the vote
    return held


def vote_pair(battle: Battle) -> AssignmentPair:
    """The assignment pair a vote on the battle answers; ``ServiceError`` when the battle has none to vote on (its
    rater left it for a newer battle)."""
    return checked_pair(_held(battle))


def checked_pair(held: AssignmentPair | None) -> AssignmentPair:
    """``held`` when a vote may answer it; ``ServiceError`` when the battle holds none (its rater left it for a newer
    battle, which ended its assignment)."""
    if held is None or held.assignment.status == Assignment.Status.EXPIRED:
        raise ServiceError(LEFT_FOR_NEWER)
    return held


_PAIR = "assignment__pairs__"
_LOCKED_BATTLE = ("status", "flag", "prompts", "assignment_id")
_LOCKED_HELD = (
    *model_columns(Assignment, "assignment__"),
    *model_columns(AssignmentPair, _PAIR),
    *model_columns(Judgment, f"{_PAIR}judgment__"),
)


def locked_for_vote(battle: Battle, **counts) -> AssignmentPair | None:
    """The battle's row locked until the caller's transaction ends, read again with what a vote reads under that
    lock, in one statement: its status, flag, messages and held assignment with its one pair and the pair's judgment
    when it has one (all set on ``battle``; the held pair returned, its assignment's study the battle's), and
    ``counts`` -- scalar subqueries (the vote limits' counts, ``abuse.vote_counts``), set on ``battle.counts``. On
    PostgreSQL the lock is the battle's row only (``FOR UPDATE OF``): the joined rows are read, not locked."""
    row = (
        Battle.objects.select_for_update(of=("self",))
        .filter(pk=battle.pk)
        .annotate(**counts)
        .order_by()
        .values(*_LOCKED_BATTLE, *_LOCKED_HELD, *counts)
        .get()
    )
    battle.status, battle.flag, battle.prompts, battle.assignment_id = (row[f] for f in _LOCKED_BATTLE)
    battle.counts = {name: row[name] or 0 for name in counts}  # type: ignore[attr-defined]
    if row[f"{_PAIR}id"] is None:
        return None
    assignment = instance(Assignment, row, "assignment__")
    assignment.study = battle.study
    held = instance(AssignmentPair, row, _PAIR)
    held.assignment = assignment
    judgment = None if row[f"{_PAIR}judgment__id"] is None else instance(Judgment, row, f"{_PAIR}judgment__")
    AssignmentPair.judgment.related.set_cached_value(held, judgment)  # read: no second query for it
    return held


def do_record_vote(
    battle: Battle, submission: recording.Submission, pair: AssignmentPair | None = None
) -> recording.Recorded | None:
    """The vote, as the rating page submits an answer (``recording.do_submit``: exactly once by its key), and the
    battle voted; a vote on a battle flagged before it arrived is kept and not counted from the start. ``pair``: the
    battle's ``vote_pair`` when the caller has read it. In the caller's transaction, which holds the battle's row
    lock."""
    pair = checked_pair(pair) if pair is not None else vote_pair(battle)
    recorded = recording.do_submit(pair, submission)
    if recorded is None:  # a skip: an arena's study offers none, so do_submit refused it already
        return None
    if recorded.created:
        now = timezone.now()
        Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.VOTED, voted=now)
        battle.status, battle.voted = Battle.Status.VOTED, now
        if battle.flag and recorded.judgment is not None:
            Judgment.objects.filter(pk=recorded.judgment.pk).update(superseded=True)
            recorded.judgment.superseded = True
    return recorded


def do_flag_votes(battle_ids: Iterable[int], why: str) -> int:
    """Keep the votes of these battles but stop counting them (``Judgment.superseded``: exported, left out of every
    analysis) and say why on each battle (``Battle.flag``; a second reason is added after the first); a battle not
    voted yet is flagged and its vote, when it comes, is not counted. The one writer of such flags: near-duplicate
    prompts (selection), unlikely raters (analytics' outlier test), failed attention checks. Returns how many votes
    stopped counting now."""
    why = " ".join(why.split())
    if not why:
        raise ValueError("a flag says why")
    ids = sorted(set(battle_ids))
    if not ids:
        return 0
    with transaction.atomic():
        # the battles' rows in id order: a vote on one of them (which holds its row) waits, never deadlocks with this
        flags = dict(Battle.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk", "flag"))
        for pk, flag in flags.items():
            if why in flag.split("; "):
                continue
            Battle.objects.filter(pk=pk).update(flag=f"{flag}; {why}"[:FLAG_CHARS] if flag else why[:FLAG_CHARS])
        return Judgment.objects.filter(
            Q(assignment_pair__assignment__battle__pk__in=list(flags)), superseded=False
        ).update(superseded=True)
