"""The practice round: before their first real pair a new human rater answers a few of the study's attention checks
(``GoldPair``: one good and one deliberately worse output), each shown like a real pair on random sides, and sees
after each whether their answer matched. Practice answers are ``PracticeAnswer`` rows: never judgments, never
attention-check results, in no analysis. A rater practises once (``Rater.practice_done_at``)."""

from __future__ import annotations

import dataclasses
import random

from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy

from annotation import elicitation, orientation
from annotation.errors import ServiceError
from annotation.models import GoldPair, PracticeAnswer, Rater
from annotation.rating import allocation
from annotation.text import whole_number

# What the feedback says after every practice answer: the rule an attention check follows.
RULE = gettext_lazy(
    "In a practice pair one output is deliberately worse (for example its words are shuffled into "
    "nonsense, or it does not answer the input): the expected answer is the other output, the one a "
    "careful reader prefers."
)


def needed(rater: Rater) -> bool:
    """Whether the rater has a practice round to do before their next real pair (one query when the study asks for
    practice and the rater has not done it; none otherwise)."""
    study = rater.study
    return (
        rater.kind == Rater.Kind.HUMAN
        and study.practice_pairs > 0
        and rater.practice_done_at is None
        and study.gold_pairs.exists()
    )


def due(rater: Rater) -> bool:
    """Whether the rater is sent to practise now: they have a practice round to do and the study still has work for
    them (nobody practises for work that is gone). The one rule for every way in (own link, open link, crowd)."""
    return needed(rater) and bool(allocation.open_places(rater.study))


def good_first(rater: Rater, gold_id: int) -> bool:
    """The side the good output of a practice pair is shown on for this rater: random, the same on every reload."""
    return random.Random(f"{rater.study.seed}:{rater.pk}:{gold_id}:practice-side").random() < 0.5


def plan(rater: Rater, answered: list[int]) -> list[int]:
    """The gold pairs of the rater's practice round, in order: those already answered (in the order answered),
    then the others in a random order seeded by the study's seed and the rater, up to the study's practice pairs
    (fewer when the study has fewer attention checks). Answered pairs stay first, so adding attention checks
    while a rater practises never changes what they already did."""
    golds = sorted(GoldPair.objects.filter(study=rater.study_id).values_list("pk", flat=True))
    rest = [g for g in golds if g not in set(answered)]
    random.Random(f"{rater.study.seed}:{rater.pk}:practice").shuffle(rest)
    return ([g for g in answered if g in set(golds)] + rest)[: rater.study.practice_pairs]


@dataclasses.dataclass
class Step:
    """One practice pair as the page shows it: the pair, its place in the round, its sides, and its answer once
    given."""

    gold: GoldPair
    number: int
    total: int
    a_shown_first: bool  # the gold pair's good output is its "a"
    answer: PracticeAnswer | None = None

    @property
    def shown(self) -> tuple[str, str, str]:
        """(input, first shown, second shown)."""
        return (
            self.gold.input,
            *orientation.in_display_order(self.gold.good_output, self.gold.bad_output, self.a_shown_first),
        )

    @property
    def expected(self) -> str:
        """Where the good output is shown: "first" or "second"."""
        return orientation.to_display("a", self.a_shown_first)

    @property
    def last(self) -> bool:
        return self.number == self.total


def in_words(stored: str, study) -> str:
    """A practice answer as kept (``Mode.describe``: "first", "second:2", "first,second", "tie" ...) in the words
    the rater saw."""
    names = {
        elicitation.FIRST: gettext("Output 1"),
        elicitation.SECOND: gettext("Output 2"),
        elicitation.TIE: study.tie_label,
        elicitation.BOTH_BAD: study.neither_label,
        elicitation.NEITHER: study.neither_label,
    }
    choice, _, strength = stored.partition(":")
    if "," in stored or stored == "":
        parts = [names.get(p, p) for p in stored.split(",") if p]
        return gettext(" and ").join(parts) if parts else gettext("no output")
    words = names.get(choice, choice)
    if whole_number(strength) in elicitation.STRENGTHS:
        words += f" ({elicitation.strength_words(int(strength))})"
    return words


def _answers(rater: Rater) -> dict[int, PracticeAnswer]:
    return {a.gold_id: a for a in PracticeAnswer.objects.filter(rater=rater).order_by("id")}


def _step(rater: Rater, gold_id: int, order: list[int], answer: PracticeAnswer | None) -> Step:
    gold = GoldPair.objects.get(pk=gold_id)
    return Step(
        gold,
        order.index(gold_id) + 1,
        len(order),
        answer.a_shown_first if answer else good_first(rater, gold_id),
        answer,
    )


def current(rater: Rater) -> Step | None:
    """The practice pair the rater answers next, or None when the round is over (or has nothing to show)."""
    answers = _answers(rater)
    order = plan(rater, list(answers))
    gold_id = next((g for g in order if g not in answers), None)
    return None if gold_id is None else _step(rater, gold_id, order, None)


def answered(rater: Rater, gold_id: int) -> Step | None:
    """The rater's answered practice pair ``gold_id`` with its answer (the feedback page), or None."""
    answers = _answers(rater)
    if gold_id not in answers:
        return None
    return _step(rater, gold_id, plan(rater, list(answers)), answers[gold_id])


def do_answer(rater: Rater, gold_id: int, answer: elicitation.Answer) -> Step:
    """Score the rater's answer to a practice pair and store it once (a double submit or a reload returns the
    stored one); the round is marked done with its last answer. Never a judgment, never a gold answer."""
    study = rater.study
    answers = _answers(rater)
    order = plan(rater, list(answers))
    if gold_id in answers:
        return _step(rater, gold_id, order, answers[gold_id])
    if gold_id not in order:
        raise ServiceError(gettext("That practice pair is not part of your practice; reload the page."))
    mode = elicitation.mode_of(study)
    try:
        mode.validate(study, answer)
    except elicitation.AnswerError as exc:
        raise ServiceError(str(exc)) from exc
    a_first = good_first(rater, gold_id)
    correct = mode.gold_correct(answer, orientation.to_display("a", a_first))
    try:
        with transaction.atomic():
            stored = PracticeAnswer.objects.create(
                rater=rater, gold_id=gold_id, a_shown_first=a_first, answer=mode.describe(answer), correct=correct
            )
    except IntegrityError:  # the same answer arriving twice at once
        stored = PracticeAnswer.objects.get(rater=rater, gold_id=gold_id)
    if all(g in answers or g == gold_id for g in order):
        do_finish(rater)
    return _step(rater, gold_id, order, stored)


def do_finish(rater: Rater) -> None:
    """The rater's practice round is over: they never practise again in this study."""
    if rater.practice_done_at is None:
        now = timezone.now()
        Rater.objects.filter(pk=rater.pk, practice_done_at__isnull=True).update(practice_done_at=now)
        rater.practice_done_at = now


def counts() -> dict:
    """A rater's practice answers, right and in all, as annotations of a ``Rater`` query."""
    return {
        "practice_total": Count("practice_answers", distinct=True),
        "practice_right": Count("practice_answers", filter=Q(practice_answers__correct=True), distinct=True),
    }


def before_first_pair(study) -> list[Rater]:
    """The study's human raters who agreed to its consent text or practised, with their practice counts (the crowd
    page's table); none when the study has neither step and nobody practised."""
    if not (study.consent_text or study.practice_pairs or PracticeAnswer.objects.filter(rater__study=study).exists()):
        return []
    return list(
        Rater.objects.filter(study=study, kind=Rater.Kind.HUMAN)
        .filter(Q(consented_at__isnull=False) | Q(practice_answers__isnull=False))
        .annotate(**counts())
        .order_by("id")
    )
