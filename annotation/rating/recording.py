"""Where a judgment is written: a rater's answer, a revision, a skip, an attention check and an LLM judge's verdict
all go through here, exactly once each (the database's constraints make it a fact). An imported judgments file is
written by its neighbour ``annotation/rating/imports.py``; no other room writes judgments."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import cast

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from annotation import elicitation, orientation, questions
from annotation.errors import ServiceError
from annotation.exchange import rules
from annotation.models import (
    Assignment,
    AssignmentPair,
    AssignmentTask,
    GoldAnswer,
    Judgment,
    Pair,
    Ranking,
    Rater,
    Skip,
    Study,
    Task,
)
from annotation.plan import planning
from annotation.rating import allocation, rankings


@dataclasses.dataclass
class Recorded:
    judgment: Judgment | None  # None for an attention check (see gold_answer) and a ranking (see ranking)
    created: bool  # False: this submission was a repeat and nothing new was stored
    gold_answer: GoldAnswer | None = None
    ranking: Ranking | None = None  # an answer on several outputs, with the judgments it implies


@dataclasses.dataclass(frozen=True)
class Submission:
    """What a rater's submit asks for: an answer, a revision of their earlier answer to the pair, or (no answer) a
    skip of the item with a reason."""

    key: str  # the page's exactly-once key
    answer: elicitation.Answer | None = None
    revise: bool = False
    skip_reason: str = ""
    client_time_ms: int | None = None
    comment: str = ""
    further: Mapping[str, elicitation.Answer | str] = dataclasses.field(default_factory=dict)
    """The answers to the study's further questions (``annotation/questions.py``), display coordinates."""


def do_submit(pair: AssignmentPair, submission: Submission) -> Recorded | None:
    """A rater's submit, whichever it is (the rating page's one call); None for a skip."""
    if submission.answer is None:
        do_skip_item(pair, idempotency_key=submission.key, reason=submission.skip_reason)
        return None
    record = do_revise_judgment if submission.revise else do_record_judgment
    return record(
        pair,
        idempotency_key=submission.key,
        answer=submission.answer,
        client_time_ms=submission.client_time_ms,
        comment=submission.comment,
        further=submission.further,
    )


def _submission_key(idempotency_key: str | None) -> str:
    """The exactly-once key of a rater's submission (answer, revision or skip), as stored."""
    key = (idempotency_key or "").strip()[:64]
    if not key:
        raise ServiceError(_("The form is missing its submission key; reload the page."))
    return key


def do_record_judgment(
    assignment_pair: AssignmentPair,
    *,
    idempotency_key: str,
    answer: elicitation.Answer,
    client_time_ms: int | None = None,
    comment: str = "",
    further: Mapping[str, elicitation.Answer | str] | None = None,
) -> Recorded:
    """Store one rater answer, exactly once, with the answers to the study's further questions (``further``,
    display coordinates, checked by ``annotation/questions.py``: the pair is answered whole or not at all).

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
    answers = _further(study, further, assignment_pair.a_shown_first)
    now = timezone.now()
    shown_at = assignment_pair.shown_at
    try:
        with transaction.atomic():
            completed = _count_answer(assignment, now)
            _check_not_skipped(assignment_pair)
            judgment = Judgment.objects.create(
                study=study,
                rater_id=assignment.rater_id,
                pair_id=_study_pair_id(assignment_pair),
                assignment=assignment,
                assignment_pair=assignment_pair,
                a_shown_first=assignment_pair.a_shown_first,
                **stored.fields(),
                created=now,
                shown_at=shown_at,
                time_on_task_ms=_measured_ms(now, shown_at),
                client_time_ms=_client_ms(client_time_ms),
                idempotency_key=key,
                comment=comment if study.allow_comment else "",
                answers=answers,
            )
    except IntegrityError:
        previous = _racing_repeat(Judgment, assignment_pair, study, key)
        if previous is None:
            raise
        return Recorded(previous, False)
    if completed:
        # An item's judgments may now be complete: let a live selection loop (iterative DiffUse) react.
        _after_completion(assignment)
    return Recorded(judgment, True)


def do_record_ranking_answer(
    assignment_pair: AssignmentPair,
    *,
    idempotency_key: str,
    answer: rankings.RankingAnswer,
    client_time_ms: int | None = None,
    comment: str = "",
) -> Recorded:
    """Store a rater's ranking or best-worst answer on the screen of ``assignment_pair`` (a study whose answers cover
    several outputs, ``Study.ranks``), exactly once, with the judgments it implies (``rankings.do_store``), counted
    in the assignment as one answered place. ``answer`` must be on the outputs the screen shows
    (``rankings.screen``, which ``rankings.read_answer`` read it against). A repeat (the same key, or a screen
    already answered) returns the stored answer with ``created=False``."""
    assignment = assignment_pair.assignment
    study = assignment.study
    key = _submission_key(idempotency_key)
    previous = Ranking.objects.filter(assignment_pair=assignment_pair).first()
    if previous is not None:
        return Recorded(None, False, ranking=previous)
    _check_can_answer(assignment_pair)
    item_id = Pair.objects.values_list("item_id", flat=True).get(pk=_study_pair_id(assignment_pair))
    screen = rankings.screen(study, assignment_pair.pk, item_id)
    if answer.shown != screen.shown or answer.kind != screen.kind:
        raise ServiceError(_("This answer is not on the outputs of your screen; reload the page and answer again."))
    now = timezone.now()
    shown_at = assignment_pair.shown_at
    new = rankings.NewRanking(
        rater=assignment.rater,
        item_id=item_id,
        answer=answer,
        key=key,
        created=now,
        comment=comment if study.allow_comment else "",
        time_on_task_ms=_measured_ms(now, shown_at),
        client_time_ms=_client_ms(client_time_ms),
        assignment=assignment,
        assignment_pair=assignment_pair,
    )
    try:
        with transaction.atomic():
            completed = _count_answer(assignment, now)
            _check_not_skipped(assignment_pair)
            (ranking,) = rankings.do_store(study, [new])
    except IntegrityError:
        previous = _racing_repeat(Ranking, assignment_pair, study, key)
        if previous is None:
            raise
        return Recorded(None, False, ranking=previous)
    if completed:
        _after_completion(assignment)
    return Recorded(None, True, ranking=ranking)


def do_record_verdict(
    study: Study,
    rater: Rater,
    pair_id: int,
    a_shown_first: bool,
    answer: elicitation.Answer,
    probability_a: float | None,
    key: str,
) -> Judgment:
    """An LLM judge's verdict on one pair in one display order (``annotation/judges/runner.py``, inside the
    transaction that records its call: the key makes a second write of the same call fail)."""
    stored = elicitation.mode_of(study).to_model(answer, a_shown_first)
    return Judgment.objects.create(
        study=study,
        rater=rater,
        pair_id=pair_id,
        a_shown_first=a_shown_first,
        probability_a=probability_a,
        idempotency_key=key,
        **stored.fields(),
    )


def _measured_ms(now: dt.datetime, shown_at: dt.datetime | None) -> int | None:
    """Server-measured time on a pair, capped at what the column holds (24.8 days: a pair left open longer
    reads as that)."""
    return None if shown_at is None else min(int((now - shown_at).total_seconds() * 1000), rules.MAX_STORED_INT)


def _client_ms(value: int | None) -> int | None:
    """The browser's own timing, as the rating form checked it; out of range is the caller's error."""
    if value is not None and not 0 <= value <= rules.MAX_STORED_INT:
        raise ServiceError(f"client_ms must be a whole number from 0 to {rules.MAX_STORED_INT}.")
    return value


def _count_answer(assignment: Assignment, now: dt.datetime, pairs: int = 1) -> bool:
    """Inside a submit's transaction, before its insert: count ``pairs`` more answered (or skipped) pairs on a
    live assignment,
    record the activity, and complete the assignment when this answer is its last (an assignment with pairs still
    unclaimed takes its next task instead, ``allocation.do_try_claim_next``) -- one UPDATE, which also
    holds the assignment's row lock until commit. Concurrent submits of its last pairs queue on that lock and
    each re-reads the row's own counter (PostgreSQL re-evaluates an UPDATE's row expressions on the latest
    row version), so exactly one of them completes it; an insert that fails rolls its count back. An expired
    assignment refuses the answer. True when this answer completed the assignment."""
    when = connection.ops.adapt_datetimefield_value(now)
    active, completed_, expired = Assignment.Status.ACTIVE, Assignment.Status.COMPLETED, Assignment.Status.EXPIRED
    with connection.cursor() as cursor:
        cursor.execute(
            _COUNT_ANSWER_SQL, [when, pairs, active, pairs, completed_, active, pairs, when, assignment.pk, expired]
        )
        row = cursor.fetchone()
    if row is None:
        assignment.status = Assignment.Status.EXPIRED
        raise ServiceError(str(EXPIRED_MESSAGE))
    status, answered, n_pairs, unclaimed = row
    completed = status == Assignment.Status.COMPLETED and answered - pairs < n_pairs <= answered
    assignment.last_activity, assignment.answered = now, answered
    if completed:
        assignment.status, assignment.completed = status, now
    elif status == Assignment.Status.ACTIVE and unclaimed and answered >= n_pairs:
        # a crowd worker's or open-link visitor's assignment reaches its next task only now (claimed as shown)
        assignment.n_pairs, assignment.unclaimed = n_pairs, unclaimed
        completed = bool(allocation.do_try_claim_next(assignment, now))
    return completed


def do_skip_item(assignment_pair: AssignmentPair, *, idempotency_key: str, reason: str) -> int:
    """Skip the item of a pair: its unanswered pairs in this assignment are stored as skips (never judgments)
    with the reason, counted as done for the assignment, and the item's task place returns to the queue for
    other raters. Exactly once by key. Returns how many pairs were skipped."""
    assignment, study = assignment_pair.assignment, assignment_pair.assignment.study
    key = _submission_key(idempotency_key)
    if not study.allow_skip:
        raise ServiceError(_("This study does not offer skipping."))
    if reason not in Skip.Reason.values:
        raise ServiceError(_("Choose why you skip this item."))
    if assignment_pair.gold_id is not None:
        raise ServiceError(_("Please answer this pair; it cannot be skipped."))
    if Skip.objects.filter(idempotency_key=key, rater_id=assignment.rater_id).exists():
        return 0
    _check_can_answer(assignment_pair)
    item_id = Pair.objects.filter(pk=_study_pair_id(assignment_pair)).values_list("item_id", flat=True).get()
    open_pairs = list(
        assignment.pairs.filter(
            pair__item_id=item_id, judgment__isnull=True, skip__isnull=True, ranking__isnull=True
        ).values_list("pk", flat=True)
    )
    if not open_pairs:
        return 0
    now = timezone.now()
    try:
        with transaction.atomic():
            completed = _count_answer(assignment, now, len(open_pairs))
            Skip.objects.bulk_create(
                Skip(
                    assignment_pair_id=pk, rater_id=assignment.rater_id, reason=reason, idempotency_key=key, created=now
                )
                for pk in open_pairs
            )
            place = AssignmentTask.objects.filter(assignment=assignment, item_id=item_id, slot__isnull=False)
            freed = list(place.values_list("task_id", flat=True))
            place.update(slot=None)
            Task.objects.filter(pk__in=freed).update(taken=Greatest(F("taken") - 1, 0))
    except IntegrityError:
        return 0  # a repeat of this skip (or an answer that arrived first) won
    if completed:
        _after_completion(assignment)
    return len(open_pairs)


def _after_completion(assignment: Assignment) -> None:
    """A completed assignment lets the plan react, in one transaction: the system pairs it had places in that are
    now decided stop getting new places (when the study stops buying decided pairs); a live selection loop
    (iterative DiffUse) releases its next items (they get their tasks in the plan wing), and the judgments of items
    that left its decision set are flagged superseded -- kept and exported, not counted -- and back when they
    return."""
    with transaction.atomic():
        planning.do_close_decided_pairs(assignment)
        for release in planning.do_advance_live_selection(assignment):
            judgments = Judgment.objects.filter(
                study=assignment.study,
                assignment__places__item_id=F("pair__item_id"),
                assignment__places__task__comparison=release.comparison,
            )
            judgments.exclude(pair__item_id__in=release.counted).filter(superseded=False).update(superseded=True)
            judgments.filter(pair__item_id__in=release.counted, superseded=True).update(superseded=False)


def do_claim_next(assignment: Assignment) -> None:
    """For the rating page: an active assignment whose held pairs are all answered takes its next task (the
    submit that answered the last one could not: other starts held every open task at that moment)."""
    with transaction.atomic():
        row = (
            Assignment.objects.select_for_update()
            .filter(pk=assignment.pk, status=Assignment.Status.ACTIVE)
            .values("n_pairs", "answered", "unclaimed")
            .first()
        )
        if row is None or not row["unclaimed"] or row["answered"] < row["n_pairs"]:
            return
        assignment.n_pairs, assignment.unclaimed = row["n_pairs"], row["unclaimed"]
        completed = allocation.do_try_claim_next(assignment, timezone.now())
    if completed:
        _after_completion(assignment)


def do_revise_judgment(
    assignment_pair: AssignmentPair,
    *,
    idempotency_key: str,
    answer: elicitation.Answer,
    client_time_ms: int | None = None,
    comment: str = "",
    further: Mapping[str, elicitation.Answer | str] | None = None,
) -> Recorded:
    """Replace the rater's answer to a pair of their active assignment: a new judgment takes the pair, the
    one it replaces stays stored, flagged ``revised`` (exported, left out of the analysis). Exactly once: a
    repeated key returns the judgment it stored; the assignment's answer count does not change."""
    assignment, study = assignment_pair.assignment, assignment_pair.assignment.study
    key = _submission_key(idempotency_key)
    if assignment_pair.gold_id is not None:
        raise ServiceError(_("That answer cannot be changed."))
    repeat = Judgment.objects.filter(study=study, idempotency_key=key).first()
    if repeat is not None:
        return Recorded(repeat, False)
    mode = _checked_mode(study, answer)
    stored = mode.to_model(answer, assignment_pair.a_shown_first)
    answers = _further(study, further, assignment_pair.a_shown_first)
    now = timezone.now()
    try:
        with transaction.atomic():
            # the assignment's row lock orders revisions of its pairs; a finished one keeps its answers
            if not Assignment.objects.filter(pk=assignment.pk, status=Assignment.Status.ACTIVE).update(
                last_activity=now
            ):
                raise ServiceError(_("This assignment is finished, so its answers can no longer be changed."))
            if not Judgment.objects.filter(assignment_pair=assignment_pair).update(assignment_pair=None, revised=True):
                raise ServiceError(_("There is no answer to change on that pair yet."))
            judgment = Judgment.objects.create(
                study=study,
                rater_id=assignment.rater_id,
                pair_id=_study_pair_id(assignment_pair),
                assignment=assignment,
                assignment_pair=assignment_pair,
                a_shown_first=assignment_pair.a_shown_first,
                **stored.fields(),
                created=now,
                shown_at=assignment_pair.shown_at,
                idempotency_key=key,
                client_time_ms=_client_ms(client_time_ms),
                comment=comment if study.allow_comment else "",
                answers=answers,
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


EXPIRED_MESSAGE = gettext_lazy(
    "This assignment expired after a long pause and its pairs went back to the queue; "
    "your answers so far are kept. Start a new assignment to continue."
)


def _racing_repeat(model: type[Judgment] | type[Ranking], assignment_pair: AssignmentPair, study: Study, key: str):
    """After an answer's insert hit a unique constraint: the answer stored first -- the place's own (a racing
    repeat), else the key's -- or None (another constraint: the caller re-raises). The key of an answer to another
    place is refused: acknowledging it would lose this answer without a word."""
    previous = (
        model.objects.filter(assignment_pair=assignment_pair).first()
        or model.objects.filter(study=study, idempotency_key=key).first()
    )
    if previous is not None and previous.assignment_pair_id != assignment_pair.pk:
        raise ServiceError(
            _("This answer's submission key was already used for another pair; reload the page and answer again.")
        ) from None
    return previous


def _check_not_skipped(assignment_pair: AssignmentPair) -> None:
    """Inside an answer's transaction, after ``_count_answer`` took the assignment's row lock (so a skip of the same
    place is either committed and seen here, or waits for this answer): a skipped place takes no answer -- its item's
    place went back to the queue and it counts as done already; answering it too would count it twice."""
    if Skip.objects.filter(assignment_pair=assignment_pair).exists():
        raise ServiceError(_("You skipped this item, so this answer to it was not stored."))


def _check_can_answer(assignment_pair: AssignmentPair) -> None:
    assignment, study = assignment_pair.assignment, assignment_pair.assignment.study
    if assignment.status == Assignment.Status.EXPIRED:
        raise ServiceError(str(EXPIRED_MESSAGE))
    shown_at = assignment_pair.shown_at
    if shown_at is None:
        # Only the pair on the rater's screen can be answered: the rating page marks a pair shown when it shows
        # it, one at a time, so an answer to a pair further on (a guessed id) is refused, and every answer has
        # a server-measured time on task that the minimum time applies to.
        raise ServiceError(_("That pair has not been shown to you yet: answer the pair on your screen."))
    minimum = study.crowd_settings.min_seconds_per_pair
    if minimum:
        elapsed = (timezone.now() - shown_at).total_seconds()
        if elapsed < minimum:
            raise ServiceError(
                ngettext(
                    "Please read both outputs before answering: take at least %(seconds)d second per pair.",
                    "Please read both outputs before answering: take at least %(seconds)d seconds per pair.",
                    minimum,
                )
                % {"seconds": minimum}
            )


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
            gold_answer = GoldAnswer.objects.create(
                assignment_pair=assignment_pair,
                rater_id=assignment.rater_id,
                correct=correct,
                idempotency_key=key,
                answer=mode.describe(answer),
            )
    except IntegrityError:
        return Recorded(None, False, GoldAnswer.objects.get(assignment_pair=assignment_pair))
    _screen(assignment.rater)
    if completed:
        _after_completion(assignment)
    return Recorded(None, True, gold_answer)


def _study_pair_id(assignment_pair: AssignmentPair) -> int:
    """The pair of an assignment pair its caller found to be no attention check (``gold_id`` is None)."""
    # Exactly one of pair and gold is set (the apair_pair_xor_gold constraint): without a gold pair, a study pair.
    return cast(int, assignment_pair.pair_id)


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
    """The study's elicitation mode, once it has accepted the answer (a refusal names the main question when the
    page asks several)."""
    try:
        return questions.check_main(study, answer)
    except elicitation.AnswerError as exc:
        raise ServiceError(str(exc)) from exc


def _further(study: Study, further: Mapping[str, elicitation.Answer | str] | None, a_shown_first: bool) -> dict:
    """The further questions' answers as stored on the judgment, once every one is answered as it asks."""
    try:
        return questions.to_model(study, further or {}, a_shown_first)
    except elicitation.AnswerError as exc:
        raise ServiceError(str(exc)) from exc
