"""Crowdsourcing sites: a study's links for them, a worker's sessions, a researcher's blocklist, and HITs
created through the MTurk API."""

from __future__ import annotations

from django.conf import settings
from django.core import signing
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q
from django.urls import reverse

from annotation.models.raters import Assignment, Rater
from annotation.models.studies import Study, new_completion_code, new_nonce

EXTERNAL_LINK_SALT = "seplab.external-link"


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


class CrowdPayment(models.Model):
    """One action on a crowd worker's submission, asked for on the crowd page and sent to the site by the worker
    (``annotation/crowd/payments.py``): approve it (the reward is paid), reject it (with the reason the worker
    reads), pay a bonus, or block the worker on the site. The ledger of every action and its outcome; the money is
    summed from it."""

    class Kind(models.TextChoices):
        APPROVE = "approve", "Approve"
        REJECT = "reject", "Reject"
        BONUS = "bonus", "Bonus"
        BLOCK = "block", "Block on the site"

    class Status(models.TextChoices):
        QUEUED = "queued", "Waiting for the worker"
        SENDING = "sending", "Being sent"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="crowd_payments")
    # RESTRICT: a session is not deleted under its ledger, but a study (or its owner) still is, with both
    session = models.ForeignKey(WorkerSession, on_delete=models.RESTRICT, related_name="payments")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    amount = models.DecimalField(
        max_digits=8, decimal_places=2, null=True, blank=True, help_text="What the action pays (none for a reject)."
    )
    reason = models.TextField(blank=True, help_text="What the worker reads (a reject, a bonus, a block).")
    category = models.CharField(max_length=30, blank=True, help_text="Prolific's rejection category.")
    sandbox = models.BooleanField(default=False, help_text="MTurk's sandbox: no real money.")
    token = models.CharField(max_length=32, default=new_nonce, unique=True, help_text="MTurk's UniqueRequestToken.")
    site_reference = models.CharField(max_length=100, blank=True, help_text="Prolific's bulk bonus payment id.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    problem = models.TextField(blank=True, help_text="What the site answered when it failed.")
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    sent = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["study", "status"], name="crowd_payment_study_status")]

    def __str__(self) -> str:
        return f"{self.kind} {self.session} ({self.status})"
