"""What is compared: the systems, the items and each system's outputs (its samples) for an item."""

from __future__ import annotations

import hashlib

from django.db import models

from annotation.models.studies import Study


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def word_count(text: str) -> int:
    return len(text.split())


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
    input = models.TextField(help_text="The input as text (a conversation's transcript, annotation/conversations.py).")
    messages = models.JSONField(
        null=True,
        blank=True,
        help_text='A conversation item\'s turns ([{"role", "content"}], OpenAI-style; the outputs are the assistant\'s '
        "next reply, the judged turn); null for a plain input.",
    )
    reference = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    position = models.PositiveIntegerField(help_text="Order of the item in the imported file.")
    excluded = models.BooleanField(
        default=False,
        help_text="Excluded by a researcher in the data manager: its judgments are kept and exported, never analysed "
        "(``Judgment.objects.analysed``), and it is no longer handed to raters.",
    )
    review_requested = models.BooleanField(
        default=False, help_text="Sent to the review queue from the data manager, flagged or not."
    )

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
