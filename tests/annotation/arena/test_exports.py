"""An arena's exports from the same data: ``export_conversations`` (one battle a line: both conversations as OpenAI
messages, the winner in Chatbot Arena's words, each reply's timing, tokens and cost), and the votes in
``export_preferences --format arena``."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation import elicitation
from annotation.arena import battles
from annotation.models import Battle, BattleReply, GoldPair
from annotation.rating import battles as rating_battles
from annotation.rating.recording import Submission
from annotation.studies import creation, enrolment
from tests.annotation.arena import fixtures
from tests.annotation.arena.fixtures import answered, make_arena
from tests.conftest import study_jsonl

server = fixtures.server  # the fixture


def vote(battle: Battle, choice: str) -> battles.VoteResult:
    return battles.do_vote(battle, Submission(key=f"v{battle.pk}", answer=elicitation.Answer(choice=choice)))


def export(*options: str) -> list[dict]:
    out = io.StringIO()
    call_command("export_conversations", *options, stdout=out, stderr=io.StringIO())
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.fixture
def played(researcher, server):
    """An arena with a system prompt and one battle of each kind: voted after a follow-up, both bad, failed,
    an attention check answered, and a flagged vote."""
    study = make_arena(researcher, server, "played", endpoint_fields={"system_prompt": "Answer in one line."})
    study.arena.max_turns = 2
    study.arena.attention_every = 4
    study.arena.save()
    GoldPair.objects.create(study=study, input="Is water wet?", good_output="Yes.", bad_output="Purple.")
    raters = [enrolment.do_create_rater_link(study, f"p{i}") for i in range(3)]
    made = {}
    made["voted"] = answered(battles.do_start_battle(raters[0], "First prompt?", client="192.0.2.1"))
    battles.do_add_turn(made["voted"], "And then?")
    vote(answered(made["voted"]), "first")
    made["bothbad"] = answered(battles.do_start_battle(raters[0], "Second prompt?"))
    vote(made["bothbad"], "both_bad")
    made["failed"] = answered(battles.do_start_battle(raters[0], "Third [[stream-error]]"))
    made["check"] = battles.do_start_battle(raters[0], "Fourth, mine")  # the rater's 4th: an attention check
    vote(made["check"], "first" if made["check"].a_shown_first else "second")
    made["flagged"] = answered(battles.do_start_battle(raters[1], "Fifth prompt?"))
    vote(made["flagged"], "second")
    rating_battles.do_flag_votes([made["flagged"].pk], "near-duplicate prompt")
    return study, {k: Battle.objects.get(pk=b.pk) for k, b in made.items()}


def test_each_battle_is_a_line_with_both_conversations_and_every_replys_numbers(played, tmp_path):
    study, made = played
    target = tmp_path / "conversations.jsonl"
    call_command("export_conversations", "--study", study.name, "--output", str(target), stderr=io.StringIO())
    lines = {line["battle"]: line for line in map(json.loads, target.read_text().splitlines())}
    assert list(lines) == sorted(b.pk for b in made.values()) and export("--study", study.name) == list(lines.values())

    voted = lines[made["voted"].pk]
    battle = made["voted"]
    names = (battle.comparison.system_a.name, battle.comparison.system_b.name)
    shown_first = "model_a" if battle.a_shown_first else "model_b"
    assert (voted["model_a"], voted["model_b"], voted["shown_left"]) == (*names, shown_first)
    assert (voted["winner"], voted["status"], voted["counted"], voted["flag"]) == (shown_first, "voted", True, None)
    assert (voted["item"], voted["rater"], voted["attention_check"]) == (f"battle-{battle.pk}", "p0", False)
    assert voted["tags"] == battle.tags and voted["category"] is None and voted["voted"].endswith("Z")
    for side in ("a", "b"):
        texts = dict(BattleReply.objects.filter(battle=battle, side=side).values_list("turn", "text"))
        assert voted[f"conversation_{side}"] == [
            {"role": "system", "content": "Answer in one line."},
            {"role": "user", "content": "First prompt?"},
            {"role": "assistant", "content": texts[0]},
            {"role": "user", "content": "And then?"},
            {"role": "assistant", "content": texts[1]},
        ]
        assert voted[f"conversation_{side}"] == battles.conversation(battle, side)  # what the page's streams sent
    replies = {(r["side"], r["turn"]): r for r in voted["replies"]}
    assert set(replies) == {("model_a", 0), ("model_b", 0), ("model_a", 1), ("model_b", 1)}
    for reply in BattleReply.objects.filter(battle=battle):
        line = replies[(f"model_{reply.side}", reply.turn)]
        assert line["model"] == names[0 if reply.side == "a" else 1] and line["status"] == "done"
        assert (line["prompt_tokens"], line["completion_tokens"]) == (reply.prompt_tokens, reply.completion_tokens)
        assert line["completion_tokens"] > 0 and line["cost"] == str(reply.cost)
        assert line["first_token_ms"] == round((reply.first_token - reply.started).total_seconds() * 1000)
        assert line["duration_ms"] == round((reply.finished - reply.started).total_seconds() * 1000)

    assert lines[made["bothbad"].pk]["winner"] == "tie (bothbad)"
    failed = lines[made["failed"].pk]
    assert (failed["status"], failed["winner"], failed["counted"]) == ("failed", None, False)
    assert {r["status"] for r in failed["replies"]} == {"failed"} and all(r["problem"] for r in failed["replies"])
    check = lines[made["check"].pk]
    assert (check["attention_check"], check["model_a"], check["winner"], check["counted"]) == (
        True,
        None,
        "model_a",
        False,
    )
    assert check["conversation_a"] == [
        {"role": "user", "content": "Is water wet?"},
        {"role": "assistant", "content": "Yes."},
    ]
    flagged = lines[made["flagged"].pk]
    second = "model_b" if made["flagged"].a_shown_first else "model_a"
    assert (flagged["winner"], flagged["counted"], flagged["flag"]) == (second, False, "near-duplicate prompt")


def test_the_votes_are_arena_battles_in_export_preferences(played, tmp_path):
    study, made = played
    target = tmp_path / "battles.csv"
    call_command(
        "export_preferences", "--study", study.name, "--format", "arena", "--output", str(target), stdout=io.StringIO()
    )
    rows = list(csv.DictReader(target.open()))
    # every judgment, as every export holds it (a flagged one too: kept and exported); an attention check is none
    voted = [made["voted"], made["bothbad"], made["flagged"]]
    first = "model_a" if made["voted"].a_shown_first else "model_b"
    second = "model_b" if made["flagged"].a_shown_first else "model_a"
    assert sorted((r["question_id"], r["model_a"], r["model_b"], r["winner"]) for r in rows) == sorted(
        (f"battle-{b.pk}", b.comparison.system_a.name, b.comparison.system_b.name, w)
        for b, w in zip(voted, (first, "tie (bothbad)", second), strict=True)
    )


def test_export_conversations_refuses_a_study_that_is_no_arena(researcher):
    creation.do_create_study(researcher, "plain", study_jsonl(), "s.jsonl")
    with pytest.raises(CommandError, match="'plain' is not an arena study"):
        export("--study", "plain")
