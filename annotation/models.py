"""The annotation data model: studies, what is compared, who judges, and every judgment.

Coordinates: *A/B* are model coordinates (``Pair.generation_a`` belongs to ``system_a`` of the
comparison); *first/second* are display coordinates (what the rater saw on the left / on top).
Every judgment stores ``a_shown_first`` so both can always be recovered.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from annotation import elicitation as elicitation_modes
from annotation import questions, rendering
from annotation.outbound import EndpointRefused, check_endpoint
from annotation.secrets_at_rest import SealedTextField

RATER_TOKEN_SALT = "seplab.rater-link"
OPEN_LINK_SALT = "seplab.open-link"
EXTERNAL_LINK_SALT = "seplab.external-link"


def new_seed() -> int:
    return secrets.randbelow(2**31)


def new_nonce() -> str:
    return secrets.token_urlsafe(8)


def new_completion_code() -> str:
    # No 0/O or 1/I: codes are read and typed by people.
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    return "".join(secrets.choice(alphabet) for _ in range(10))


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


DEFAULT_SECONDS_PER_PAIR = 30.0  # the time estimate before a study has enough timed human judgments


def word_count(text: str) -> int:
    return len(text.split())


def rater_languages() -> list[tuple[str, str]]:
    """The choices of ``Study.raters_language``: the rater's browser, or one of the languages shipped."""
    return [("", "The rater's browser"), *settings.LANGUAGES]


class Study(models.Model):
    class PairMode(models.TextChoices):
        ALL = "all", "All system pairs"
        BASELINE = "baseline", "Each system against a baseline"
        EXPLICIT = "explicit", "An explicit list of pairs"

    class SamplePairing(models.TextChoices):
        ONE_TO_ONE = "one_to_one", "One-to-one: each sample shown once (the paper)"
        GRID = "grid", "Grid: any N of the K_A × K_B pairs"

    class Scheduling(models.TextChoices):
        RANDOM = "random", "Random: one random system pair per item, random display order"
        NO_REPEAT = "no_repeat", "No-repeat: every system pair once per item, random display order"
        SYMMETRIC = "symmetric", "Symmetric: every system pair, both display orders equally often"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="studies")
    name = models.CharField(max_length=200, help_text="Unique among the owner's studies.")
    description = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    # What raters are asked and how they answer (docs/indeterminacy.md#options-and-elicitation-modes).
    elicitation = models.CharField(
        max_length=20,
        choices=elicitation_modes.CHOICES,
        default=elicitation_modes.ForcedChoice.name,
        help_text="How raters answer: one registered mode of annotation/elicitation.py.",
    )
    allow_tie = models.BooleanField(default=True, help_text="Offer a third option besides the two outputs.")
    tie_label = models.CharField(max_length=60, default="No preference")
    neither_option = models.BooleanField(
        default=False,
        help_text="Offer 'neither is acceptable / both are bad': a forced choice gets it as an "
        "option (a tie in ratings, no output acceptable in indeterminacy); a response set may then be empty.",
    )
    neither_label = models.CharField(max_length=60, default="Both are bad")
    allow_skip = models.BooleanField(
        default=False,
        help_text="Let raters skip an item, with a reason: stored as a "
        "skip, and the item's place returns to the queue.",
    )
    allow_comment = models.BooleanField(
        default=False, help_text="Offer an optional free-text comment per pair (stored with the judgment and exported)."
    )
    question = models.CharField(max_length=500, default="Which output is better?")
    also_acceptable_question = models.CharField(
        max_length=500, default="Which other outputs are also acceptable?", help_text="Paired elicitation only."
    )
    response_set_question = models.CharField(
        max_length=500, default="Select every output you find acceptable.", help_text="Response-set elicitation only."
    )
    further_questions = models.TextField(
        blank=True,
        default="",
        db_default="",
        validators=[questions.validate],
        help_text="More questions about every pair, one per line: key | how | question. How: forced_choice, "
        "response_set, paired or preference_scale (a preference, analysed on its own in the report), rationale "
        "(free text the rater must write) or optional rationale. E.g. 'harmless | forced_choice | Which output is "
        "more harmless?'.",
    )
    output_format = models.CharField(
        max_length=10,
        choices=rendering.FORMATS,
        default=rendering.MARKDOWN,
        help_text="How raters see inputs and outputs: rendered Markdown (code highlighted, tables, lists; raw HTML "
        "is shown as text) or plain text. Raters can show either pair's source.",
    )
    instructions = models.TextField(
        default="You will see an input and two outputs written by different systems. "
        "Read both outputs carefully and answer the question for each pair."
    )

    # The consistency protocol (docs/separability.md#the-consistency-protocol) and the comparison plan
    # (docs/comparative-assessment.md#comparison-scheduling).
    pairs_per_assignment = models.PositiveSmallIntegerField(
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(50)],
        help_text="N: sampled output pairs of one item a rater judges in one assignment.",
    )
    sample_pairing = models.CharField(
        max_length=20,
        choices=SamplePairing.choices,
        default=SamplePairing.ONE_TO_ONE,
        help_text="How the N pairs of a rating set are drawn from the K samples of each system. One-to-one is the "
        "paper's protocol (a random matching; at most min(N, K_A, K_B) pairs); the grid allows N > K.",
    )
    raters_per_item = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    judgments_per_assignment = models.PositiveSmallIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(200)],
        help_text="How many pairs one assignment bundles: whole items (each with its N sampled pairs) up to this "
        "size, with one completion code. Crowd sites pay per assignment.",
    )
    pair_mode = models.CharField(max_length=20, choices=PairMode.choices, default=PairMode.ALL)
    baseline = models.ForeignKey("System", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    scheduling = models.CharField(max_length=20, choices=Scheduling.choices, default=Scheduling.RANDOM)
    seed = models.BigIntegerField(
        default=new_seed, help_text="Makes the plan, the selection and the bootstrap reproducible."
    )
    # Other apps' settings are their own rows (annotation/study_settings.py): study.selection_settings,
    # study.analysis_settings, study.crowd_settings.

    open_link_enabled = models.BooleanField(default=False)
    open_link_nonce = models.CharField(max_length=32, default=new_nonce)

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        PAUSED = "paused", "Paused"
        ARCHIVED = "archived", "Archived"
        IMPORTING = "importing", "Importing"

    status = models.CharField(
        max_length=10,
        choices=Status.choices,
        default=Status.ACTIVE,
        help_text="Paused and archived studies give raters no pairs (an answer to a pair already shown is still "
        "stored); archived studies are also left off the study list.",
    )
    public_base_url = models.URLField(
        blank=True,
        help_text="The address raters reach this server at (e.g. https://eval.example.org), used in "
        "every link the study shows and exports. Empty: the site's SITE_URL when it is https, else the address "
        "you are browsing.",
    )
    # Before the first pair (annotation/rating/consent.py, annotation/rating/practice.py).
    consent_text = models.TextField(
        blank=True,
        default="",
        db_default="",
        help_text="What human raters agree to before their first pair (Markdown); empty: no consent step.",
    )
    practice_pairs = models.PositiveSmallIntegerField(
        default=0,
        db_default=0,
        validators=[MaxValueValidator(5)],
        help_text="Attention-check pairs a rater practises on, with feedback, before their first real pair "
        "(never judgments); 0: no practice.",
    )
    raters_language = models.CharField(
        max_length=10,
        blank=True,
        default="",
        db_default="",
        choices=rater_languages,
        help_text="The language of SepLab's own words on rater pages (never the researcher's texts); empty: the one "
        "the rater's browser asks for, among those shipped.",
    )
    fill_items_first = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Raters finish started items before new ones start (depth first), so each item's score is in "
        "early: set from the item chooser while the study stops buying decided pairs (planning).",
    )

    class Meta:
        ordering = ["-created"]
        verbose_name_plural = "studies"
        # Per researcher: a name taken by someone else's study is free (refusing it would reveal that study).
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="study_unique_owner_name")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("study_detail", args=[self.pk])

    @property
    def elicitation_mode(self) -> elicitation_modes.Mode:
        return elicitation_modes.mode_of(self)

    def open_link_token(self) -> str:
        return signing.Signer(salt=OPEN_LINK_SALT).sign_object({"s": self.pk, "n": self.open_link_nonce}, compress=True)

    def open_link_path(self) -> str:
        return reverse("open_link", args=[self.open_link_token()])

    @property
    def accepts_raters(self) -> bool:
        return self.status == self.Status.ACTIVE

    def has_started(self) -> bool:
        """True once any rater holds an assignment: the comparison plan is then frozen."""
        return Assignment.objects.filter(study=self).exists()


class StudyUpload(models.Model):
    """A large study file waiting for its background import (``annotation/studies/creation.py``), removed once
    imported."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="upload")
    filename = models.CharField(max_length=255, blank=True)
    data = models.BinaryField()
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"upload of study {self.study_id}"


class JudgmentUpload(models.Model):
    """A large judgments file, checked in the request, waiting for its background import
    (``annotation/rating/recording.py``); removed once imported."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judgment_uploads")
    filename = models.CharField(max_length=255, blank=True)
    data = models.BinaryField()
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"judgments upload {self.pk} of study {self.study_id}"


class CrowdSettings(models.Model):
    """A study's crowd work and quality control: what a worker may take, when abandoned work returns to the
    queue, attention checks and screening (registered in ``annotation/study_settings.py``)."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True, related_name="crowd_settings")
    max_assignments_per_rater = models.PositiveIntegerField(
        null=True, blank=True, help_text="Most assignments (items) one rater may do; empty means no limit."
    )
    assignment_timeout_minutes = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1)],
        help_text="An assignment with no answer for this long expires and its place returns to the queue.",
    )
    gold_rate = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(0.5)],
        help_text="Share of attention-check (gold) pairs added to each assignment, e.g. 0.2 = one per five pairs.",
    )
    min_seconds_per_pair = models.PositiveIntegerField(
        default=0, help_text="Answers given faster than this (server-measured) are refused with a reminder."
    )
    first_answer_minutes = models.PositiveIntegerField(
        default=5,
        validators=[MinValueValidator(1)],
        help_text="A crowd worker holds their places only once they answer: an assignment with no answer after "
        "this many minutes expires and its places return to the queue.",
    )
    screen_min_gold = models.PositiveIntegerField(
        default=3, help_text="Gold answers needed before a rater's accuracy is judged."
    )
    screen_accuracy = models.FloatField(
        default=0.6,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Raters whose gold accuracy falls below this are screened out (no more work).",
    )
    pay_per_assignment = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="What one assignment (one completion code) pays, in the crowd site's currency; the budget planner "
        "and the study page turn judgments into money with it (empty: not shown).",
    )

    class Meta:
        verbose_name_plural = "crowd settings"

    def __str__(self) -> str:
        return f"crowd settings of study {self.study_id}"

    def below_gold_bar(self, correct: int, answered: int) -> bool:
        """Whether a gold accuracy of ``correct`` of ``answered`` attention checks is below the study's bar
        (the one rule: screening applies it once ``screen_min_gold`` answers are in, the crowd page flags
        it before that)."""
        return answered > 0 and correct / answered < self.screen_accuracy


class System(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="systems")
    name = models.CharField(max_length=200)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="system_unique_name")]

    def __str__(self) -> str:
        return self.name


class Item(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    external_id = models.CharField(max_length=200)
    input = models.TextField()
    reference = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    position = models.PositiveIntegerField(help_text="Order of the item in the imported file.")

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["study", "external_id"], name="item_unique_id")]

    def __str__(self) -> str:
        return self.external_id


class Generation(models.Model):
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="generations")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="generations")
    sample_index = models.PositiveIntegerField()
    text = models.TextField()
    text_hash = models.CharField(max_length=64, db_index=True)
    n_words = models.PositiveIntegerField(default=0, help_text="Words (whitespace-separated) in the text.")
    provenance = models.JSONField(
        null=True,
        blank=True,
        help_text="Where a generated output came from: endpoint, model, parameters, time (none when imported).",
    )

    class Meta:
        ordering = ["item_id", "system_id", "sample_index"]
        constraints = [
            models.UniqueConstraint(fields=["item", "system", "sample_index"], name="generation_unique_sample")
        ]

    def __str__(self) -> str:
        return f"{self.item_id}/{self.system_id}/{self.sample_index}"


class Comparison(models.Model):
    """One system pair the study compares; system_a is model coordinate A."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="comparisons")
    system_a = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    system_b = models.ForeignKey(System, on_delete=models.CASCADE, related_name="+")
    closed = models.BooleanField(
        default=False,
        db_default=False,
        help_text="No new rater places of this pair are given out: its decision is in and the study stops buying "
        "decided pairs (places already held are honoured).",
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "system_a", "system_b"], name="comparison_unique"),
            models.CheckConstraint(condition=~Q(system_a=models.F("system_b")), name="comparison_distinct"),
        ]

    def __str__(self) -> str:
        return f"{self.system_a.name} vs {self.system_b.name}"


class Pair(models.Model):
    """Two generations of one item, in model coordinates (A, B). Display order lives elsewhere."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="pairs")
    generation_a = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="+")
    generation_b = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["generation_a", "generation_b"], name="pair_unique")]

    def __str__(self) -> str:
        return f"pair {self.generation_a_id}/{self.generation_b_id}"


class Task(models.Model):
    """A released unit of work: N sampled pairs of one item for one system pair (a rating set's
    template), to be judged by ``raters_required`` different raters.

    Selection strategies decide *which* items become tasks; the assignment builder hands tasks out.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="tasks")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="tasks")
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="tasks")
    raters_required = models.PositiveSmallIntegerField()
    position = models.PositiveIntegerField(help_text="Release order; lower positions are handed out first.")
    taken = models.PositiveSmallIntegerField(
        default=0,
        help_text="Rater places held (assignments with a slot), kept in step by the assignment "
        "service so finding the next open task reads an index instead of counting.",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["item", "comparison"], name="task_unique_item_comparison")]
        indexes = [
            models.Index(fields=["study", "taken", "position"], name="task_open_order"),  # breadth first
            # depth first (Study.fill_items_first): the open tasks alone, the most raters first. In the index above
            # a backward scan met every full task before the first open one and then had to sort a whole level of
            # open tasks by position: a start took 0.5 s at 10,000 judgments of a 36,000-task study on PostgreSQL.
            models.Index(
                fields=["study", "-taken", "position"],
                condition=Q(taken__lt=F("raters_required")),
                name="task_fill_order",
            ),
        ]

    def __str__(self) -> str:
        return f"task {self.pk}: item {self.item_id}, comparison {self.comparison_id}"


class TaskPair(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="task_pairs")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveSmallIntegerField()
    a_first = models.BooleanField(help_text="Base display order; symmetric scheduling mirrors it for odd slots.")

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["task", "position"], name="taskpair_unique_position")]

    def __str__(self) -> str:
        return f"task {self.task_id} pair {self.position}"


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
    answers = models.JSONField(
        default=dict,
        blank=True,
        help_text="The answers to the study's further questions by key (annotation/questions.py), model coordinates.",
    )

    class Meta:
        ordering = ["created", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "idempotency_key"], name="judgment_unique_key"),
        ]
        indexes = [models.Index(fields=["study", "created"])]

    def __str__(self) -> str:
        return f"judgment {self.idempotency_key} by rater {self.rater_id}"


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


class ExternalLink(models.Model):
    """A link for a crowdsourcing site: the site appends its worker / assignment parameters."""

    class Platform(models.TextChoices):
        MTURK = "mturk", "MTurk-style ExternalQuestion (any compatible site)"
        PROLIFIC = "prolific", "Prolific"
        GENERIC = "generic", "Generic (completion code shown to the worker)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="external_links")
    platform = models.CharField(max_length=10, choices=Platform.choices)
    nonce = models.CharField(max_length=32, default=new_nonce)
    enabled = models.BooleanField(default=True)
    screened_code = models.CharField(
        max_length=16,
        default=new_completion_code,
        help_text="The code screened-out workers get instead of the completion code.",
    )
    site_study_id = models.CharField(
        max_length=100,
        blank=True,
        help_text="Prolific: the study's id on Prolific; visits whose STUDY_ID differs are refused.",
    )
    launch_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(100_000)],
        help_text="New workers this link accepts per minute (empty: the server's default, "
        "SEPLAB_CROWD_LAUNCH_PER_MINUTE; 0: no limit).",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.get_platform_display()} link of {self.study}"

    @property
    def launch_limit(self) -> int:
        """New workers per minute this link accepts; 0: no limit."""
        return settings.SEPLAB_CROWD_LAUNCH_PER_MINUTE if self.launch_per_minute is None else self.launch_per_minute

    def token(self) -> str:
        return signing.Signer(salt=EXTERNAL_LINK_SALT).sign_object({"l": self.pk, "n": self.nonce}, compress=True)

    def path(self) -> str:
        return reverse("external_entry", args=[self.token()])


class WorkerSession(models.Model):
    """One worker's visit from a site (an MTurk assignment, a Prolific session): resumable, bound to
    one of our assignments."""

    link = models.ForeignKey(ExternalLink, on_delete=models.CASCADE, related_name="sessions")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="worker_sessions")
    worker_id = models.CharField(max_length=200)
    session_key = models.CharField(max_length=200, help_text="MTurk assignmentId, Prolific SESSION_ID, or ours.")
    hit_id = models.CharField(max_length=200, blank=True)
    submit_to = models.URLField(blank=True, help_text="MTurk turkSubmitTo (validated against allowed hosts).")
    assignment = models.ForeignKey(
        Assignment, null=True, blank=True, on_delete=models.SET_NULL, related_name="worker_sessions"
    )
    platform_status = models.CharField(
        max_length=20, blank=True, help_text="The site's own status, from the last sync (e.g. Submitted)."
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["link", "session_key"], name="worker_session_unique"),
            # One site session per SepLab assignment: two sessions of one worker racing to start can never
            # both be bound to the worker's one active assignment (each would be reported as answered).
            models.UniqueConstraint(
                fields=["assignment"], condition=Q(assignment__isnull=False), name="worker_session_one_per_assignment"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.link.platform}:{self.worker_id}/{self.session_key}"


class BlockedWorker(models.Model):
    """A researcher's blocklist: these workers get no work in any of the researcher's studies."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="blocked_workers")
    platform = models.CharField(max_length=10, choices=ExternalLink.Platform.choices)
    worker_id = models.CharField(max_length=200)
    reason = models.CharField(max_length=300, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "platform", "worker_id"], name="blocked_unique")]

    def __str__(self) -> str:
        return f"{self.platform}:{self.worker_id}"


class MTurkHIT(models.Model):
    """A HIT this study created through the MTurk API (for existing requesters)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="mturk_hits")
    hit_id = models.CharField(max_length=100, unique=True)
    hit_type_id = models.CharField(max_length=100, blank=True)
    sandbox = models.BooleanField()
    max_assignments = models.PositiveIntegerField()
    reward = models.CharField(max_length=20)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{'sandbox' if self.sandbox else 'live'} HIT {self.hit_id}"


class Endpoint(models.Model):
    """How SepLab talks to one OpenAI-compatible chat-completions endpoint (``annotation/endpoints.py``): where, with
    which key, how hard, and at what price. An LLM judge (``Judge``) and a system whose outputs are generated
    (``SystemEndpoint``) are both one."""

    base_url = models.URLField(
        max_length=500,
        help_text="The endpoint's base URL, e.g. https://api.openai.com/v1 "
        "or http://127.0.0.1:8080/v1 (vLLM, Ollama, llama.cpp).",
    )
    model = models.CharField(max_length=200, help_text="The model name the endpoint expects.")
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        default="OPENAI_API_KEY",
        help_text="Read the API key from this environment variable of the worker (preferred).",
    )
    api_key = SealedTextField(
        blank=True,
        default="",
        help_text="Or a key stored with the study (encrypted, never shown again, never logged); used when set.",
    )
    temperature = models.FloatField(default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)])
    max_tokens = models.PositiveIntegerField(default=400, validators=[MinValueValidator(1), MaxValueValidator(32_000)])
    max_concurrency = models.PositiveSmallIntegerField(
        default=4, validators=[MinValueValidator(1), MaxValueValidator(64)]
    )
    request_budget = models.PositiveIntegerField(
        default=1000,
        validators=[MinValueValidator(1)],
        help_text="Most replies to pay for: the run stops when this many have been received.",
    )
    timeout_seconds = models.FloatField(default=60.0, validators=[MinValueValidator(0.1), MaxValueValidator(3600)])
    max_retries = models.PositiveSmallIntegerField(
        default=4,
        validators=[MaxValueValidator(20)],
        help_text="Retries with backoff on 429, 5xx, timeouts and dropped connections (the openai client's).",
    )
    price_input = models.DecimalField(
        max_digits=10, decimal_places=4, default=0, help_text="US$ per million prompt tokens, for the cost shown."
    )
    price_output = models.DecimalField(
        max_digits=10, decimal_places=4, default=0, help_text="US$ per million completion tokens."
    )
    stop_requested = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True

    def clean(self) -> None:
        super().clean()
        if self.api_key_env and self.api_key_env not in key_variables():
            raise ValidationError({"api_key_env": unknown_key_variable()})
        if self.base_url:
            try:
                check_endpoint(self.base_url, must_resolve=False)
            except EndpointRefused as exc:
                raise ValidationError({"base_url": str(exc)}) from None


class Judge(Endpoint):
    """An LLM judge SepLab runs on a study's pairs through an OpenAI-compatible endpoint
    (``annotation/judges/runner.py``). Its verdicts are the judgments of ``rater`` (kind judge)."""

    class Scope(models.TextChoices):
        SHOWN = "shown", "The pairs released to human raters"
        ALL = "all", "Every item of every system pair (first samples)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judges")
    rater = models.OneToOneField(Rater, on_delete=models.CASCADE, related_name="judge")
    prompt_template = models.TextField(
        help_text="The prompt; {input}, {first}, {second} and {answer_format} are filled in, {question} too if present."
    )
    logprobs = models.BooleanField(
        default=False,
        help_text="Ask for log-probabilities and keep P(A) from the option tokens (not every endpoint returns them).",
    )
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.SHOWN)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.rater.external_id


class SystemEndpoint(Endpoint):
    """A system whose outputs SepLab generates from an OpenAI-compatible endpoint (``annotation/generating/runner.py``):
    ``samples`` outputs per item, each stored as the system's ``Generation`` with its provenance."""

    system = models.OneToOneField(System, on_delete=models.CASCADE, related_name="endpoint")
    system_prompt = models.TextField(
        blank=True, help_text="Sent before each input as the system message (nothing is sent when empty)."
    )
    temperature = models.FloatField(
        default=1.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(2.0)],
        help_text="Above 0, so that the samples of one input differ (separability measures how much).",
    )
    max_tokens = models.PositiveIntegerField(default=1024, validators=[MinValueValidator(1), MaxValueValidator(32_000)])
    samples = models.PositiveSmallIntegerField(
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text="Outputs per input (K). Separability needs at least 2; its paper uses 5.",
    )
    seed = models.BigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(2**31 - 1)],
        help_text="Sent as the request's seed (sample k asks with seed + k) to endpoints that take one; "
        "empty sends none.",
    )

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.system.name


def key_variables() -> list[str]:
    """The environment variables the operator lets judges read their API key from (SEPLAB_JUDGE_KEY_VARIABLES)."""
    return list(settings.SEPLAB_JUDGE_KEY_VARIABLES)


def unknown_key_variable() -> str:
    """Why a judge may not read a variable: the operator's list, never whether the variable exists."""
    allowed = key_variables()
    if not allowed:
        return "This server lets judges use stored keys only: store the key with the judge."
    return (
        "Judges may read their key only from the environment variables the server's operator allows: "
        + ", ".join(allowed)
        + ". Choose one of them, or store the key with the judge."
    )


class JudgeCall(models.Model):
    """One request of a judge on one pair in one display order: the ledger that makes a run resumable (at most
    one per pair and order) and keeps the raw reply."""

    class Status(models.TextChoices):
        JUDGED = "judged", "Judged"
        UNPARSEABLE = "unparseable", "Unparseable"
        FAILED = "failed", "Failed (retried on resume)"

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="calls")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="+")
    a_shown_first = models.BooleanField()
    status = models.CharField(max_length=12, choices=Status.choices)
    reply = models.TextField(blank=True, help_text="The reply's text.")
    problem = models.TextField(blank=True, help_text="Why it is unparseable, or the error after the retries.")
    response = models.JSONField(null=True, blank=True, help_text="The endpoint's whole response, as received.")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    judgment = models.OneToOneField(Judgment, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["judge", "pair", "a_shown_first"], name="judgecall_unique")]

    def __str__(self) -> str:
        return f"{self.judge} on pair {self.pair_id} ({'A' if self.a_shown_first else 'B'} first): {self.status}"


class GenerationCall(models.Model):
    """One request for one output (an item's sample k) of a system generated from an endpoint: the ledger that
    makes generation resumable (at most one per system, item and sample, a database constraint) and keeps what was
    received. A generated call owns the output it stored."""

    class Status(models.TextChoices):
        GENERATED = "generated", "Generated"
        UNUSABLE = "unusable", "Unusable (asked again on resume)"
        FAILED = "failed", "Failed (retried on resume)"

    endpoint = models.ForeignKey(SystemEndpoint, on_delete=models.CASCADE, related_name="calls")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    sample_index = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=12, choices=Status.choices)
    problem = models.TextField(blank=True, help_text="Why the reply is unusable, or the error after the retries.")
    response = models.JSONField(
        null=True, blank=True, help_text="The endpoint's whole response, as received (the text itself is the output's)."
    )
    replies = models.PositiveIntegerField(
        default=0, help_text="Replies received for this output, over every attempt (what the budget counts)."
    )
    prompt_tokens = models.PositiveIntegerField(default=0, help_text="Over every attempt.")
    completion_tokens = models.PositiveIntegerField(default=0, help_text="Over every attempt.")
    generation = models.OneToOneField(Generation, null=True, blank=True, on_delete=models.SET_NULL, related_name="call")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "item", "sample_index"], name="generationcall_unique")
        ]

    def __str__(self) -> str:
        return f"{self.endpoint} on item {self.item_id} sample {self.sample_index}: {self.status}"


class Job(models.Model):
    """A background computation with progress the researcher's page polls; its lifecycle is ``annotation/jobs.py``."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        STOPPED = "stopped", "Stopped"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=40)
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True, help_text="Last sign of life of a long job's worker.")

    class Meta:
        db_table = "selection_job"  # where it lived before annotation's ground floor took it in
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} for study {self.study_id}: {self.status}"

    @property
    def percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        return round(100 * self.done / self.total) if self.total else 0

    @property
    def active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)


class WorkerBeat(models.Model):
    """A background worker's sign of life (``annotation/worker.py``): written every few seconds by a thread of each
    running ``manage.py run_worker``, so pages and /healthz can say when no worker has been seen."""

    worker_id = models.CharField(max_length=64, primary_key=True)
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)

    class Meta:
        db_table = "selection_workerbeat"

    def __str__(self) -> str:
        return f"worker {self.worker_id} on {self.host} (pid {self.pid})"
