"""A study: what raters are asked and how the comparison is planned, the files waiting for its background import
(``Upload``), and its crowd settings row (annotation/study_settings.py registers the settings); and the random values
new rows start with (a seed, a link's nonce, a completion code)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from django.conf import settings
from django.core import signing
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.urls import reverse

from annotation import elicitation as elicitation_modes
from annotation import questions, rendering

OPEN_LINK_SALT = "seplab.open-link"


def new_seed() -> int:
    return secrets.randbelow(2**31)


def new_nonce() -> str:
    return secrets.token_urlsafe(8)


def new_completion_code() -> str:
    # No 0/O or 1/I: codes are read and typed by people.
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    return "".join(secrets.choice(alphabet) for _ in range(10))


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

    class AnswerUnit(models.TextChoices):
        PAIRS = "pairs", "Pairs: one output against another"
        RANK = "rank", "Rank every output of an item, best first"
        BEST_WORST = "best_worst", "Best and worst of several outputs (best-worst scaling)"

    class Kind(models.TextChoices):
        FILE = "file", "Items from a study file"
        ARENA = "arena", "An arena: raters bring their own prompts, live systems answer (docs/arena.md)"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="studies")
    kind = models.CharField(
        max_length=10,
        choices=Kind.choices,
        default=Kind.FILE,
        db_default=Kind.FILE,
        help_text="Where the items come from; fixed when the study is created.",
    )
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
    answer_unit = models.CharField(
        max_length=10,
        choices=AnswerUnit.choices,
        default=AnswerUnit.PAIRS,
        db_default=AnswerUnit.PAIRS,
        help_text="What one answer covers: a pair of outputs, or several outputs of an item at once (a ranking, or "
        "the best and the worst of those shown), stored with the pairwise judgments it implies "
        "(annotation/implied_pairs.py).",
    )
    outputs_shown = models.PositiveSmallIntegerField(
        default=4,
        db_default=4,
        validators=[MinValueValidator(3), MaxValueValidator(20)],
        help_text="Best-worst scaling: how many of an item's outputs one screen shows (at most as many as it has).",
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

    # Not a column: the warnings of the import that made this study (annotation/studies/creation.py; its file's
    # ``exchange.rules.Problem``s, which the ground floor does not name), for the page and the command to show.
    import_warnings: Sequence[object]

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
    def ranks(self) -> bool:
        """Whether one answer covers several outputs of an item (``answer_unit``): a ranking or best and worst."""
        return self.answer_unit != Study.AnswerUnit.PAIRS

    @property
    def places_per_task(self) -> int:
        """What one task (an item for one rater) holds: N sampled pairs, or the one screen of a ranking study."""
        return 1 if self.ranks else self.pairs_per_assignment

    @property
    def elicitation_mode(self) -> elicitation_modes.Mode:
        return elicitation_modes.mode_of(self)

    def open_link_token(self) -> str:
        return signing.Signer(salt=OPEN_LINK_SALT).sign_object({"s": self.pk, "n": self.open_link_nonce}, compress=True)

    def open_link_path(self) -> str:
        return reverse("open_link", args=[self.open_link_token()])

    @property
    def is_arena(self) -> bool:
        return self.kind == self.Kind.ARENA

    @property
    def accepts_raters(self) -> bool:
        return self.status == self.Status.ACTIVE

    def has_started(self) -> bool:
        """True once any rater holds an assignment: the comparison plan is then frozen."""
        return self.assignments.exists()  # the reverse relation: raters.py, Assignment's home, imports this module

    @staticmethod
    def count_per_study(rows: QuerySet) -> Coalesce:
        """The number of ``rows`` (of a model with a ``study`` key) of each study of the queryset it annotates, 0
        for none: ``studies.annotate(n_items=Study.count_per_study(Item.objects.all()))``. A correlated subquery of
        ``rows``' own table, so counting two tables of a study never joins their rows (a study's items × its
        judgments: minutes per page on PostgreSQL); the study list and the API count with it."""
        per_study = rows.filter(study=OuterRef("pk")).order_by().values("study").annotate(n=Count("*")).values("n")
        return Coalesce(Subquery(per_study), 0)


class Upload(models.Model):
    """A file too large to import in the request -- a study file, or a judgments file -- checked whole in the
    request and waiting for its background import (``annotation/uploads.py``); removed once imported."""

    class Kind(models.TextChoices):
        STUDY = "study", "Study file"
        JUDGMENTS = "judgments", "Judgments file"
        RANKINGS = "rankings", "Rankings file"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="uploads")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    filename = models.CharField(max_length=255, blank=True)
    data = models.BinaryField()
    records = models.PositiveIntegerField(
        default=0, db_default=0, help_text="The file's items or judgment lines, as checked in the request."
    )
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.get_kind_display().lower()} {self.pk} of study {self.study_id}"


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
