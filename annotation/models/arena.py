"""An arena study (``Study.kind`` arena): its own settings (``Arena``), each battle a rater started with a prompt of
their own (``Battle``), and every reply the two anonymous systems gave in it (``BattleReply``).

A battle is stored as any study's work is, so that every reader of judgments reads a vote as it reads any answer
(docs/arena.md#how-a-battle-is-stored): its prompt is an ``Item`` (the input is the rater's first message), the two
systems' first replies are their ``Generation`` sample 0 of that item (the background samples 1..K that separability
needs follow), and once both replies are in, the battle holds an ``Assignment`` with one ``AssignmentPair`` -- the
vote is that pair's ``Judgment``, recorded by ``annotation/rating/recording.py`` like any rater's answer. The rest of
the conversation (further turns, timing, tokens and cost per reply) is the battle's own."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from annotation.models.items import Item
from annotation.models.judgments import GoldPair
from annotation.models.plan import Comparison
from annotation.models.raters import Assignment, Rater
from annotation.models.studies import Study

SIDES = ("a", "b")  # model coordinates: "a" is the battle's comparison.system_a


class Arena(models.Model):
    """An arena study's own settings (created with it by ``create_arena``; changed on its Arena settings page)."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, primary_key=True, related_name="arena")
    samples = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(0), MaxValueValidator(10)],
        help_text="K: background samples of each of a battle's two systems on its prompt, for the prompt's "
        "separability and sep-ELO (0: none; the reply shown is one more sample).",
    )
    max_turns = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(10)],
        help_text="Most messages a rater may send in one battle before voting (the first prompt included).",
    )
    starters = models.JSONField(default=list, blank=True, help_text="Starter prompts a rater may take, in order.")
    categories = models.JSONField(
        default=list, blank=True, help_text="The researcher's categories a rater may file a prompt under (names)."
    )
    votes_per_rater_hour = models.PositiveSmallIntegerField(
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(10_000)],
        help_text="Most votes one rater may cast in an hour; more are refused.",
    )
    votes_per_network_hour = models.PositiveIntegerField(
        default=600,
        validators=[MinValueValidator(1), MaxValueValidator(1_000_000)],
        help_text="Most votes raters from one network (an IPv4 address or an IPv6 /64) may cast in an hour.",
    )
    attention_every = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(100)],
        help_text="Every n-th battle of a rater is one of the study's attention checks (known answer); 0: none.",
    )

    def __str__(self) -> str:
        return f"arena of {self.study}"


class Battle(models.Model):
    """One rater's battle: a prompt, two anonymous systems (the comparison's A and B, ``a_shown_first`` says which
    was on the left), their replies, and the vote."""

    class Status(models.TextChoices):
        ANSWERING = "answering", "The systems are answering"
        READY = "ready", "Waiting for the vote"
        VOTED = "voted", "Voted"
        FAILED = "failed", "A system failed: no vote"
        REFUSED = "refused", "Vote refused"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="battles")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="battles")
    item = models.OneToOneField(
        Item, on_delete=models.CASCADE, related_name="battle", help_text="The prompt, as the study's item."
    )
    comparison = models.ForeignKey(Comparison, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    gold = models.ForeignKey(
        GoldPair,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="An attention check shown as a battle (its good and bad outputs are the replies).",
    )
    a_shown_first = models.BooleanField(help_text="System A's replies were on the left.")
    prompts = models.JSONField(default=list, help_text="The rater's messages, one per turn (the first is the item).")
    category = models.CharField(max_length=100, blank=True, default="", help_text="The category the rater chose.")
    tags = models.JSONField(
        default=dict, blank=True, help_text="Automatic categories of the prompt: language, code, long."
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ANSWERING)
    assignment = models.OneToOneField(
        Assignment,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="battle",
        help_text="Held once both replies are in: its one pair's judgment is the vote.",
    )
    flag = models.CharField(
        max_length=300,
        blank=True,
        default="",
        help_text="Why the vote is kept but not counted (a near-duplicate prompt, an unlikely rater, a failed "
        "attention check), or why it was refused.",
    )
    client = models.CharField(max_length=64, blank=True, default="", help_text="The network the battle came from.")
    created = models.DateTimeField(default=timezone.now)
    voted = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["study", "rater", "created"], name="battle_rater_recent"),
            models.Index(fields=["study", "client", "voted"], name="battle_network_votes"),
            models.Index(fields=["study", "client", "created"], name="battle_network_starts"),
        ]

    def __str__(self) -> str:
        return f"battle {self.pk} of study {self.study_id}"


def in_play(prefix: str = "") -> models.Q:
    """The battles whose vote counts or still may: voted, or ready with their vote's assignment open (the rater's one
    battle to vote on). A ready battle its rater left for a newer one (its assignment ended) never gets a vote, so it
    is neither an earlier prompt a repeat is measured against nor sampled in the background. ``prefix``: the path to
    the battle from the queried model (e.g. ``"battle__"``)."""
    return models.Q(**{f"{prefix}status": Battle.Status.VOTED}) | models.Q(
        **{f"{prefix}status": Battle.Status.READY, f"{prefix}assignment__status": Assignment.Status.ACTIVE}
    )


# A reply never asked for: the other side failed first (``streaming``), so the endpoint was not called
NOT_ASKED = "Not asked: the other model failed in this battle first."


def replies_off_ledger(study_id: int) -> dict[int, int]:
    """Per system of the arena: the battle replies its endpoint was asked for that its ledger (``GenerationCall``)
    does not hold -- a ready battle's two first replies are its systems' sample 0 with their ledger rows; every
    follow-up turn's replies, and the first replies of a battle that failed, are not. With the ledger's replies,
    what the request budget counts (``battles.out_of_budget``, the sampling run's ``usage``). A reply still streaming
    in the first turn is counted once its battle settles."""
    counts: dict[int, int] = {}
    for side in ("a", "b"):
        rows = (
            BattleReply.objects.filter(battle__study_id=study_id, battle__gold__isnull=True, side=side)
            .filter(models.Q(turn__gt=0) | models.Q(battle__status=Battle.Status.FAILED))
            .exclude(status=BattleReply.Status.FAILED, problem=NOT_ASKED)
            .order_by()
            .values(f"battle__comparison__system_{side}")
            .annotate(n=models.Count("pk"))
            .values_list(f"battle__comparison__system_{side}", "n")
        )
        for system, n in rows:
            counts[system] = counts.get(system, 0) + n
    return counts


class BattleReply(models.Model):
    """One reply of one side in one turn of a battle, as the rater saw it, with its timing, tokens and cost. Written
    as it streams (``text`` grows), final once ``status`` is done or failed."""

    class Status(models.TextChoices):
        STREAMING = "streaming", "Streaming"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="replies")
    side = models.CharField(max_length=1, choices=[(s, s.upper()) for s in SIDES], help_text="Model coordinates.")
    turn = models.PositiveSmallIntegerField(help_text="0 for the reply to the first prompt.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.STREAMING)
    text = models.TextField(blank=True, default="")
    problem = models.TextField(blank=True, default="", help_text="Why it failed (errors, time-outs, a trickle).")
    finish_reason = models.CharField(max_length=40, blank=True, default="")
    started = models.DateTimeField(default=timezone.now)
    first_token = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0, help_text="US$ at the endpoint's prices.")

    class Meta:
        ordering = ["battle_id", "turn", "side"]
        constraints = [models.UniqueConstraint(fields=["battle", "side", "turn"], name="battlereply_unique")]

    def __str__(self) -> str:
        return f"battle {self.battle_id} side {self.side} turn {self.turn}: {self.status}"
