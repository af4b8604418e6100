"""An arena battle's background samples (docs/arena.md#live-separability-and-sep-elo): once a battle is READY, each of
its two systems is asked for K = ``Arena.samples`` more outputs on the battle's first prompt (``Generation`` samples
1..K; sample 0 is the reply the rater saw), through the system's ``GenerationRun`` -- its ledger, its request budget,
its checked target -- and, once both systems' samples of a prompt are in, the prompt's separability is computed by
selection's "arena_separability" job.

One run per system at a time, as for any generated system: a battle joins a run already queued (the run reads what is
missing when it starts) or running (the run chains a next one when it finishes and finds prompts it was never asked
for: ``GenerationRun.do_finish_arena``); only when there is none is a run started. A reached request budget stops the
sampling: no run is started, and a run cut short by it says so."""

from __future__ import annotations

import dataclasses

from django.db import transaction

from annotation import endpoints, jobs
from annotation.endpoint_runs import is_live
from annotation.endpoints import EndpointError
from annotation.errors import ServiceError
from annotation.generating.runner import CLOSING, GenerationRun
from annotation.models import Battle, Job, SystemEndpoint


@dataclasses.dataclass(frozen=True)
class Sampling:
    """What became of one system's background samples for a battle: the run that will ask for them (None: none),
    and in words why."""

    endpoint: SystemEndpoint
    job: Job | None
    words: str


def do_start_battle_samples(battle: Battle) -> list[Sampling]:
    """Start (or join) the sampling runs of the battle's two systems. Nothing for an attention-check battle, a
    battle without a comparison, or an arena with K = 0. Never raises for a run that cannot start (a budget used
    up, a key missing, the researcher's job cap): the battle is kept, and the words say why; the next battle's
    start asks again for everything still missing. Queues the arena's background step too (repeated prompts, and the
    separability of prompts whose samples are in)."""
    study = battle.study
    if battle.gold_id is not None or battle.comparison_id is None or not study.is_arena:
        return []
    if not study.arena.samples:
        do_queue_arena_step(study)  # repeated prompts are looked for all the same
        return []
    comparison = battle.comparison
    assert comparison is not None
    systems = (comparison.system_a_id, comparison.system_b_id)
    found = SystemEndpoint.objects.select_related("system__study").filter(system_id__in=systems)
    started = [do_sample(endpoint) for endpoint in sorted(found, key=lambda e: systems.index(e.system_id))]
    do_queue_arena_step(study)
    return started


def do_queue_arena_step(study) -> Job | None:
    """Queue the arena's background step (selection's "arena_separability": repeated prompts flagged, the
    separability of prompts whose samples are in), or join the one queued; None when the researcher's job cap
    refuses it now (the next battle or sampling run queues it again)."""
    try:
        return jobs.start(study, "arena_separability", message="Arena: repeated prompts and separability")
    except ServiceError:  # jobs.JobLimit
        return None


def do_sample(endpoint: SystemEndpoint) -> Sampling:
    """The system's sampling run: the queued one, the running one (which chains what it was not asked), or a new one
    when something is missing and the budget has room; under the endpoint's row lock, so that two battles settling
    at once start one run, and a run finishing at the same time either sees the new prompt or is marked closing
    (``runner.CLOSING``) before this looks."""
    run = GenerationRun(endpoint)
    with transaction.atomic():
        SystemEndpoint.objects.select_for_update().filter(pk=endpoint.pk).first()
        current = run.current_job()
        if current is not None and current.status == Job.Status.QUEUED:
            return Sampling(endpoint, current, "Joined the queued sampling run.")
        if is_live(current) and current is not None and not current.params.get(CLOSING):
            return Sampling(endpoint, current, "Joined the running sampling run (it goes on with the new prompt).")
        if not run.missing():
            return Sampling(endpoint, None, "Every battle prompt has its samples.")
        if SystemEndpoint.objects.filter(pk=endpoint.pk, stop_requested=True).exists():
            return Sampling(endpoint, None, "Sampling was stopped on the system's page; resume it there to go on.")
        budget = endpoint.request_budget
        if run.usage().replies >= budget:
            return Sampling(
                endpoint, None, f"The request budget ({budget}) is used up: no more samples; raise it to go on."
            )
        try:
            endpoints.api_key(endpoint)
            endpoints.check_target(endpoint)
            job = jobs.start(
                run.study,
                run.kind,
                params={run.param: endpoint.pk},
                message=run.said(run.words.queued),
            )
        except (EndpointError, ServiceError) as exc:  # ServiceError: jobs.JobLimit
            return Sampling(endpoint, None, f"Sampling could not start: {exc}")
        return Sampling(endpoint, job, "Sampling started.")
