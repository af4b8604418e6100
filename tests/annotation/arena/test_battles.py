"""An arena's battles (``annotation/arena/battles.py``, ``annotation/rating/battles.py``): started on a rater's
prompt with a drawn pair, streamed against the local server (tests/judge_server.py), settled to READY with each reply
its system's sample 0, the pair and the one-pair assignment whose judgment is the vote, or FAILED; the vote recorded
exactly once as the rating page records an answer; follow-up turns; attention-check battles; flagged votes."""

from __future__ import annotations

import io
import json
import re
import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation import elicitation
from annotation.arena import battles, streaming
from annotation.errors import RaterScreenedOut, ServiceError
from annotation.models import (
    Assignment,
    AssignmentPair,
    AssignmentTask,
    Battle,
    BattleReply,
    Generation,
    GenerationCall,
    GoldAnswer,
    GoldPair,
    Item,
    Job,
    Judgment,
    Pair,
    SystemEndpoint,
    Task,
)
from annotation.rating import battles as rating_battles
from annotation.rating.recording import Submission
from annotation.studies import creation, enrolment
from tests.annotation.arena import fixtures
from tests.annotation.arena.fixtures import answered, make_arena
from tests.annotation.test_rate import statements as table_statements
from tests.conftest import study_jsonl

server, arena, rater = fixtures.server, fixtures.arena, fixtures.rater  # the fixtures


def vote(battle: Battle, choice: str = "first", key: str | None = None) -> battles.VoteResult:
    return battles.do_vote(battle, Submission(key=key or f"vote-{battle.pk}", answer=elicitation.Answer(choice=choice)))


def ready(rater_, prompt: str = "Tell me about rivers.") -> Battle:
    battle = answered(battles.do_start_battle(rater_, prompt))
    assert battle.status == Battle.Status.READY
    return battle


# ----------------------------------------------------------------------------------------------------------------
# Starting


def test_a_battle_starts_with_the_prompt_as_its_item_and_two_streaming_replies(arena, rater):
    arena.arena.categories = ["geography"]
    arena.arena.save()
    battle = battles.do_start_battle(rater, "  Name three rivers.\r\n", category="geography", client="10.0.0.1")
    item = Item.objects.get(pk=battle.item_id)
    assert (item.external_id, item.input, item.position) == (f"battle-{battle.pk}", "Name three rivers.", battle.pk)
    assert item.metadata == {"arena": True, "category": "geography", "tags": battle.tags}
    assert battle.tags == {"language": "en", "code": False, "long": False}
    assert battle.prompts == ["Name three rivers."] and battle.client == "10.0.0.1"
    assert battle.status == Battle.Status.ANSWERING and battle.comparison.study_id == arena.pk
    replies = BattleReply.objects.filter(battle=battle)
    assert sorted(replies.values_list("side", "turn", "status")) == [("a", 0, "streaming"), ("b", 0, "streaming")]
    assert battle.assignment is None and not Task.objects.exists()


@pytest.mark.parametrize(
    ("prompt", "category", "said"),
    [
        ("   ", "", "Write a prompt first."),
        ("x" * 8001, "", "Your prompt has 8,001 characters; a prompt may have at most 8,000."),
        ("a\x00b", "", "cannot be stored"),
        ("Hello?", "sports", "Choose one of the arena's categories, or none."),
    ],
)
def test_a_prompt_or_category_the_arena_does_not_take_is_refused_and_nothing_stored(
    arena, rater, prompt, category, said
):
    with pytest.raises(ServiceError, match=said.replace("?", r"\?").replace("(", r"\(")):
        battles.do_start_battle(rater, prompt, category=category)
    assert not Battle.objects.exists() and not Item.objects.exists()


def test_the_longest_prompt_is_taken(arena, rater):
    assert battles.do_start_battle(rater, "y" * 8000).prompts == ["y" * 8000]


def test_a_study_that_is_no_arena_or_is_paused_takes_no_battle(researcher, arena, rater):
    file_study = creation.do_create_study(researcher, "file", study_jsonl(), "s.jsonl")
    with pytest.raises(ServiceError, match="not an arena"):
        battles.do_start_battle(enrolment.do_create_rater_link(file_study, "f"), "Hi there")
    arena.status = arena.Status.PAUSED
    arena.save()
    rater.study.refresh_from_db()
    with pytest.raises(ServiceError, match="paused"):
        battles.do_start_battle(rater, "Hi there")


def test_a_rater_never_meets_the_same_pair_twice_in_a_row(arena, rater):
    pairs = []
    for i in range(30):
        battle = battles.do_start_battle(rater, f"Question number {i}?")
        pairs.append(battle.comparison_id)
    assert all(a != b for a, b in zip(pairs, pairs[1:], strict=False))
    assert set(pairs) == set(arena.comparisons.values_list("pk", flat=True))  # 3 pairs; each drawn in 30 battles


def test_with_one_pair_the_previous_pair_comes_again(researcher, server):
    study = make_arena(researcher, server, "two", labels=("x", "y"))
    rater_ = enrolment.do_create_rater_link(study, "r")
    only = study.comparisons.get()
    assert [battles.do_start_battle(rater_, f"Q{i}?").comparison_id for i in range(3)] == [only.pk] * 3


def test_a_closed_pair_and_the_pairs_of_a_system_out_of_budget_are_never_drawn(arena, rater):
    red_green, red_blue, green_blue = arena.comparisons.order_by("pk")
    red_green.closed = True
    red_green.save()  # selection's pair_weights leaves a closed pair out
    drawn = {battles.do_start_battle(rater, f"Q{i}?").comparison_id for i in range(12)}
    assert drawn == {red_blue.pk, green_blue.pk}
    blue = SystemEndpoint.objects.get(system__study=arena, system__name="blue")
    blue.request_budget = 1
    blue.save()
    GenerationCall.objects.create(
        endpoint=blue, item=Item.objects.first(), sample_index=0, status=GenerationCall.Status.GENERATED, replies=1
    )
    assert battles.out_of_budget(arena) == {blue.system_id}
    with pytest.raises(ServiceError, match="request budgets are used up"):
        battles.do_start_battle(rater, "One more?")  # red-green closed, and every other pair has blue


# ----------------------------------------------------------------------------------------------------------------
# Settling


def test_both_replies_done_make_the_battle_ready_with_samples_a_pair_and_a_held_assignment(arena, rater, server):
    battle = ready(rater)
    comparison = battle.comparison
    replies = {r.side: r for r in BattleReply.objects.filter(battle=battle)}
    generations = {g.system_id: g for g in Generation.objects.filter(item=battle.item)}
    assert set(generations) == {comparison.system_a_id, comparison.system_b_id}
    for side, system in (("a", comparison.system_a_id), ("b", comparison.system_b_id)):
        generation = generations[system]
        assert generation.sample_index == 0 and generation.text == replies[side].text != ""
        assert generation.provenance["arena_battle"] == battle.pk and generation.provenance["streamed"] is True
        call = GenerationCall.objects.get(endpoint__system_id=system, item=battle.item)
        assert (call.status, call.replies, call.sample_index, call.generation_id) == ("generated", 1, 0, generation.pk)
        assert (call.prompt_tokens, call.completion_tokens) == (
            replies[side].prompt_tokens,
            replies[side].completion_tokens,
        )
    pair = Pair.objects.get(item=battle.item)
    assert (pair.generation_a.system_id, pair.generation_b.system_id) == (
        comparison.system_a_id,
        comparison.system_b_id,
    )
    task = Task.objects.get(item=battle.item)
    assert (task.comparison_id, task.raters_required, task.taken) == (comparison.pk, 1, 1)
    assignment = Assignment.objects.get(pk=battle.assignment_id)
    assert (assignment.rater_id, assignment.n_pairs, assignment.status) == (rater.pk, 1, "active")
    place = AssignmentTask.objects.get(assignment=assignment)
    assert (place.task_id, place.item_id, place.slot) == (task.pk, battle.item_id, 0)
    held = AssignmentPair.objects.get(assignment=assignment)
    assert (held.pair_id, held.a_shown_first) == (pair.pk, battle.a_shown_first) and held.shown_at is not None
    # the background samples: each system's run is queued (K = 3 more on the prompt)
    runs = Job.objects.filter(kind="generate", study=arena)
    endpoints_ = set(SystemEndpoint.objects.filter(system__in=generations).values_list("pk", flat=True))
    assert {job.params["endpoint"] for job in runs} == endpoints_
    assert battles.do_settle(battle).status == Battle.Status.READY  # idempotent: nothing stored twice
    assert Generation.objects.filter(item=battle.item).count() == 2 and Pair.objects.count() == 1
    assert Assignment.objects.count() == 1


def test_a_failed_reply_fails_the_battle_and_keeps_the_prompt(arena, rater):
    battle = answered(battles.do_start_battle(rater, "Break please [[stream-error]]"))
    assert battle.status == Battle.Status.FAILED
    assert set(BattleReply.objects.filter(battle=battle).values_list("status", flat=True)) == {"failed"}
    assert Item.objects.get(pk=battle.item_id).input == "Break please [[stream-error]]"
    assert not Generation.objects.exists() and battle.assignment_id is None
    with pytest.raises(ServiceError, match="A system failed in this battle"):
        vote(battle)
    assert battles.do_start_battle(rater, "Another try?").status == Battle.Status.ANSWERING  # a fresh pair


def test_one_failed_reply_fails_the_battle_while_the_other_still_streams(arena, rater):
    battle = battles.do_start_battle(rater, "Half?")
    BattleReply.objects.filter(battle=battle, side="a").update(status=BattleReply.Status.FAILED, problem="down")
    assert battles.do_settle(battle).status == Battle.Status.FAILED


# ----------------------------------------------------------------------------------------------------------------
# The vote


def test_a_vote_is_the_held_pairs_judgment_exactly_once_and_names_are_revealed_after(arena, rater):
    battle = ready(rater)
    assert battles.revealed(battle) is None
    result = vote(battle, "first", key="k1")
    judgment = Judgment.objects.get()
    first = "a" if battle.a_shown_first else "b"
    assert (judgment.choice, judgment.rater_id, judgment.assignment_id) == (first, rater.pk, battle.assignment_id)
    assert judgment.pair.item_id == battle.item_id and not judgment.superseded
    names = (battle.comparison.system_a.name, battle.comparison.system_b.name)
    shown = names if battle.a_shown_first else names[::-1]
    assert (result.counted, result.left, result.right) == (True, *shown)
    assert result.words == "Your vote is counted."
    battle.refresh_from_db()
    assert battle.status == Battle.Status.VOTED and battle.voted is not None
    assert battles.revealed(battle) == shown
    assert Assignment.objects.get(pk=battle.assignment_id).status == "completed"
    # the same submit again, or another key on the voted battle: the stored vote, never a second one
    assert vote(battle, "second", key="k1") == result
    assert vote(battle, "second", key="k2") == result
    assert Judgment.objects.count() == 1 and Judgment.objects.get().choice == first


@pytest.mark.parametrize(("choice", "stored"), [("tie", ("tie", None)), ("both_bad", ("tie", []))])
def test_a_tie_and_both_bad_are_votes(arena, rater, choice, stored):
    battle = ready(rater)
    assert vote(battle, choice).counted
    judgment = Judgment.objects.get()
    assert (judgment.choice, judgment.response_set) == stored


def test_a_vote_before_the_replies_are_in_is_refused(arena, rater):
    battle = battles.do_start_battle(rater, "Wait?")
    with pytest.raises(ServiceError, match="Wait for both replies"):
        vote(battle)
    assert not Judgment.objects.exists()


def test_a_reply_naming_its_own_model_refuses_the_vote_and_shows_the_names(researcher, server):
    # asked to, the local server's reply begins with the model's name: "gen-red on 'Who are you? [[say-name]]': ..."
    study = make_arena(researcher, server, "names", labels=("x1", "y1"), models=["gen-red", "gen-green"])
    rater_ = enrolment.do_create_rater_link(study, "r")
    battle = ready(rater_, "Who are you? [[say-name]]")
    with pytest.raises(ServiceError) as refused:
        vote(battle)
    # the rater is told why in their words, not which name was found (the researcher's flag says it)
    assert str(refused.value) == str(battles.NAMED_WORDS) and "gen-" not in str(refused.value)
    battle.refresh_from_db()
    assert battle.status == Battle.Status.REFUSED
    assert re.fullmatch(r"names its own model \(gen-(red|green)\)", battle.flag)
    assert battles.revealed(battle) is not None and not Judgment.objects.exists()
    assert battles.outcome(battle).words == str(battles.NAMED_WORDS) and not battles.outcome(battle).counted
    with pytest.raises(ServiceError, match="said which model wrote it"):
        vote(battle, key="again")
    assert not Judgment.objects.exists()


def test_a_vote_over_the_raters_hourly_limit_is_refused_and_the_battle_kept(arena, rater):
    arena.arena.votes_per_rater_hour = 2
    arena.arena.save()
    for i in range(2):
        vote(ready(rater, f"Question {i}?"))
    third = ready(rater, "Question 2?")
    with pytest.raises(ServiceError, match="You have cast 2 votes in the last hour.*vote on it in 60 minutes"):
        vote(third)
    third.refresh_from_db()
    assert third.status == Battle.Status.READY and Judgment.objects.count() == 2
    # an hour after the first of them, the vote is taken
    first = Battle.objects.filter(status=Battle.Status.VOTED).order_by("pk").first()
    Battle.objects.filter(pk=first.pk).update(voted=first.voted - timedelta(minutes=61))
    assert vote(third).counted and Judgment.objects.count() == 3


def test_a_vote_over_the_networks_hourly_limit_is_refused(arena):
    arena.arena.votes_per_network_hour = 1
    arena.arena.save()
    one, two = (enrolment.do_create_rater_link(arena, name) for name in ("n1", "n2"))
    vote(answered(battles.do_start_battle(one, "First?", client="192.0.2.1")))
    other = answered(battles.do_start_battle(two, "Second?", client="192.0.2.1"))
    with pytest.raises(ServiceError, match="Your network has cast 1 vote in the last hour"):
        vote(other)
    elsewhere = answered(battles.do_start_battle(two, "Third?", client="198.51.100.7"))
    assert vote(elsewhere).counted  # another network; (the rater's earlier battle was left for this one)


def test_starts_are_limited_per_rater_and_network_so_a_script_cannot_spend_the_budgets(arena, rater):
    """A start costs each system a reply; a script that starts battles and never votes is held to STARTS_PER_VOTE
    times the hourly votes, per rater and per network, with the prompt kept and when to send it again."""
    from annotation.arena import abuse

    arena.arena.votes_per_rater_hour, arena.arena.votes_per_network_hour = 2, 3
    arena.arena.save()
    for i in range(2 * abuse.STARTS_PER_VOTE):
        battles.do_start_battle(rater, f"Question {i}?", client="192.0.2.1")
    with pytest.raises(ServiceError, match="You have started 4 battles in the last hour.*send it in 60 minutes"):
        battles.do_start_battle(rater, "One more?", client="192.0.2.1")
    assert Battle.objects.count() == 4 and not Item.objects.filter(input="One more?").exists()
    other = enrolment.do_create_rater_link(arena, "same network")
    for i in range(2):
        battles.do_start_battle(other, f"Other {i}?", client="192.0.2.1")
    with pytest.raises(ServiceError, match="Your network has started 6 battles in the last hour"):
        battles.do_start_battle(other, "And more?", client="192.0.2.1")
    assert battles.do_start_battle(other, "From elsewhere?", client="198.51.100.7").pk  # another network
    # an hour after its first start the rater may start again
    Battle.objects.filter(rater=rater).update(created=timezone.now() - timedelta(minutes=61))
    assert battles.do_start_battle(rater, "One more?", client="203.0.113.9").pk


def test_a_battle_left_for_a_newer_one_takes_no_vote(arena, rater):
    old = ready(rater, "Old?")
    new = ready(rater, "New?")
    assert Assignment.objects.get(pk=old.assignment_id).status == "expired"
    with pytest.raises(ServiceError, match="You started a newer battle"):
        vote(old)
    assert vote(new).counted


def test_an_older_battle_that_settles_after_a_newer_one_started_holds_nothing(arena, rater):
    old = battles.do_start_battle(rater, "Slow one?")
    new = ready(rater, "Quick one?")
    old = answered(old)
    assert old.status == Battle.Status.READY and old.assignment_id is None
    with pytest.raises(ServiceError, match="You started a newer battle"):
        vote(old)
    assert Assignment.objects.get(pk=new.assignment_id).status == "active" and vote(new).counted


def test_each_vote_is_a_judgment_in_export_judgments_whose_item_holds_the_raters_prompt(arena, rater):
    prompts = ["What is a delta?", "Écris un haïku sur la pluie."]
    voted = [ready(rater, prompt) for prompt in prompts[:1]]
    vote(voted[0])
    voted.append(ready(rater, prompts[1]))
    vote(voted[1], "second")
    out = io.StringIO()
    call_command("export_judgments", "--study", arena.name, stdout=out, stderr=io.StringIO())
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["item"] for line in lines] == [f"battle-{b.pk}" for b in voted]
    for line, battle, prompt in zip(lines, voted, prompts, strict=True):
        assert Item.objects.get(study=arena, external_id=line["item"]).input == prompt
        names = {battle.comparison.system_a.name, battle.comparison.system_b.name}
        assert {line["system_a"], line["system_b"]} == names and line["rater"] == "rater-1"
        assert line["choice"] in names and (line["sample_a"], line["sample_b"]) == (0, 0)


def test_the_board_refresh_is_queued_after_a_vote_once_while_it_waits(arena):
    one, two = (enrolment.do_create_rater_link(arena, name) for name in ("b1", "b2"))
    vote(ready(one))
    vote(ready(two))
    assert Job.objects.filter(study=arena, kind=battles.BOARD_JOB, status=Job.Status.QUEUED).count() == 1


# ----------------------------------------------------------------------------------------------------------------
# Turns and the conversation


def test_follow_up_turns_until_the_most_and_the_conversation_each_side_saw(researcher, server):
    study = make_arena(researcher, server, "turns", endpoint_fields={"system_prompt": "Be brief."})
    study.arena.max_turns = 2
    study.arena.save()
    rater_ = enrolment.do_create_rater_link(study, "t")
    battle = battles.do_start_battle(rater_, "First question?")
    with pytest.raises(ServiceError, match="Wait for both replies"):
        battles.do_add_turn(battle, "Too soon")
    battle = answered(battle)
    assert battles.do_add_turn(battle, "  Second question?  ") == 1
    first = {r.side: r.text for r in BattleReply.objects.filter(battle=battle, turn=0)}
    for side in ("a", "b"):
        assert battles.conversation(battle := Battle.objects.get(pk=battle.pk), side, 1) == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "First question?"},
            {"role": "assistant", "content": first[side]},
            {"role": "user", "content": "Second question?"},
        ]
    with pytest.raises(ServiceError, match="Wait for both replies"):
        battles.do_add_turn(battle, "Third?")
    battle = answered(battle)
    assert battle.status == Battle.Status.READY  # a follow-up changes nothing of the vote's pair
    second = {r.side: r.text for r in BattleReply.objects.filter(battle=battle, turn=1)}
    assert battles.conversation(battle, "b")[-1] == {"role": "assistant", "content": second["b"]}
    assert len(battles.conversation(battle, "a")) == 5
    with pytest.raises(ServiceError, match="has its 2 messages, the most"):
        battles.do_add_turn(battle, "Third?")
    vote(battle)
    with pytest.raises(ServiceError, match="This battle is over"):
        battles.do_add_turn(Battle.objects.get(pk=battle.pk), "After the vote?")
    assert Generation.objects.filter(item=battle.item).count() == 2  # only the first replies are samples


def test_a_follow_up_after_a_failed_reply_is_refused(arena, rater):
    battle = ready(rater)
    battles.do_add_turn(battle, "Now fail [[stream-error]]")
    answered(battle)
    with pytest.raises(ServiceError, match="A reply to your last message failed"):
        battles.do_add_turn(battle, "Again?")
    # a system that failed in any turn of the battle fails the battle: no vote counted, a new battle for the rater
    with pytest.raises(ServiceError, match="A system failed in this battle, so it takes no vote"):
        vote(Battle.objects.get(pk=battle.pk))
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.FAILED and not Judgment.objects.exists()


def test_every_battle_reply_counts_against_the_budget_follow_ups_and_failed_battles_too(arena, rater):
    """The ledger holds a ready battle's first replies (sample 0); follow-up turns and a failed battle's replies
    are asked for too and count (models.arena.replies_off_ledger), except a reply never asked (the other failed)."""
    from annotation.generating import runner
    from annotation.models.arena import replies_off_ledger

    battle = ready(rater, "One?")
    battles.do_add_turn(battle, "Two?")
    answered(battle)
    a, b = battle.comparison.system_a_id, battle.comparison.system_b_id
    assert replies_off_ledger(arena.pk) == {a: 1, b: 1}  # the follow-up's two replies
    failed = battles.do_start_battle(rater, "Fail [[stream-error]]")
    answered(failed)
    failed.refresh_from_db()
    assert failed.status == Battle.Status.FAILED
    off = replies_off_ledger(arena.pk)
    asked = BattleReply.objects.filter(battle=failed).exclude(problem=streaming.NOT_ASKED).count()
    assert sum(off.values()) == 2 + asked
    endpoint = SystemEndpoint.objects.get(system_id=a)
    ledger = GenerationCall.objects.filter(endpoint=endpoint).count()
    assert runner.GenerationRun(endpoint).usage().replies == ledger + off.get(a, 0)
    SystemEndpoint.objects.filter(system_id=a).update(request_budget=ledger + off.get(a, 0))
    assert a in battles.out_of_budget(arena)  # the follow-up and failed replies brought it to its budget


# ----------------------------------------------------------------------------------------------------------------
# Attention checks


def test_every_nth_battle_is_an_attention_check_and_a_wrong_answer_screens_the_rater(arena, rater):
    arena.arena.attention_every = 2
    arena.arena.save()
    crowd = arena.crowd_settings
    crowd.screen_min_gold = 1
    crowd.save()
    gold = GoldPair.objects.create(study=arena, input="What is 2 + 2?", good_output="4", bad_output="5")
    first = ready(rater, "A real question?")
    vote(first)
    check = battles.do_start_battle(rater, "My own second question")
    assert check.gold_id == gold.pk and check.comparison_id is None and check.status == Battle.Status.READY
    assert check.prompts == ["What is 2 + 2?"]
    assert Item.objects.get(pk=check.item_id).metadata["typed"] == "My own second question"
    texts = dict(BattleReply.objects.filter(battle=check).values_list("side", "text"))
    assert texts == {"a": "4", "b": "5"}
    with pytest.raises(ServiceError, match="takes no follow-up"):
        battles.do_add_turn(check, "More?")
    wrong = "second" if check.a_shown_first else "first"  # the bad reply
    result = vote(check, wrong)
    assert not result.counted and "attention check" in result.words
    assert GoldAnswer.objects.get().correct is False and Judgment.objects.count() == 1
    assert not Job.objects.filter(kind="generate", params__endpoint=None).exists()
    rater.refresh_from_db()
    assert rater.screened_out
    with pytest.raises(RaterScreenedOut):
        battles.do_start_battle(rater, "Third?")


def test_a_right_answer_to_an_attention_check_keeps_the_rater(arena, rater):
    arena.arena.attention_every = 1
    arena.arena.save()
    GoldPair.objects.create(study=arena, input="Capital of France?", good_output="Paris", bad_output="Rome")
    check = battles.do_start_battle(rater, "Mine")
    vote(check, "first" if check.a_shown_first else "second")
    assert GoldAnswer.objects.get().correct and not Generation.objects.exists()
    rater.refresh_from_db()
    assert not rater.screened_out


# ----------------------------------------------------------------------------------------------------------------
# Flagged votes


def test_flagged_votes_are_kept_and_not_counted_with_the_reason(arena):
    raters = [enrolment.do_create_rater_link(arena, f"f{i}") for i in range(3)]
    voted = [ready(r, f"Prompt {i}?") for i, r in enumerate(raters[:2])]
    for battle in voted:
        vote(battle)
    later = ready(raters[2], "Later?")
    assert rating_battles.do_flag_votes([voted[0].pk, later.pk], "near-duplicate prompt") == 1
    assert rating_battles.do_flag_votes([voted[0].pk], "near-duplicate prompt") == 0  # said once
    assert rating_battles.do_flag_votes([voted[0].pk], "unlikely rater") == 0
    flags = dict(Battle.objects.values_list("pk", "flag"))
    assert flags[voted[0].pk] == "near-duplicate prompt; unlikely rater" and flags[voted[1].pk] == ""
    counted = dict(Judgment.objects.values_list("assignment__battle__pk", "superseded"))
    assert counted == {voted[0].pk: True, voted[1].pk: False}
    result = vote(later)  # flagged before its vote: kept, not counted from the start
    assert not result.counted and result.words == "Your vote is stored, but it does not count in the ratings."
    assert Judgment.objects.get(assignment__battle__pk=later.pk).superseded
    assert Counter(Judgment.objects.values_list("superseded", flat=True)) == Counter({True: 2, False: 1})


def test_the_raters_words_after_a_flagged_vote_never_show_the_flag(arena):
    # a repeated prompt's flag names an earlier battle (another rater's) and what the check found: the researcher's
    # to read on the board; the rater is told their vote is stored and not counted, in words of their own language
    first, second = (enrolment.do_create_rater_link(arena, name) for name in ("w1", "w2"))
    earlier = ready(first, "Same words?")
    vote(earlier)
    later = ready(second, "Same words?")
    why = f"the prompt repeats battle {earlier.pk}'s (the same text)"
    rating_battles.do_flag_votes([later.pk], why)
    result = vote(later)
    assert not result.counted
    assert result.words == "Your vote is stored, but it does not count in the ratings."
    assert "repeat" not in result.words and str(earlier.pk) not in result.words
    later.refresh_from_db()
    assert later.flag == why  # kept for the researcher
    assert battles.outcome(later) == result  # the battle's page after a reload says the same
    assert battles.outcome(ready(first, "Another?")) is None  # before the vote: nothing to say


# ----------------------------------------------------------------------------------------------------------------
# Votes at the same moment: never lost, never counted twice


def at_once(calls) -> list:
    """Run the calls on threads of their own (each with its own database connection), released together; what each
    returned or raised."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(index, call) -> None:
        try:
            barrier.wait()
            results[index] = call()
        except Exception as exc:  # noqa: BLE001 - returned for the test to look at
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.django_db(transaction=True)
def test_double_submits_at_the_same_moment_store_one_vote(arena, rater):
    battle = ready(rater)
    same = at_once([lambda: vote(Battle.objects.get(pk=battle.pk), key="same") for _ in range(6)])
    other = ready(enrolment.do_create_rater_link(arena, "r2"))
    different = at_once([lambda i=i: vote(Battle.objects.get(pk=other.pk), key=f"k{i}") for i in range(6)])
    for results, b in ((same, battle), (different, other)):
        assert [r for r in results if isinstance(r, Exception)] == []
        assert len(set(results)) == 1 and results[0].counted  # every submit was told the one stored vote
        judgment = Judgment.objects.get(assignment__battle__pk=b.pk)
        assert Assignment.objects.get(pk=b.assignment_id).answered == 1 and not judgment.superseded
    assert Judgment.objects.count() == 2
    assert Battle.objects.filter(status=Battle.Status.VOTED).count() == 2


@pytest.mark.django_db(transaction=True)
def test_votes_of_one_network_at_the_same_moment_never_pass_its_limit_together(arena):
    raters = [enrolment.do_create_rater_link(arena, f"n{i}") for i in range(4)]
    ready_ = [answered(battles.do_start_battle(r, f"Net {i}?", client="203.0.113.9")) for i, r in enumerate(raters)]
    arena.arena.votes_per_network_hour = 1  # after the starts (a network starts at most twice its votes)
    arena.arena.save()
    results = at_once([lambda b=b: vote(Battle.objects.get(pk=b.pk)) for b in ready_])
    counted = [r for r in results if isinstance(r, battles.VoteResult)]
    refused = [r for r in results if isinstance(r, ServiceError)]
    assert len(counted) == 1 and counted[0].counted and len(refused) == 3, results
    assert all("Your network has cast 1 vote" in str(r) for r in refused)
    assert Judgment.objects.count() == 1
    assert Counter(Battle.objects.values_list("status", flat=True)) == Counter({"voted": 1, "ready": 3})


@pytest.mark.django_db(transaction=True)
def test_both_streams_finishing_at_the_same_moment_settle_the_battle_once(arena, rater):
    battle = battles.do_start_battle(rater, "Together?")
    streaming.do_complete(battle)  # both replies asked and streamed at once, on threads of their own
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY
    # and settles called together by many requests store nothing twice
    again = battles.do_start_battle(rater, "Again together?")
    BattleReply.objects.filter(battle=again).update(status=BattleReply.Status.DONE, text="Same words.")
    results = at_once([lambda: battles.do_settle(Battle.objects.get(pk=again.pk)).status for _ in range(6)])
    assert results == [Battle.Status.READY] * 6
    for b in (battle, again):
        assert (
            Generation.objects.filter(item_id=b.item_id).count() == 2
            and Pair.objects.filter(item_id=b.item_id).count() == 1
        )
        assert GenerationCall.objects.filter(item_id=b.item_id).count() == 2
    assert Assignment.objects.filter(status="active").get().pk == Battle.objects.get(pk=again.pk).assignment_id


# ----------------------------------------------------------------------------------------------------------------
# What a vote costs the database


def statements(captured) -> list[str]:
    """As the rating page's query-count tests say them ("VERB table"); PostgreSQL's advisory lock, which reads no
    table, by its function."""
    locks = [q for q in captured if "pg_advisory_xact_lock" in q["sql"]]
    return [
        "SELECT pg_advisory_xact_lock" if q in locks else table_statements([q])[0]
        for q in captured
        if q["sql"].split()[0].upper() not in ("SAVEPOINT", "RELEASE")
    ]


def test_a_vote_runs_a_fixed_number_of_statements_each_for_a_reason(researcher, server):
    # Two systems: one pair, whose decision already holds its betting sequence after a first vote. It was 22
    # statements (a lock of the rater's row, each vote limit counted apart, the held pair read twice, the names and
    # settings read under the lock); SQLite's one writer waited for all of it.
    study = make_arena(researcher, server, "costs", labels=("red", "green"))
    rater_ = enrolment.do_create_rater_link(study, "r")
    vote(ready(rater_, "A first vote of the pair?"))
    battle = ready(rater_, "Which river is longest?")
    battle = Battle.objects.select_related("study").get(pk=battle.pk)  # as the vote's page reads it, with its study
    with CaptureQueriesContext(connection) as captured:
        result = vote(battle)
    assert result.counted
    postgres = ["SELECT pg_advisory_xact_lock"] if connection.vendor == "postgresql" else []
    assert statements(captured) == [
        # before the vote's transaction: what it cannot change
        "SELECT annotation_battle",  # the arena's settings, the crowd settings, the systems' names and models
        "SELECT annotation_battlereply",  # the replies the names rule reads (their turns checked under the lock)
        # the transaction (SQLite: one writer at a time from here)
        *postgres,  # the rater's and the network's vote locks, one statement
        "SELECT annotation_battle",  # the battle's row locked, its held pair and judgment, both vote limits' counts
        "UPDATE annotation_assignment",  # recording.do_submit: the answer counted on its assignment (its row lock)
        "SELECT annotation_skip",  # under that lock: the place was not skipped meanwhile (it would count twice)
        "INSERT annotation_judgment",  # the vote
        "SELECT selection_selectionsettings",  # the decision step (selection/hooks.py): the study's settings,
        "SELECT annotation_battle",  # the vote's battle and pair,
        "SELECT annotation_comparison",
        "SELECT selection_pairdecision",  # the pair's decision, locked,
        "SELECT annotation_judgment",  # the vote as an observation,
        "UPDATE selection_pairdecision",  # the decision brought up to date
        "SELECT annotation_assignmenttask",  # a live selection loop's pairs (planning.do_advance_live_selection)
        "UPDATE annotation_battle",  # voted
        # after it: the board's refresh is queued already (no worker here), so nothing more
        "SELECT selection_job",
    ]
