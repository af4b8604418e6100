"""Selection's tables: the embedding cache, separability results and stored selection runs."""

from __future__ import annotations

import numpy as np
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from annotation.models import Comparison, Item, Study
from selection.core import group_sequential, multiplicity
from selection.core.separability import DEFAULT_METRIC

ERROR_CONTROL_LABELS = {  # multiplicity.CONTROLS, as people read them
    "auto": "Study-wide when the study compares more than one pair",
    "per_pair": "Each system pair on its own",
    "study_wide": "Study-wide: across all system pairs together",
}


def error_words(alpha: float, pair_alpha: float, control: str) -> str:
    """The decisions' error rate as people read it, with the control in force (``control``: "per_pair" or
    "study_wide") -- "study-wide error 0.05 across 10 pairs, 0.005 a pair" -- the one wording of the report and the
    study page (docs/decisions.md#study-wide-error)."""
    if control == "study_wide" and pair_alpha < alpha:
        pairs = round(alpha / pair_alpha)
        return f"study-wide error {alpha:.3g} across {pairs} pairs, {pair_alpha:.3g} a pair"
    return f"error {alpha:.3g} per pair"


class SelectionSettings(models.Model):
    """A study's selection settings: which items of each system pair raters see (docs/diffuse.md#selection-strategies)
    and when the live loop stops. ``selection.strategies.strategy_parameters`` is the one map from them to a strategy's
    parameters (registered in ``annotation/study_settings.py``)."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True, related_name="selection_settings")
    selection_method = models.CharField(
        max_length=40,
        default="stratified",
        help_text="Which items of each system pair raters see when a budget is set.",
    )
    budget = models.PositiveIntegerField(
        null=True, blank=True, help_text="Items per system pair to send to raters; empty means every item."
    )
    separability_metric = models.CharField(
        max_length=20,
        default=DEFAULT_METRIC,
        help_text="cosine, rouge1, bleu, or their length-adjusted -la forms (cosine-la: the paper's length "
        "adjustment, the best on the separability paper's human data).",
    )
    separability_threshold = models.FloatField(
        default=0.2, help_text="Threshold strategies keep items whose separability reaches this (0 to 1)."
    )
    sep_threshold_t = models.FloatField(default=0.4, help_text="T of the logistic weight K·α / (1 + exp(−β(δ − T))).")
    sep_alpha = models.FloatField(default=2.0, help_text="α of the logistic separability weight.")
    sep_beta = models.FloatField(default=6.0, help_text="β of the logistic separability weight.")
    risk = models.FloatField(
        default=0.1,
        validators=[MinValueValidator(0.001), MaxValueValidator(0.5)],
        help_text="Iterative DiffUse stops once the hypergeometric risk of a wrong winner is at most this.",
    )
    min_n = models.PositiveSmallIntegerField(
        default=5, validators=[MinValueValidator(1)], help_text="Iterative DiffUse: representatives judged first."
    )
    stopping_ties_in_n = models.BooleanField(
        default=True,
        help_text="Stopping rule: tied items count among the n decided items (conservative: a tie "
        "never helps the leader). Untick to leave them out of n.",
    )
    decision_alpha = models.FloatField(
        default=0.05,
        db_default=0.05,
        validators=[MinValueValidator(0.001), MaxValueValidator(0.5)],
        help_text="A system pair's decision may be wrong with at most this chance, however often anyone looks "
        "(selection/core/decisions.py).",
    )
    error_control = models.CharField(
        max_length=12,
        choices=[(control, ERROR_CONTROL_LABELS[control]) for control in multiplicity.CONTROLS],
        default="auto",
        db_default="auto",
        help_text="Whose error the decision rate bounds: each pair's, or the study's (the chance that any pair is "
        "called wrongly, each pair deciding at the rate divided by the number of pairs). Automatic: study-wide "
        "when the study compares more than one pair.",
    )
    decision_margin = models.FloatField(
        default=0.05,
        db_default=0.05,
        validators=[MinValueValidator(0.0), MaxValueValidator(0.5)],
        help_text="Win rates within this of a half count as equivalent (0: a pair is decided only by a winner).",
    )

    class DecisionGoal(models.TextChoices):
        PAIRS = "pairs", "Every system pair"
        RANKING = "ranking", "The ranking: adjacent systems until their order is decided"

    decision_goal = models.CharField(
        max_length=10,
        choices=DecisionGoal.choices,
        default=DecisionGoal.PAIRS,
        db_default=DecisionGoal.PAIRS,
        help_text="What the study buys judgments until: every pair decided, or only the ranking (the pairs of "
        "adjacent systems whose order is still open; selection/core/decisions.ranking_needs).",
    )
    one_rater_first = models.BooleanField(
        default=False,
        db_default=False,
        help_text="While a stopping pair has items left, each item gets one rater; the other raters come only for the "
        "pairs their first raters left undecided (two sequences at alpha / 2 each).",
    )
    decision_looks = models.PositiveSmallIntegerField(
        default=5,
        db_default=5,
        validators=[MaxValueValidator(group_sequential.MOST_LOOKS)],
        help_text="When a pair's decision is read: after every item (0; the betting confidence sequence) or at K "
        "planned looks at equal shares of the pair's items (Lan-DeMets O'Brien-Fleming spending; "
        "selection/core/group_sequential.py; 1: once, when every item is in).",
    )
    decision_futility = models.FloatField(
        default=0.1,
        db_default=0.1,
        validators=[MinValueValidator(0.0)],
        help_text="With planned looks: a look at which the chance of a decision by the last look (if the trend so "
        "far holds) is below this stops buying the pair, undecided (0: never).",
    )
    stop_when_decided = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Once a system pair is decided, give out no new places of it (the study stops paying for it).",
    )

    class Meta:
        verbose_name_plural = "selection settings"

    def __str__(self) -> str:
        return f"selection settings of study {self.study_id}"

    # What the stopping settings mean together -- the one home the live plan, the pages and ``simulate`` read.
    def stops_buying(self) -> bool:
        """Whether the study stops buying decided pairs: asked for, and with a selection whose items come in random
        order with equal chances (the decision's sequence assumes it)."""
        from selection.study_settings import ORDER_FREE

        return self.stop_when_decided and self.selection_method in ORDER_FREE

    def ranks_only(self) -> bool:
        """Whether the study buys only what its ranking needs (every system pair compared: adjacency needs them)."""
        return (
            self.stops_buying()
            and self.decision_goal == self.DecisionGoal.RANKING
            and self.study.pair_mode == Study.PairMode.ALL
        )

    def one_first(self) -> bool:
        """Whether the plan buys one rater per item first and the others only where the pair stays undecided."""
        return self.stops_buying() and self.one_rater_first and self.study.raters_per_item > 1

    def looks(self) -> int:
        """The planned looks a stopping pair's decision is read at (0: after every item). The ranking goal looks
        after every item: it moves items between pairs as their orders settle, not over a pair's planned pool."""
        return 0 if self.ranks_only() else self.decision_looks

    def futility(self) -> float:
        """The conditional power below which a planned look stops buying its pair (0 without planned looks)."""
        return self.decision_futility if self.looks() else 0.0

    def compared_pairs(self) -> int:
        """The system pairs the study decides (what the study-wide error is split over)."""
        return Comparison.objects.filter(study_id=self.study_id).count()

    def control_in_force(self, pairs: int | None = None) -> str:
        """The control in force, "per_pair" or "study_wide": ``error_control`` with "auto" resolved."""
        return multiplicity.in_force(self.error_control, self.compared_pairs() if pairs is None else pairs)

    def pair_alpha(self, pairs: int | None = None) -> float:
        """The error rate each system pair's decision uses so that ``decision_alpha`` holds as ``error_control``
        says (``selection.core.multiplicity.pair_alpha``); ``pairs`` when the caller has counted them already."""
        count = self.compared_pairs() if pairs is None else pairs
        return multiplicity.pair_alpha(self.decision_alpha, count, self.error_control)


class Embedding(models.Model):
    """One text's embedding under one encoder, keyed by the text's sha256 (so nothing is embedded
    twice, whichever study or system the text comes from)."""

    encoder = models.CharField(max_length=300)
    text_hash = models.CharField(max_length=64)
    dim = models.PositiveIntegerField()
    vector = models.BinaryField(help_text="float32, little-endian")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["encoder", "text_hash"], name="embedding_unique")]

    def __str__(self) -> str:
        return f"{self.encoder}:{self.text_hash[:12]}"

    def array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.vector), dtype="<f4", count=self.dim)


class SeparabilityRun(models.Model):
    """Separability of one system pair under one metric: the normalisation bounds, and per item the
    raw alignments and delta (docs/separability.md#alignments)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="separability_runs")
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="separability_runs")
    metric = models.CharField(max_length=40)
    encoder = models.CharField(max_length=300, blank=True)
    low = models.FloatField(null=True)
    high = models.FloatField(null=True)
    created = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["comparison", "metric"], name="separability_run_unique")]

    def __str__(self) -> str:
        return f"{self.comparison} ({self.metric})"


class ItemSeparability(models.Model):
    run = models.ForeignKey(SeparabilityRun, on_delete=models.CASCADE, related_name="items")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    self_a = models.FloatField(null=True, help_text="NULL when system A has a single sample (undefined).")
    self_b = models.FloatField(null=True)
    cross = models.FloatField()
    delta = models.FloatField(null=True, help_text="NULL when undefined (K = 1).")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "item"], name="item_separability_unique")]

    def __str__(self) -> str:
        return f"{self.item_id}: {self.delta}"


class SelectionRun(models.Model):
    """One run of a selection strategy for one system pair: enough to audit and reproduce it."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="selection_runs")
    comparison = models.ForeignKey(Comparison, null=True, on_delete=models.SET_NULL, related_name="selection_runs")
    system_a = models.CharField(max_length=200)
    system_b = models.CharField(max_length=200)
    method = models.CharField(max_length=40)
    params = models.JSONField(default=dict)
    budget = models.PositiveIntegerField(null=True)
    seed = models.BigIntegerField()
    items = models.JSONField(help_text="Chosen item ids, in release order.")
    candidates = models.PositiveIntegerField()
    details = models.JSONField(
        default=dict,
        blank=True,
        help_text="What the strategy reported about its choice, e.g. DiffUse's cluster_sizes (aligned with items).",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.method} on {self.system_a} vs {self.system_b} ({len(self.items)} items)"


class IterativeRun(models.Model):
    """Iterative DiffUse (Algorithm 1) for one system pair, run live: the candidates and their Ward
    linkage, computed once and stored; the algorithm's state is replayed from the judgments."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="iterative_runs")
    comparison = models.OneToOneField(Comparison, on_delete=models.CASCADE, related_name="iterative_run")
    item_ids = models.JSONField(help_text="Candidate item primary keys, in tree order.")
    linkage = models.BinaryField(help_text="(leaves - 1) x 4 float64 Ward linkage, little-endian.")
    leaf_groups = models.JSONField(
        default=list, blank=True, help_text="Two-stage trees: candidate indices of each leaf. Empty: one item per leaf."
    )
    schedule = models.JSONField(
        default=dict,
        blank=True,
        help_text="Algorithm 1's splits computed ahead (SplitSchedule.to_json()); empty for "
        "runs stored before schedules, which compute it once on first use.",
    )
    encoder = models.CharField(max_length=300)
    risk = models.FloatField()
    min_n = models.PositiveIntegerField()
    budget = models.PositiveIntegerField()
    outcome = models.CharField(max_length=20, blank=True, help_text="'decided', 'inconclusive', or empty.")
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"iterative DiffUse on {self.comparison}"

    def linkage_matrix(self) -> np.ndarray:
        return np.frombuffer(bytes(self.linkage), dtype="<f8").reshape(-1, 4)


class StoredTree(models.Model):
    """The Ward tree of one system pair's candidates, computed once and reused by every selection."""

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="trees")
    encoder = models.CharField(max_length=300)
    candidates_digest = models.CharField(max_length=64, help_text="sha256 of the candidate item ids, in order.")
    linkage = models.BinaryField()
    leaf_groups = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["comparison", "encoder", "candidates_digest"], name="stored_tree_unique")
        ]

    def __str__(self) -> str:
        return f"tree of {self.comparison} ({self.candidates_digest[:8]})"


class PairDecision(models.Model):
    """A system pair's anytime-valid decision as of its last completed assignment (``selection/hooks.py``), kept up
    to date one item at a time (the sequence's state is stored: a completed assignment costs O(grid), not a pass
    over the pair's judgments), so the plan and the study page read it instead of recomputing: only while the study
    stops buying decided pairs (the report computes it for every study)."""

    comparison = models.OneToOneField(Comparison, on_delete=models.CASCADE, primary_key=True, related_name="decision")
    decision = models.CharField(max_length=12)
    phase = models.PositiveSmallIntegerField(
        default=1,
        db_default=1,
        help_text="With one rater per item first: 1 while items get their first rater, 2 once "
        "the pool ran out undecided and the other raters are bought.",
    )
    mean = models.FloatField(
        default=0.5,
        db_default=0.5,
        help_text="The first system's mean item score so far (what the ranking mode ranks by).",
    )
    low = models.FloatField()
    high = models.FloatField()
    items = models.PositiveIntegerField(help_text="Items whose every rater has answered: what the decision rests on.")
    judgments = models.PositiveIntegerField(help_text="Human judgments of the pair so far.")
    state = models.BinaryField(default=b"", help_text="The confidence sequence so far (decisions.BettingSequence).")
    counted = models.JSONField(default=list, help_text="The items already observed, by id.")
    scores = models.JSONField(
        default=list,
        help_text="With planned looks: the scores of the items in ``counted``, in the same order (what each look "
        "reads; group_sequential.standing).",
    )
    pool = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="The pair's items the plan can buy (with planned looks, the looks' sizes; racing reads it too).",
    )
    alpha = models.FloatField(
        default=0.0,
        db_default=0.0,
        help_text="With planned looks: the pair's error rate as its first look was planned (each phase spends a "
        "share, designs.first_share).",
    )
    stopped = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Stopped for futility at a planned look: undecided, and no longer bought (the pool is too small "
        "for the decision it is heading to).",
    )
    recounted = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Decided again from the start after the data manager excluded or re-opened items of the pair: its "
        "error rate holds only if those choices did not depend on the verdicts (docs/decisions.md#excluded-items).",
    )
    spread = models.FloatField(
        null=True,
        blank=True,
        help_text="With planned looks: the spread of the current phase's scores (racing.spread; None below two), what "
        "racing across pairs reads.",
    )
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.comparison}: {self.decision}"
