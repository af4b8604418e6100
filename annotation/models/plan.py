"""The comparison plan: the system pairs compared, the output pairs of an item, and the released tasks."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from annotation.models.items import Generation, Item, System
from annotation.models.studies import Study


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
    behind = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Far from a decision: raters' next items come from pairs nearer a decision first; a pair behind "
        "still gets the items of a rater for whom those have nothing (docs/decisions.md, racing across pairs).",
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


class TaskQuerySet(models.QuerySet):
    def buyable(self) -> TaskQuerySet:
        """The tasks the plan may still hand out and count in its pools: those on items no researcher excluded
        (``Item.excluded``, the data manager's). Each task's item is read by its primary key (a join, no scan)."""
        return self.filter(item__excluded=False)


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

    objects = TaskQuerySet.as_manager()

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
