"""Analytics' table: a study's analysis settings (the report's parameters)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from annotation.models import Study


class AnalysisSettings(models.Model):
    """How the report analyses a study's judgments. ``analytics.report.data.analysis_parameters`` is the one
    map from them (and the separability weight's settings) to the report's parameters (registered in
    ``annotation/study_settings.py``)."""

    class RatingAggregation(models.TextChoices):
        EVERY = "every", "Every judgment is a battle"
        MAJORITY = "majority", "The majority of each pair's judgments is one battle"
        ONE_SAMPLED = "one_sampled", "One judgment sampled per item and system pair (the separability paper)"

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True, related_name="analysis_settings")
    elo_k = models.FloatField(default=4.0, validators=[MinValueValidator(0.01)], help_text="ELO K factor.")
    bootstrap_rounds = models.PositiveSmallIntegerField(
        default=100,
        validators=[MinValueValidator(10), MaxValueValidator(2000)],
        help_text="Bootstrap resamples for the leaderboard's 95 % intervals.",
    )
    indeterminacy_beta = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Sensitivity beta for humans when only forced choices exist: the share of raters who chose one "
        "output but would also accept the other (applied to both outputs).",
    )
    rating_aggregation = models.CharField(
        max_length=20,
        choices=RatingAggregation.choices,
        default=RatingAggregation.EVERY,
        help_text="Which judgments become battles for ELO, sep-ELO and Bradley-Terry.",
    )

    class EstimateTarget(models.TextChoices):
        ITEMS_LIKE_THESE = "items_like_these", "Items like these"
        THESE_ITEMS = "these_items", "These items only"

    estimate_target = models.CharField(
        max_length=20,
        choices=EstimateTarget.choices,
        default=EstimateTarget.ITEMS_LIKE_THESE,
        help_text="What the report's win-rate estimates and their intervals are for: items like the study's (the "
        "uncertainty includes which items the study happens to have) or the study's own items (only which of them "
        "people judged; judging every item gives the exact answer).",
    )

    style_penalty = models.FloatField(
        default=1.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(100.0)],
        help_text="The L2 penalty on the style-controlled board's style coefficients, 0.5 x penalty x |coefficients|^2 "
        "on the mean loss: 1 is arena-rank's default (LMArena's board), 0 fits them without it.",
    )

    class Meta:
        verbose_name_plural = "analysis settings"

    def __str__(self) -> str:
        return f"analysis settings of study {self.study_id}"


class StoredReport(models.Model):
    """A study's report for one rater population, computed in the background once per data version
    (``analytics.stored``): pages, CSV tables and the API serve it instead of recomputing the bootstraps."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="stored_reports")
    population_key = models.CharField(max_length=500, help_text="analytics.populations.Population.key")
    version = models.CharField(max_length=64, help_text="The data version the report was computed from.")
    data = models.JSONField(help_text="The whole report (the CSV tables and the API read it).")
    summary = models.JSONField(default=dict, help_text="What the page reads besides the body: population, counts.")
    body = models.TextField(default="", help_text="The page body rendered from the report (analytics.presentation).")
    computed = models.DateTimeField()
    seconds = models.FloatField(help_text="How long the computation took.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "population_key"], name="stored_report_unique")]

    def __str__(self) -> str:
        return f"report of study {self.study_id} for {self.population_key}"


class BudgetPlan(models.Model):
    """A budget plan as computed by the worker (``analytics.budgeting``): its request and, per system pair, margin
    and raters per item, the items, judgments, assignments, money and rater-hours (the settings page and the API
    show the latest)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="budget_plans")
    job = models.ForeignKey("annotation.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    result = models.JSONField()
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"budget plan {self.pk} of study {self.study_id}"


class Adjudication(models.Model):
    """A researcher's ruling on one pair after reviewing its verdicts (``analytics.review``): kept apart from the
    judgments -- never a rater's answer, never a battle or an item winner -- so the analysis stays what the raters
    said, and the rulings can be read, changed and exported on their own."""

    class Ruling(models.TextChoices):
        A = "a", "System A's output is better"
        B = "b", "System B's output is better"
        TIE = "tie", "Neither is better (a tie)"
        UNCLEAR = "unclear", "Cannot be decided (the pair itself is the problem)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="adjudications")
    pair = models.OneToOneField("annotation.Pair", on_delete=models.CASCADE, related_name="adjudication")
    ruling = models.CharField(
        max_length=10,
        choices=Ruling.choices,
        help_text="In model coordinates: A and B are the pair's systems, not display sides.",
    )
    note = models.TextField(blank=True, default="", help_text="Why: what the raters or the judge missed.")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    decided = models.DateTimeField(help_text="When the ruling was last made or changed.")

    class Meta:
        ordering = ["decided", "id"]

    def __str__(self) -> str:
        return f"adjudication of pair {self.pair_id}: {self.ruling}"

    @classmethod
    def choices_for(cls, system_a: str, system_b: str) -> list[tuple[str, str]]:
        """The rulings as a form offers them for one pair, naming its systems instead of "System A/B"."""
        names = {"System A's output": system_a, "System B's output": system_b}
        out = []
        for value, label in cls.Ruling.choices:
            for generic, name in names.items():
                label = label.replace(generic, name)
            out.append((value, label))
        return out


class ArenaBoard(models.Model):
    """An arena study's leaderboard as the worker last computed it (``analytics.arena``): the board page polls it,
    no request computes it."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True, related_name="arena_board")
    data = models.JSONField(help_text="The whole board (analytics.arena.board_data).")
    votes = models.PositiveIntegerField(help_text="The arena's votes when it was computed (counted or flagged).")
    version = models.CharField(max_length=64, default="", help_text="The data version it was computed from.")
    refreshed = models.DateTimeField(help_text="When it was computed.")
    seconds = models.FloatField(default=0.0, help_text="How long the computation took.")

    def __str__(self) -> str:
        return f"arena board of study {self.study_id}"
