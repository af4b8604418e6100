"""An arena battle's background samples (annotation/generating/samples.py, docs/arena.md#live-separability-and-sep-elo):
K more outputs of each of a ready battle's two systems on its prompt, asked from tests/judge_server.py's ``gen-``
models through the systems' GenerationRun (ledger, budget), one run per system at a time; then the arena's
separability step."""

from __future__ import annotations

from django.utils import timezone

from annotation.generating import runner, samples
from annotation.jobs import run_job
from annotation.models import Battle, Generation, GenerationCall, Job, SystemEndpoint
from selection.models import ItemSeparability
from tests.annotation.generating.arena_rows import arena, ready_battle
from tests.judge_server import generated_text, server_fixture

server = server_fixture()


def run(job: Job) -> Job:
    run_job.call(job.pk)
    job.refresh_from_db()
    return job


def generate_jobs(study) -> list[Job]:
    return list(Job.objects.filter(study=study, kind="generate").order_by("pk"))


def test_a_ready_battle_gets_k_more_samples_of_each_system_then_its_separability(researcher, server):
    study = arena(researcher, server, samples=2, seed=7)
    study.selection_settings.separability_metric = "rouge1"
    study.selection_settings.save()
    battle = ready_battle(study, "Name a colour.")
    started = samples.do_start_battle_samples(battle)
    assert [s.words for s in started] == ["Sampling started.", "Sampling started."]
    assert [s.endpoint.system_id for s in started] == [battle.comparison.system_a_id, battle.comparison.system_b_id]
    for sampling in started:
        job = run(sampling.job)
        assert job.status == Job.Status.DONE, job.message
        # the ledger's summary: the shown reply (sample 0) and the two samples asked now
        assert job.message.startswith("3 generated, 0 unusable, 0 failed"), job.message
    # samples 1 and 2 of each system, each one request with the battle's prompt, seeded by the sample's index
    assert sorted((r["model"], r["messages"][-1]["content"], r.get("seed")) for r in server.requests) == [
        (model, "Name a colour.", 7 + k) for model in ("gen-terse-a", "gen-verbose-b") for k in (1, 2)
    ]
    for endpoint in SystemEndpoint.objects.filter(system__study=study):
        outputs = Generation.objects.filter(system=endpoint.system, item=battle.item).order_by("sample_index")
        assert [g.sample_index for g in outputs] == [0, 1, 2]
        assert [g.text for g in outputs[1:]] == [
            generated_text(endpoint.model, "Name a colour.", 7 + k, 0) for k in (1, 2)
        ]
        assert GenerationCall.objects.filter(endpoint=endpoint).count() == 3  # sample 0's ledger row and two more
    step = Job.objects.get(study=study, kind="arena_separability")  # queued by the battle and joined by both runs
    assert run(step).status == Job.Status.DONE
    assert "Separability of 1 new prompt" in step.message
    assert ItemSeparability.objects.filter(item=battle.item, run__metric="rouge1").count() == 1


def test_an_arena_run_wants_only_its_battles_ready_prompts_and_samples_after_the_shown_reply(researcher, server):
    study = arena(researcher, server, samples=2, models=("gen-a", "gen-b", "gen-c"))
    ab, ac, bc = study.comparisons.order_by("pk")
    ready = ready_battle(study, "First?", ab)
    voted = ready_battle(study, "Second?", ac)
    Battle.objects.filter(pk=voted.pk).update(status=Battle.Status.VOTED)
    for status in (Battle.Status.FAILED, Battle.Status.ANSWERING):  # never ready: nothing to sample
        other = ready_battle(study, f"{status}?", bc)
        Battle.objects.filter(pk=other.pk).update(status=status)
    # a ready battle its rater left for a newer one never gets a vote: out of play, not sampled
    left = ready_battle(study, "Left?", bc)
    ready_battle(study, "Newer?", ab, rater=left.rater)
    Battle.objects.filter(rater=left.rater).exclude(pk=left.pk).update(status=Battle.Status.FAILED)
    wanted = {
        e.system.name: runner.GenerationRun(e).wanted() for e in SystemEndpoint.objects.filter(system__study=study)
    }
    a, b, c = (s.name for s in (ab.system_a, ab.system_b, ac.system_b))
    assert wanted[a] == [(ready.item_id, 1), (ready.item_id, 2), (voted.item_id, 1), (voted.item_id, 2)]
    assert wanted[b] == [(ready.item_id, 1), (ready.item_id, 2)]
    assert wanted[c] == [(voted.item_id, 1), (voted.item_id, 2)]
    endpoint = SystemEndpoint.objects.get(system=ab.system_b)
    assert runner.GenerationRun(endpoint).done_words == "of 2 background samples (2 per battle prompt)"
    assert runner.GenerationRun(endpoint).do_include_if_complete() == ""  # an arena's pairs are all there already


def test_battles_join_the_queued_run_and_one_run_asks_for_all(researcher, server):
    study = arena(researcher, server, samples=1)
    first = ready_battle(study, "One?")
    second = ready_battle(study, "Two?")
    started = samples.do_start_battle_samples(first)
    joined = samples.do_start_battle_samples(second)
    assert [s.job.pk for s in joined] == [s.job.pk for s in started]
    assert {s.words for s in joined} == {"Joined the queued sampling run."}
    assert len(generate_jobs(study)) == 2 and Job.objects.filter(kind="arena_separability").count() == 1
    for sampling in started:
        assert run(sampling.job).message.startswith("4 generated")  # two shown replies, two samples
    assert Generation.objects.filter(item__study=study, sample_index=1).count() == 4


def test_a_running_run_chains_the_prompts_it_was_never_asked_and_a_closing_one_is_not_joined(researcher, server):
    study = arena(researcher, server, samples=1)
    ready_battle(study, "One?")
    endpoint = SystemEndpoint.objects.get(system=study.comparisons.get().system_a)
    job = run(samples.do_sample(endpoint).job)
    assert job.status == Job.Status.DONE and job.params.get(runner.CLOSING) is True
    # a battle settles while a run is still running (its heartbeat fresh): joined, and asked by the chained run
    Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING, heartbeat=timezone.now())
    Job.objects.filter(pk=job.pk).update(params={"endpoint": endpoint.pk})
    second = ready_battle(study, "Two?")
    joined = samples.do_sample(endpoint)
    assert joined.job.pk == job.pk and joined.words.startswith("Joined the running sampling run")
    outcome = runner.GenerationRun(endpoint).do_finish_arena("Said.")
    assert outcome.message == "Said. 1 new battle samples go on in the next run."
    chained = generate_jobs(study)[-1]
    assert chained.pk != job.pk and chained.status == Job.Status.QUEUED
    # the chained run asked and failed: nothing never asked is left, so the running job is marked closing, and a
    # battle settling now starts a run of its own rather than join it
    Job.objects.filter(pk=chained.pk).delete()
    GenerationCall.objects.create(endpoint=endpoint, item=second.item, sample_index=1, status="failed", replies=0)
    outcome = runner.GenerationRun(endpoint).do_finish_arena("Said.")
    assert outcome.message == "Said. 1 sample failed: asked again with the next battle."
    job.refresh_from_db()
    assert job.params[runner.CLOSING] is True and job.status == Job.Status.RUNNING
    own = samples.do_sample(endpoint)
    assert own.words == "Sampling started." and own.job.pk not in (job.pk, chained.pk)


def test_a_reached_budget_stops_the_sampling_and_the_run_says_so(researcher, server):
    # the two shown replies count (one request each), then room for 2 of the 4 samples wanted
    study = arena(researcher, server, samples=2, request_budget=4)
    first, second = ready_battle(study, "One?"), ready_battle(study, "Two?")
    endpoint = SystemEndpoint.objects.get(system=first.comparison.system_a)
    job = run(samples.do_sample(endpoint).job)
    assert job.status == Job.Status.DONE and job.message.startswith("Request budget reached: 4 generated"), job.message
    assert Generation.objects.filter(system=endpoint.system, sample_index__gte=1).count() == 2
    third = ready_battle(study, "Three?")
    refused, other = samples.do_start_battle_samples(third)
    assert refused.job is None and len(server.requests) == 2  # the samples of the first prompt only
    assert refused.words == "The request budget (4) is used up: no more samples; raise it to go on."
    assert other.words == "Sampling started."  # the other system: 3 shown replies of its budget of 4
    assert second.status == Battle.Status.READY


def test_an_arena_without_samples_asks_nothing_but_still_looks_for_repeated_prompts(researcher, server):
    study = arena(researcher, server, samples=0)
    assert samples.do_start_battle_samples(ready_battle(study, "One?")) == []
    assert not generate_jobs(study) and Job.objects.filter(kind="arena_separability").count() == 1


def test_a_stopped_sampling_is_not_restarted_by_a_battle(researcher, server):
    study = arena(researcher, server, samples=1)
    battle = ready_battle(study, "One?")
    SystemEndpoint.objects.filter(system__study=study).update(stop_requested=True)
    said = samples.do_start_battle_samples(battle)
    assert {s.words for s in said} == {"Sampling was stopped on the system's page; resume it there to go on."}
    assert not generate_jobs(study)
