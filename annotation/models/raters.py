"""Who judges and what they hold: raters (people, judges, imported), their assignments, the task places an
assignment holds and the pairs it shows."""

from __future__ import annotations

from django.core import signing
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from annotation.models.items import Item
from annotation.models.plan import Pair, Task
from annotation.models.studies import Study, new_completion_code, new_nonce

RATER_TOKEN_SALT = "seplab.rater-link"

DEFAULT_SECONDS_PER_PAIR = 30.0  # the time estimate before a study has enough timed human judgments


class Rater(models.Model):
    class Kind(models.TextChoices):
        HUMAN = "human", "Human"
        JUDGE = "judge", "Judge"

    class Source(models.TextChoices):
        PERSONAL_LINK = "personal_link", "Personal link"
        OPEN_LINK = "open_link", "Open link"
        IMPORT = "import", "Imported"
        EXTERNAL = "external", "Crowdsourcing site"
        RUN = "run", "Judge run by SepLab"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="raters")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.HUMAN)
    external_id = models.CharField(max_length=200)
    source = models.CharField(max_length=20, choices=Source.choices)
    token_nonce = models.CharField(max_length=32, default=new_nonce)
    created = models.DateTimeField(auto_now_add=True)
    screened_out = models.BooleanField(default=False, help_text="Failed the study's attention checks: no more work.")
    revoked = models.BooleanField(
        default=False,
        help_text="The researcher revoked this rater's link: it no longer opens anything (their judgments are kept).",
    )
    consented_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the rater agreed to the study's consent text (empty: not asked, or not agreed).",
    )
    consent_text_hash = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="SHA-256 of the consent text the rater agreed to (the text may be edited while a study runs).",
    )
    practice_done_at = models.DateTimeField(
        null=True, blank=True, help_text="When the rater finished the practice round: they never repeat it."
    )
    client = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_default="",
        help_text="The network a crowd worker or open-link visitor last arrived from (an IPv4 "
        "address or an IPv6 /64): how many unanswered places one network may hold.",
    )

    # Not columns: what a page computes for the raters it lists, set on the instances it read.
    median_long_seconds: float | None  # annotation/studies/monitoring.rater_progress (None: no long pair timed)
    too_fast: bool  # the same: that median is implausibly fast
    completed: int  # the same: completed assignments
    active: int  # the same: active assignments
    n_judgments: int  # the same: judgments, an answer the rater changed once
    n_skipped: int  # the same: skipped pairs
    flagged: bool  # the crowd page (annotation/views/crowd.py): below the accuracy bar, not screened out yet

    # Who holds places only as work is shown to them: anyone can become one of these raters (an invented worker id,
    # a visit to the open link), so until they answer they hold the task on their screen and no more, and only for
    # the study's first-answer window (annotation/rating/allocation.py).
    ANONYMOUS_SOURCES = (Source.EXTERNAL, Source.OPEN_LINK)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["study", "external_id"], name="rater_unique_id")]

    def __str__(self) -> str:
        return self.external_id

    def token(self) -> str:
        return signing.Signer(salt=RATER_TOKEN_SALT).sign_object({"r": self.pk, "n": self.token_nonce}, compress=True)

    def link_path(self) -> str:
        return reverse("rater_home", args=[self.token()])

    @property
    def site_identity(self) -> tuple[str, str]:
        """(platform, worker id) of a worker who came from a crowdsourcing site."""
        platform, _, worker = self.external_id.partition(":")
        return (platform, worker) if self.source == self.Source.EXTERNAL else ("", "")


class Assignment(models.Model):
    """One rater's copy of one task: the N pairs, each with its own display order."""

    class Status(models.TextChoices):
        ACTIVE = "active", "In progress"
        COMPLETED = "completed", "Completed"
        EXPIRED = "expired", "Expired"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="assignments")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    created = models.DateTimeField(auto_now_add=True)
    completed = models.DateTimeField(null=True, blank=True)
    last_activity = models.DateTimeField(default=timezone.now, help_text="Creation or the latest answer.")
    completion_code = models.CharField(max_length=16, default=new_completion_code)
    n_pairs = models.PositiveSmallIntegerField(default=0, help_text="Pairs shown, attention checks included.")
    seconds_per_pair = models.FloatField(
        default=DEFAULT_SECONDS_PER_PAIR,
        help_text="The study's median time per pair when the assignment started: the rating page's estimate of the "
        "time left.",
    )
    answered = models.PositiveSmallIntegerField(
        default=0,
        help_text="Pairs answered so far, kept in step by the submit's one UPDATE (which completes the "
        "assignment when it reaches n_pairs and nothing is left to claim).",
    )
    unclaimed = models.PositiveSmallIntegerField(
        default=0,
        db_default=0,
        help_text="Study pairs this assignment will still take, a task at a time as its rater reaches them (crowd "
        "workers and open-link visitors hold only what they are shown).",
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["rater"], condition=Q(status="active"), name="assignment_one_active_per_rater"
            ),
        ]

    def __str__(self) -> str:
        return f"assignment {self.pk} of rater {self.rater_id}"


class AssignmentTask(models.Model):
    """A task's rater place held by an assignment. An assignment bundles several tasks (items, each with its
    N sampled pairs) up to the study's judgments per assignment."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="places")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="places")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    slot = models.PositiveSmallIntegerField(
        null=True, help_text="Which of the task's rater places this holds; NULL frees the place."
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            # A rater never sees the same item twice, and a task place is held by one rater at most;
            # the database enforces both, so concurrent requests cannot break them.
            models.UniqueConstraint(fields=["rater", "item"], name="place_unique_rater_item"),
            models.UniqueConstraint(fields=["task", "slot"], name="place_unique_task_slot"),
        ]

    def __str__(self) -> str:
        return f"place {self.slot} of task {self.task_id} in assignment {self.assignment_id}"


class AssignmentPair(models.Model):
    """One pair shown in an assignment: a study pair (``pair``) or an attention check (``gold``)."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="pairs")
    pair = models.ForeignKey(Pair, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    gold = models.ForeignKey("GoldPair", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveSmallIntegerField()
    a_shown_first = models.BooleanField()
    shown_at = models.DateTimeField(null=True, blank=True, help_text="Server time the pair was first shown.")

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "position"], name="apair_unique_position"),
            models.UniqueConstraint(fields=["assignment", "pair"], name="apair_unique_pair"),
            models.CheckConstraint(condition=Q(pair__isnull=True) ^ Q(gold__isnull=True), name="apair_pair_xor_gold"),
        ]

    def __str__(self) -> str:
        return f"assignment {self.assignment_id} pair {self.position}"
