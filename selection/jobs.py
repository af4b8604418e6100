"""Selection's background jobs (``annotation/jobs.py`` runs them): embedding a study's outputs, and separability."""

from __future__ import annotations

from annotation import jobs
from annotation.models import Job
from selection import services


def do_start_separability_job(study, metric: str) -> Job:
    """Record the job and queue it; the researcher's page polls its progress."""
    services.parse_metric(metric)  # a bad metric is the caller's error, before anything is queued
    return jobs.start(study, "separability", params={"metric": metric})


def do_start_embedding_job(study) -> Job:
    return jobs.start(study, "embed", message="Embedding the outputs")


def embedding_job(job: Job, progress: jobs.Progress) -> str:
    total = services.do_embed_study(job.study, progress=progress)
    return f"All {total} distinct outputs are embedded."


def separability_job(job: Job, progress: jobs.Progress) -> str:
    metric = job.params["metric"]
    progress.say("Embedding the outputs" if metric.startswith("cosine") else "Computing similarities")
    runs = services.do_compute_separability(job.study, metric, progress=progress)
    return f"Separability computed for {len(runs)} system pair(s)."
