"""Background work: jobs (their lifecycle is ``annotation/jobs.py``) and the workers' signs of life
(``annotation/worker.py``)."""

from __future__ import annotations

from django.db import models

from annotation.models.studies import Study


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
        indexes = [
            # a worker's claim: the running jobs, and each study's last ended one (annotation/worker.py)
            models.Index(fields=["status"], name="job_status"),
            models.Index(fields=["study", "finished"], name="job_study_finished"),
        ]

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
