"""A study's team: who besides its owner works on it, in which role (``Membership``), and the trail of who changed
what (``AuditEntry``). What each role may do is decided in one place, ``annotation/access.py`` (``PERMISSIONS``);
members are added, changed and removed by ``annotation/studies/team.py``, which also writes the trail."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models.studies import Study


class Role(models.TextChoices):
    """A member's role. The owner (``Study.owner``) is not a member: they hold every right, and only they manage
    the team and delete the study."""

    VIEWER = "viewer", "Viewer"
    REVIEWER = "reviewer", "Reviewer"
    EDITOR = "editor", "Editor"


OWNER = "owner"  # what ``access.role_of`` answers for the study's owner


class Membership(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices)
    added = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "user"], name="membership_unique_study_user")]
        ordering = ["user__username"]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.study}"


class AuditEntry(models.Model):
    """One change to a study by a person: its settings (each field before and after), a ruling on the review queue,
    a rater or worker kept out or let back in, its status, its team. Kept when the person's account goes (their
    name stays in ``username``)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="audit_entries")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    username = models.CharField(max_length=150)
    action = models.CharField(max_length=40)
    summary = models.CharField(max_length=500)
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.username}: {self.summary}"
