"""Selection's background jobs (``annotation/jobs.py`` runs them): embedding a study's outputs, and separability."""

from __future__ import annotations

from annotation import jobs
from annotation.models import Job
from selection import arena, services

# A study's outputs do not change once imported: the same computation queued or running gives the same result, so a
# second start returns it. A study computes separability under at most two metrics at once.
SEPARABILITY = jobs.Limit("separability computations", key=("metric",), coalesce="active", per_study=2)
EMBED = jobs.Limit("embeddings of the outputs", coalesce="active", per_study=1)


def do_start_separability_job(study, metric: str) -> Job:
    """Record the job and queue it (or the same metric's job already queued or running); the researcher's page polls
    its progress. ``jobs.JobLimit`` past the study's or the researcher's limit."""
    services.parse_metric(metric)  # a bad metric is the caller's error, before anything is queued
    return jobs.start(study, "separability", params={"metric": metric})


def do_start_embedding_job(study) -> Job:
    """The study's embedding job: a new one, or the one already queued or running."""
    return jobs.start(study, "embed", message="Embedding the outputs")


def embedding_job(job: Job, progress: jobs.Progress) -> str:
    total = services.do_embed_study(job.study, progress=progress)
    return f"All {total} distinct outputs are embedded."


def separability_job(job: Job, progress: jobs.Progress) -> str:
    metric = job.params["metric"]
    progress.say("Embedding the outputs" if metric.startswith("cosine") else "Computing similarities")
    runs = services.do_compute_separability(job.study, metric, progress=progress)
    return f"Separability computed for {len(runs)} system pair(s)."


# An arena's prompts keep coming: a job queued already will read every new one when it runs, so a second start
# returns it; one running may have read its battles before the newest samples came, so a new one queues behind it.
ARENA_SEPARABILITY = jobs.Limit("arena separability updates", coalesce="queued", per_study=1)


def arena_separability_job(job: Job, progress: jobs.Progress) -> jobs.Outcome:
    """An arena's background step (docs/arena.md#live-separability-and-sep-elo): the battles whose prompt repeats an
    earlier battle's flagged, then the separability of every prompt whose samples are all in."""
    progress.say("Looking for repeated prompts")
    flagged = arena.do_flag_repeats(job.study)
    progress.say("Deciding again the pairs whose votes stopped counting")
    arena.do_recount_decisions(job.study)  # repeats flagged now, unlikely raters flagged by the board, screenings
    progress.say("Computing the prompts' separability")
    added = arena.do_live_separability(job.study)
    return jobs.Outcome(
        f"Separability of {added} new prompt{'s' if added != 1 else ''}; "
        f"{flagged} repeated prompt{'s' if flagged != 1 else ''} flagged.",
        complete=True,
    )
