"""What raters answer: judgments and skips, attention checks (gold pairs) with their answers, and practice
answers."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from annotation import elicitation as elicitation_modes
from annotation.models.items import Generation, Item
from annotation.models.plan import Pair
from annotation.models.raters import Assignment, AssignmentPair, Rater
from annotation.models.studies import Study, Upload


class JudgmentQuerySet(models.QuerySet):
    """Which judgments an analysis reads, defined once: every reader of judgments (rating sets, the report, the
    review queue, the live loop, the decisions, the arena's votes, the preference records) starts from these."""

    def analysed(self) -> JudgmentQuerySet:
        """The judgments an analysis reads: the current answer of each rater on each pair (a revised one was
        replaced), on items no researcher excluded (``Item.excluded``: kept and exported, never analysed).
        Superseded ones are still here, for the readers that count them (the report says how many)."""
        return self.filter(revised=False, pair__item__excluded=False)

    def counted(self) -> JudgmentQuerySet:
        """The judgments that count: analysed and not superseded (set aside by the live loop or a flagged battle)."""
        return self.analysed().filter(superseded=False)


class Ranking(models.Model):
    """One rater's answer on several outputs of one item at once: a ranking of them (best first) or, in best-worst
    scaling, the best and the worst of those shown. Never read as such by an analysis: it is stored with the pairwise
    judgments it implies (``Judgment.ranking``, ``annotation/implied_pairs.py``), which every reader of judgments reads
    like any other, created in the same transaction by ``annotation/rating/rankings.py`` and removed with it."""

    class Kind(models.TextChoices):
        RANK = "rank", "Ranking"
        BEST_WORST = "best_worst", "Best and worst"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="rankings")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="rankings")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="rankings")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    assignment = models.ForeignKey(Assignment, null=True, blank=True, on_delete=models.CASCADE, related_name="rankings")
    assignment_pair = models.OneToOneField(
        AssignmentPair,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="ranking",
        help_text="The rater's screen it answers (a place of the assignment, its item's task), for an answer given "
        "here; none for an imported one.",
    )
    shown = models.JSONField(help_text="The outputs shown, as generation ids in display order (top first).")
    order = models.JSONField(
        null=True, blank=True, help_text="A ranking's outputs best first, as generation ids; null for best-worst."
    )
    best = models.ForeignKey(Generation, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    worst = models.ForeignKey(Generation, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    comment = models.TextField(blank=True, default="", help_text="The rater's optional comment on the outputs.")
    created = models.DateTimeField(default=timezone.now, help_text="When the answer was given.")
    recorded = models.DateTimeField(auto_now_add=True, help_text="When the server stored it.")
    time_on_task_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Server-measured.")
    client_time_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Browser-measured.")
    idempotency_key = models.CharField(max_length=64)
    extra = models.JSONField(default=dict, blank=True, help_text="Unknown fields of an imported line, kept.")

    class Meta:
        ordering = ["created", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "idempotency_key"], name="ranking_unique_key"),
            models.CheckConstraint(
                condition=models.Q(kind="rank", order__isnull=False, best__isnull=True, worst__isnull=True)
                | models.Q(kind="best_worst", order__isnull=True, best__isnull=False, worst__isnull=False),
                name="ranking_answer_of_its_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.idempotency_key} by rater {self.rater_id}"


class Judgment(models.Model):
    """One rater's answer on one pair: a person's, an LLM judge's or an imported one, created only by
    ``annotation/rating/recording.py``."""

    class Choice(models.TextChoices):
        A = "a", "A"
        B = "b", "B"
        TIE = "tie", "Tie"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judgments")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="judgments")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="judgments")
    assignment = models.ForeignKey(
        Assignment, null=True, blank=True, on_delete=models.CASCADE, related_name="judgments"
    )
    assignment_pair = models.OneToOneField(
        AssignmentPair, null=True, blank=True, on_delete=models.CASCADE, related_name="judgment"
    )
    a_shown_first = models.BooleanField()
    choice = models.CharField(max_length=3, choices=Choice.choices, null=True, blank=True)
    response_set = models.JSONField(
        null=True, blank=True, help_text='Subset of ["a", "b"], model coordinates; [] = no output acceptable.'
    )
    strength = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[
            MinValueValidator(min(elicitation_modes.STRENGTHS)),
            MaxValueValidator(max(elicitation_modes.STRENGTHS)),
        ],
        help_text="Preference scale: 1 = better, 2 = much better (the choice says which output).",
    )
    probability_a = models.FloatField(null=True, blank=True)
    comment = models.TextField(blank=True, default="", help_text="The rater's optional comment on the pair.")
    created = models.DateTimeField(default=timezone.now, help_text="When the judgment was made.")
    recorded = models.DateTimeField(auto_now_add=True, help_text="When the server stored it.")
    shown_at = models.DateTimeField(null=True, blank=True)
    time_on_task_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Server-measured.")
    client_time_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Browser-measured.")
    idempotency_key = models.CharField(max_length=64)
    superseded = models.BooleanField(default=False)
    revised = models.BooleanField(
        default=False,
        help_text="Replaced by the rater's later answer to the same pair in the same assignment: "
        "kept and exported, left out of the analysis.",
    )
    extra = models.JSONField(default=dict, blank=True, help_text="Unknown fields of an imported line, kept.")
    ranking = models.ForeignKey(
        Ranking,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="implied",
        help_text="The ranking or best-worst answer this judgment is implied by (annotation/implied_pairs.py).",
    )
    answers = models.JSONField(
        default=dict,
        blank=True,
        help_text="The answers to the study's further questions by key (annotation/questions.py), model coordinates.",
    )

    objects = JudgmentQuerySet.as_manager()

    class Meta:
        ordering = ["created", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "idempotency_key"], name="judgment_unique_key"),
        ]
        indexes = [models.Index(fields=["study", "created"])]

    def __str__(self) -> str:
        return f"judgment {self.idempotency_key} by rater {self.rater_id}"


class StagedJudgment(models.Model):
    """A line of a judgments file the worker is importing (``annotation/rating/imports.py``): staged in short steps,
    never read as a judgment, and published -- its rater, its output pair and the judgment made -- in one
    transaction once the whole file is staged, so no report, export or plan ever counts part of a file. Removed with
    its upload; a crashed import resumes after the lines already staged."""

    upload = models.ForeignKey(Upload, on_delete=models.CASCADE, related_name="staged_judgments")
    rater_external_id = models.CharField(max_length=200)
    rater_kind = models.CharField(max_length=10, choices=Rater.Kind.choices)
    generation_a = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="+")
    generation_b = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="+")
    # the judgment's own columns, as Judgment has them
    a_shown_first = models.BooleanField()
    choice = models.CharField(max_length=3, choices=Judgment.Choice.choices, null=True, blank=True)
    response_set = models.JSONField(null=True, blank=True)
    strength = models.PositiveSmallIntegerField(null=True, blank=True)
    probability_a = models.FloatField(null=True, blank=True)
    comment = models.TextField(blank=True, default="")
    created = models.DateTimeField()
    time_on_task_ms = models.PositiveIntegerField(null=True, blank=True)
    client_time_ms = models.PositiveIntegerField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=64)
    superseded = models.BooleanField(default=False)
    revised = models.BooleanField(default=False)
    extra = models.JSONField(default=dict, blank=True)
    answers = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["upload", "idempotency_key"], name="staged_judgment_unique_key"),
        ]

    def __str__(self) -> str:
        return f"staged judgment {self.idempotency_key} of upload {self.upload_id}"


class Skip(models.Model):
    """A pair the rater skipped, with the reason: never a judgment; the item's place went back to the queue."""

    class Reason(models.TextChoices):
        CANNOT_JUDGE = "cannot_judge", "I cannot judge this (outside what I know)"
        UNREADABLE = "unreadable", "The input or an output is unreadable or broken"
        OFFENSIVE = "offensive", "The content is offensive or disturbing"
        OTHER = "other", "Another reason"

    assignment_pair = models.OneToOneField(AssignmentPair, on_delete=models.CASCADE, related_name="skip")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="skips")
    reason = models.CharField(max_length=20, choices=Reason.choices)
    idempotency_key = models.CharField(max_length=64)
    created = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"skip of assignment pair {self.assignment_pair_id} ({self.reason})"


class GoldPair(models.Model):
    """An attention check: an input with a good and a deliberately bad output. Shown like any pair;
    the answer is scored, never mixed into the study's judgments."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="gold_pairs")
    input = models.TextField()
    good_output = models.TextField()
    bad_output = models.TextField()
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"gold {self.pk} of study {self.study_id}"


class GoldAnswer(models.Model):
    assignment_pair = models.OneToOneField(AssignmentPair, on_delete=models.CASCADE, related_name="gold_answer")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="gold_answers")
    answer = models.CharField(max_length=20, help_text="The answer as displayed, e.g. first, second:2, first,second.")
    correct = models.BooleanField()
    idempotency_key = models.CharField(max_length=64)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"gold answer {self.pk} ({'right' if self.correct else 'wrong'})"


class PracticeAnswer(models.Model):
    """A rater's answer to a practice pair (an attention check shown with feedback before their first real pair):
    never a judgment, never an attention-check result, in no analysis."""

    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="practice_answers")
    gold = models.ForeignKey(GoldPair, on_delete=models.CASCADE, related_name="practice_answers")
    a_shown_first = models.BooleanField(help_text="Whether the good output was shown first.")
    answer = models.CharField(max_length=20, help_text="The answer as displayed, e.g. first, second:2, first,second.")
    correct = models.BooleanField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        # One answer per practice pair per rater: a double submit or a reload stores it once.
        constraints = [models.UniqueConstraint(fields=["rater", "gold"], name="practice_unique_rater_gold")]

    def __str__(self) -> str:
        outcome = "right" if self.correct else "wrong"
        return f"practice answer of rater {self.rater_id} on gold {self.gold_id} ({outcome})"
