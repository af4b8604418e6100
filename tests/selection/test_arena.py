"""What selection does for an arena (selection/arena.py, selection/hooks.py, docs/arena.md): the pair weights read
from the live decisions, the pair choice that follows them (drawn by annotation/arena/battles.py), the decision step
after every vote, the separability of each battle prompt once its samples are in (equal to the whole computation),
and repeated prompts flagged."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import numpy as np
import pytest
from django.utils import timezone

from annotation import elicitation
from annotation.arena import battles
from annotation.jobs import run_job
from annotation.models import Assignment, Battle, Generation, Job, Judgment, text_hash, word_count
from annotation.rating.recording import Submission
from annotation.studies import enrolment
from selection import arena, services
from selection.core import arena as core
from selection.core import decisions
from selection.models import ItemSeparability, PairDecision, SeparabilityRun
from tests.annotation.arena import fixtures
from tests.annotation.arena.fixtures import answered, make_arena
from tests.annotation.generating.arena_rows import ready_battle

server, arena_study = fixtures.server, fixtures.arena  # the fixtures


def decide(comparison, call: str = decisions.A_BETTER, mean: float = 0.8) -> None:
    PairDecision.objects.update_or_create(
        comparison=comparison,
        defaults={"decision": call, "low": 0.6, "high": 0.9, "items": 30, "judgments": 30, "mean": mean},
    )


def three_pairs(study) -> tuple:
    """The arena's pairs red-green, red-blue, green-blue (its systems' order), as (rg, rb, gb)."""
    by_names = {(c.system_a.name, c.system_b.name): c for c in study.comparisons.select_related("system_a", "system_b")}
    return by_names[("red", "green")], by_names[("red", "blue")], by_names[("green", "blue")]


# ----------------------------------------------------------------------------------------------------------
# Which two systems


def test_pair_weights_favour_the_open_pairs_the_ranking_needs_and_leave_closed_pairs_out(arena_study):
    """red-green decided for red (red's mean 0.8), red-blue open at 0.7, green-blue open at 0.6: the ranking by mean
    win rate is red (0.8 + 0.7) / 2 = 0.75, green (0.2 + 0.6) / 2 = 0.4, blue (0.3 + 0.4) / 2 = 0.35. Next to each
    other: red-green (decided) and green-blue (open, not implied): only green-blue is needed; red-blue is open but
    not adjacent. Before any decision every system is at 1/2 and ties keep the systems' order (red, green, blue):
    red-green and green-blue are needed, red-blue is not."""
    rg, rb, gb = three_pairs(arena_study)
    w = core.OPEN_WEIGHT
    assert arena.pair_weights(arena_study) == {rg.pk: w, rb.pk: 1.0, gb.pk: w}
    decide(rg, decisions.A_BETTER, 0.8)
    decide(rb, decisions.UNDECIDED, 0.7)
    decide(gb, decisions.UNDECIDED, 0.6)
    assert arena.pair_weights(arena_study) == {rg.pk: 1.0, rb.pk: 1.0, gb.pk: w}
    decide(gb, decisions.A_BETTER, 0.6)  # every adjacent order decided: the ranking needs none, all weigh alike
    assert arena.pair_weights(arena_study) == {rg.pk: 1.0, rb.pk: 1.0, gb.pk: 1.0}
    gb.closed = True
    gb.save()
    assert arena.pair_weights(arena_study) == {rg.pk: 1.0, rb.pk: 1.0}


@pytest.mark.slow(seconds=30)
def test_the_pair_choice_prefers_undecided_pairs_and_never_repeats_a_raters_previous_pair(arena_study):
    """The weights above: green-blue (open, needed) w = OPEN_WEIGHT, the decided red-green and the open but not
    adjacent red-blue 1. A rater's next pair is drawn among the two pairs that are not their previous one: from
    green-blue each other pair comes with chance 1/2, from either other pair green-blue with w / (w + 1). Its
    long-run share p solves p = (1 - p) w / (w + 1): p = w / (2w + 1) = 4/9 (1/3 when all weigh the same), and the
    decided pair's is (1 - p) / 2 = 5/18. 600 battles of 6 raters: a share's standard error is at most
    sqrt(p (1 - p) / 600) = 0.021 (a pair never follows itself, which only narrows it), so 0.065 is 3 of them."""
    rg, rb, gb = three_pairs(arena_study)
    decide(rg, decisions.A_BETTER, 0.8)
    decide(rb, decisions.UNDECIDED, 0.7)
    decide(gb, decisions.UNDECIDED, 0.6)
    raters = [enrolment.do_create_rater_link(arena_study, f"rater-{i}") for i in range(6)]
    drawn: dict[int, list[int]] = {r.pk: [] for r in raters}
    for _ in range(100):
        for rater in raters:
            drawn[rater.pk].append(battles.do_start_battle(rater, "Which river is longest?").comparison_id)
    for pairs in drawn.values():
        assert all(before != after for before, after in zip(pairs, pairs[1:], strict=False))
    counts = Counter(pk for pairs in drawn.values() for pk in pairs)
    w = core.OPEN_WEIGHT
    needed = w / (2 * w + 1)
    assert abs(counts[gb.pk] / 600 - needed) < 0.065, counts
    assert abs(counts[rg.pk] / 600 - (1 - needed) / 2) < 0.065, counts
    assert counts[gb.pk] > 600 / 3 > counts[rg.pk]


# ----------------------------------------------------------------------------------------------------------
# The decision step after every vote


def vote_for_a(battle: Battle) -> battles.VoteResult:
    """A vote for the comparison's system A, wherever it was shown."""
    choice = "first" if battle.a_shown_first else "second"
    return battles.do_vote(battle, Submission(key=f"vote-{battle.pk}", answer=elicitation.Answer(choice=choice)))


@pytest.mark.slow(seconds=10)
def test_every_vote_moves_the_arenas_decision_and_the_pair_choice_reads_it(researcher, server):
    """Two systems, votes all for A: each vote is one observation of the pair's betting confidence sequence at the
    study's error rate (one pair: 0.05), so the stored interval is ``BettingSequence`` on n ones, and the pair is
    decided A-better at the first n whose lower end clears 1/2 -- whatever the study's settings (an arena does not
    stop buying), and the pair is never closed: it still gets battles, at weight 1."""
    study = make_arena(researcher, server, labels=("red", "green"))
    assert not study.selection_settings.stops_buying()
    (comparison,) = study.comparisons.all()
    rater = enrolment.do_create_rater_link(study, "voter")
    alpha = study.selection_settings.pair_alpha()
    reference = decisions.BettingSequence(alpha)
    for n in range(1, 40):
        battle = answered(battles.do_start_battle(rater, f"Question {n}?"))
        assert vote_for_a(battle).counted
        reference.update(1.0)
        stored = PairDecision.objects.get(comparison=comparison)
        assert (stored.items, stored.judgments) == (n, n)
        assert (stored.low, stored.high) == pytest.approx(reference.interval)
        if stored.decision != decisions.UNDECIDED:
            break
    assert stored.decision == decisions.A_BETTER
    assert stored.decision == decisions.decide(*reference.interval, study.selection_settings.decision_margin)
    assert reference.interval[0] > 0.5 and n > 1
    comparison.refresh_from_db()
    assert not comparison.closed
    assert arena.pair_weights(study) == {comparison.pk: 1.0}  # decided: the ranking needs no pair


def test_a_vote_flagged_before_it_came_is_not_observed(researcher, server):
    study = make_arena(researcher, server, labels=("red", "green"))
    rater = enrolment.do_create_rater_link(study, "voter")
    counted = answered(battles.do_start_battle(rater, "First?"))
    vote_for_a(counted)
    flagged = answered(battles.do_start_battle(rater, "First!"))
    from annotation.rating import battles as rating_battles

    rating_battles.do_flag_votes([flagged.pk], "a repeated prompt")
    assert not vote_for_a(flagged).counted
    assert Judgment.objects.get(assignment_pair__assignment__battle=flagged).superseded
    assert PairDecision.objects.get(comparison=study.comparisons.get()).items == 1


# ----------------------------------------------------------------------------------------------------------
# Live separability


def samples(battle: Battle, texts_a: list[str], texts_b: list[str], first: int = 1) -> None:
    """Samples ``first``.. of the battle's two systems (sample 0 is the shown reply, already stored)."""
    comparison = battle.comparison
    assert comparison is not None
    for system, texts in ((comparison.system_a, texts_a), (comparison.system_b, texts_b)):
        for k, text in enumerate(texts, start=first):
            Generation.objects.create(
                item=battle.item,
                system=system,
                sample_index=k,
                text=text,
                text_hash=text_hash(text),
                n_words=word_count(text),
            )


def test_each_prompts_separability_is_stored_once_its_samples_are_in_and_equals_the_whole_computation(
    researcher, server
):
    """ROUGE-1 of identical texts is 1 and of texts with no word in common 0. A prompt whose samples are all alike
    across the two systems has alignments (1, 1, 1); one whose systems share no word (1, 1, 0). Normalised over the
    pair's prompts together (bounds 0 and 1): delta = max(1, 1) - 1 = 0 and max(1, 1) - 0 = 1. The second prompt
    alone has the same bounds, so its delta is 1 from the start and stays 1."""
    study = make_arena(researcher, server, labels=("red", "green"), samples=2)
    settings = study.selection_settings
    settings.separability_metric = "rouge1"
    settings.save()
    apart = ready_battle(study, "Apart?", replies=("alpha beta", "gamma delta"))
    samples(apart, ["alpha beta", "alpha beta"], ["gamma delta", "gamma delta"])
    alike = ready_battle(study, "Alike?", replies=("alpha beta", "alpha beta"))
    samples(alike, ["alpha beta"], ["alpha beta"])  # one sample of K = 2 still missing: waits
    assert arena.do_live_separability(study) == 1
    run = SeparabilityRun.objects.get(study=study, metric="rouge1")
    assert list(run.items.values_list("item_id", "self_a", "self_b", "cross", "delta")) == [
        (apart.item_id, 1.0, 1.0, 0.0, 1.0)
    ]
    samples(alike, ["alpha beta"], ["alpha beta"], first=2)  # the last ones arrive
    assert arena.do_live_separability(study) == 1
    assert arena.do_live_separability(study) == 0  # nothing new
    live = dict(run.items.values_list("item_id", "delta"))
    assert live == {apart.item_id: 1.0, alike.item_id: 0.0}
    run.refresh_from_db()
    assert (run.low, run.high) == (0.0, 1.0)
    (whole,) = services.do_compute_separability(study, "rouge1")
    assert dict(whole.items.values_list("item_id", "delta")) == live


def test_the_arena_step_runs_as_a_job_and_the_report_reads_its_deltas(researcher, server):
    from analytics.report.data import separability_by_item

    study = make_arena(researcher, server, labels=("red", "green"), samples=1)
    settings = study.selection_settings
    settings.separability_metric = "rouge1"
    settings.save()
    battle = ready_battle(study, "Apart?", replies=("alpha beta", "gamma delta"))
    samples(battle, ["alpha beta"], ["gamma delta"])
    job = Job.objects.create(study=study, kind="arena_separability")
    run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.DONE
    assert job.message == "Separability of 1 new prompt; 0 repeated prompts flagged."
    c = battle.comparison
    assert separability_by_item(study) == {
        (c.system_a.name, c.system_b.name): {battle.item_id: 1.0},
        (c.system_b.name, c.system_a.name): {battle.item_id: 1.0},
    }
    assert ItemSeparability.objects.count() == 1


# ----------------------------------------------------------------------------------------------------------
# Repeated prompts


def test_repeats_counts_a_prompt_once_by_the_first_battle_that_counts():
    """Unit vectors with known cosines: e1; e1 again (cosine 1); a vector at cosine 0.95 of e1; one at cosine 0.8;
    e2. The exact rule catches a text that differs in case and spacing only."""
    c95, c80 = 0.95, 0.8
    vectors = np.array(
        [
            [1.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [c95, np.sqrt(1 - c95**2), 0.0],
            [c80, 0.0, np.sqrt(1 - c80**2)],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 1.0],
        ]
    )
    prompts = ["Hello there", "hello   THERE", "Hello there!", "Hi", "Bye", "Bye"]
    found = arena.repeats([10, 11, 12, 13, 14, 15], prompts, [True] * 6, vectors)
    assert found == [
        arena.Repeat(11, 10, "the same text"),
        arena.Repeat(12, 10, "cosine 0.95"),
        arena.Repeat(15, 14, "the same text"),
    ]
    # a battle not counted already (flagged for another reason) is no earlier battle: the next one counts instead
    found = arena.repeats([10, 11, 12], prompts[:3], [False, True, True], vectors[:3])
    assert found == [arena.Repeat(12, 11, "cosine 0.95")]
    # from ``start`` on only: the ones before stand as they are, and count as earlier battles
    assert arena.repeats([10, 11, 12, 13], prompts[:4], [True] * 4, vectors[:4], start=2) == [
        arena.Repeat(12, 10, "cosine 0.95")
    ]


@pytest.mark.slow(seconds=15)
def test_repeated_prompts_are_flagged_with_the_battle_they_repeat_and_not_counted(researcher, server):
    study = make_arena(researcher, server, labels=("red", "green"), samples=0)
    first = ready_battle(study, "Explain quantum computing in simple terms.")
    same = ready_battle(study, "explain quantum   computing in simple terms.")
    near = ready_battle(study, "Explain quantum computing in simple terms please")
    other = ready_battle(study, "Write a poem about the sea.")
    failed = ready_battle(study, "Write a poem about the sea.")
    Battle.objects.filter(pk=failed.pk).update(status=Battle.Status.FAILED)  # never voted: no earlier battle
    assert arena.do_flag_repeats(study) == 2
    flags = dict(Battle.objects.filter(study=study).values_list("pk", "flag"))
    assert flags[first.pk] == flags[other.pk] == flags[failed.pk] == ""
    assert flags[same.pk] == f"the prompt repeats battle {first.pk}'s (the same text)"
    assert flags[near.pk].startswith(f"the prompt repeats battle {first.pk}'s (cosine 0.9")
    assert arena.do_flag_repeats(study) == 0  # flagged once


def test_a_prompt_sent_again_after_its_battle_was_left_without_a_vote_is_no_repeat(researcher, server):
    """A battle refused by the names rule stays ready, without a vote form; its rater sends the prompt again. That
    first battle, left for the newer one, never gets a vote (``in_play``): the second is no repeat of it. A vote
    counted on the same prompt by another rater still makes a later battle a repeat."""
    study = make_arena(researcher, server, labels=("red", "green"), samples=0)
    left = ready_battle(study, "Which model are you?")
    again = ready_battle(study, "Which model are you?", rater=left.rater)
    assert Assignment.objects.get(battle=left).status != Assignment.Status.ACTIVE  # the newer battle ended it
    assert arena.do_flag_repeats(study) == 0
    assert set(Battle.objects.filter(study=study).values_list("flag", flat=True)) == {""}
    third = ready_battle(study, "Which model are you?")  # another rater; ``again`` is in play
    assert arena.do_flag_repeats(study) == 1
    assert Battle.objects.get(pk=third.pk).flag == f"the prompt repeats battle {again.pk}'s (the same text)"


@pytest.mark.slow(seconds=15)
def test_a_step_looks_only_at_the_battles_ready_since_the_last_one_began(researcher, server):
    """Earlier battles only ever stop counting, so a battle looked at once keeps its standing: the next step looks at
    the battles whose hold came after the last step began (less ``RECHECK``), against every earlier one."""
    study = make_arena(researcher, server, labels=("red", "green"), samples=0)
    old = [ready_battle(study, "Name three rivers."), ready_battle(study, "Name three rivers.")]
    hour_ago = timezone.now() - dt.timedelta(hours=1)
    Assignment.objects.filter(battle__in=old).update(created=hour_ago)
    Job.objects.create(study=study, kind=arena.STEP, status=Job.Status.DONE)
    new = ready_battle(study, "name   three RIVERS.")
    assert arena.do_flag_repeats(study) == 1
    flags = dict(Battle.objects.filter(study=study).values_list("pk", "flag"))
    assert flags == {old[0].pk: "", old[1].pk: "", new.pk: f"the prompt repeats battle {old[0].pk}'s (the same text)"}
