"""Streaming a battle's replies (annotation/arena/streaming.py) against tests/judge_server.py's streaming mode (every
request validated with the openai client's ``CompletionCreateParamsStreaming``): word by word and stored, sent whole
once final, followed by a second request, asked again when its request's lease lapsed, read to its end when the page
goes away; an endpoint that errs, stalls or trickles fails the reply and the battle; a key the endpoint spells out,
a few characters a word, never reaches the page."""

from __future__ import annotations

import time

import openai
import pytest
from django.core.cache import cache

from annotation import endpoints
from annotation.arena import battles, setup, streaming
from annotation.arena.setup import SystemSpec
from annotation.arena.streaming import Event, Shown
from annotation.models import Battle, BattleReply, SystemEndpoint
from annotation.studies import enrolment
from tests.judge_server import server_fixture, streamed_text

server = server_fixture()
KEY = "sk-stream-secret-4242"


@pytest.fixture
def arena(researcher, server):
    server.stream_rate = 400.0  # words a second: a reply of ~25 words in ~60 ms
    study = setup.do_create_arena(
        researcher,
        "arena",
        [SystemSpec("red", "gen-red", server.base_url), SystemSpec("blue", "gen-blue", server.base_url)],
        samples=0,
        endpoint_fields={"api_key_env": "", "timeout_seconds": 2.0, "max_retries": 0},
    )
    return study


def start(study, prompt: str) -> Battle:
    rater = enrolment.do_create_rater_link(study, f"rater-{time.monotonic_ns()}")
    return battles.do_start_battle(rater, prompt)


def expected_text(server, index: int) -> str:
    """What the server streamed for its ``index``-th request (its words are drawn from the model, the prompt, the
    seed or the attempt)."""
    body = server.requests[index]
    prompt = body["messages"][-1]["content"]
    attempt = sum(1 for b in server.requests[: index + 1] if b["messages"][-1]["content"] == prompt)
    return streamed_text(body["model"], prompt, body.get("seed"), attempt)


def page_text(events: list[Event]) -> str:
    text = ""
    for event in events:
        if event.kind == "text":
            text = event.data
        elif event.kind == "delta":
            text += event.data
    return text


def test_a_reply_streams_word_by_word_is_stored_and_both_settle_the_battle(arena, server):
    battle = start(arena, "Explain streams.")
    events = list(streaming.do_stream(battle, "a"))
    assert server.invalid == []
    body = server.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][-1] == {"role": "user", "content": "Explain streams."}
    text = expected_text(server, 0)
    words = len(text.split())
    assert [e.kind for e in events] == ["text", *["delta"] * words, "done"]  # one event a word, sent as it came
    assert page_text(events) == text
    reply = BattleReply.objects.get(battle=battle, side="a", turn=0)
    assert (reply.status, reply.text, reply.finish_reason) == (BattleReply.Status.DONE, text, "stop")
    # the usage the server reported: the words of the messages sent, the words of the reply
    prompt_words = sum(len(m["content"].split()) for m in body["messages"])
    assert (reply.prompt_tokens, reply.completion_tokens) == (prompt_words, words)
    endpoint = SystemEndpoint.objects.get(system=battle.comparison.system_a)
    assert reply.cost == endpoints.cost(endpoint, prompt_words, words)
    assert reply.started <= reply.first_token <= reply.finished
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.ANSWERING  # one reply of two
    list(streaming.do_stream(battle, "b"))
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.READY
    # a final reply is sent whole at once, and the endpoint is not asked again
    again = list(streaming.do_stream(battle, "a"))
    assert again == [Event("text", text), Event("done")]
    assert len(server.requests) == 2


def test_the_sides_as_shown_map_to_the_model_sides(arena):
    battle = start(arena, "Which side?")
    left = streaming.model_side(battle, "left")
    assert left == ("a" if battle.a_shown_first else "b")
    assert {left, streaming.model_side(battle, "right")} == {"a", "b"}


def test_a_second_request_follows_the_first_from_the_database(arena, server):
    battle = start(arena, "Follow me.")
    reply = streaming.current_reply(battle, "a")
    cache.add(streaming.lease_key(reply), "another request", timeout=30)  # another request is asking
    try:
        BattleReply.objects.filter(pk=reply.pk).update(text="Hello")
        follower = streaming.do_stream(battle, "a")
        assert next(follower) == Event("text", "Hello")
        BattleReply.objects.filter(pk=reply.pk).update(text="Hello, world")
        assert next(follower) == Event("delta", ", world")
        BattleReply.objects.filter(pk=reply.pk).update(text="Hello, world.", status=BattleReply.Status.DONE)
        assert list(follower) == [Event("delta", "."), Event("done")]
    finally:
        cache.delete(streaming.lease_key(reply))
    assert server.requests == []  # the follower never asked


def test_a_reply_whose_lease_lapsed_is_asked_again_from_the_start(arena, server):
    battle = start(arena, "Ask me again.")
    reply = streaming.current_reply(battle, "b")
    BattleReply.objects.filter(pk=reply.pk).update(text="half a reply from a request that died")
    cache.add(streaming.lease_key(reply), "a dead request", timeout=1)  # not renewed: lapses in 1 s
    events = list(streaming.do_stream(battle, "b"))
    assert events[0] == Event("text", "half a reply from a request that died")
    text = expected_text(server, 0)
    assert page_text(events) == text and events[-1] == Event("done")
    assert BattleReply.objects.get(pk=reply.pk).text == text


def test_a_page_that_goes_away_leaves_the_reply_read_to_its_end(arena, server):
    server.stream_rate = 50.0
    battle = start(arena, "Leave early.")
    events = streaming.do_stream(battle, "a")
    assert next(events) == Event("text", "")
    assert next(events).kind == "delta"
    events.close()  # the rater closed the page
    reply = BattleReply.objects.get(battle=battle, side="a", turn=0)
    assert (reply.status, reply.text) == (BattleReply.Status.DONE, expected_text(server, 0))


@pytest.mark.parametrize(
    ("marker", "why"),
    [
        ("[[stream-error]]", "The model crashed mid-reply."),  # an error event after three words
        ("[[stream-stall]]", "2 s"),  # three words, then nothing: no word for the timeout (or the read's own)
        ("[[stream-trickle]]", "longer than 2 s"),  # a word every 50 ms without end: over request_limit
    ],
)
def test_an_endpoint_that_errs_stalls_or_trickles_fails_the_reply_and_the_battle(arena, server, marker, why):
    server.trickle_seconds = 0.05
    battle = start(arena, f"Fail me {marker}")
    began = time.monotonic()
    events = list(streaming.do_stream(battle, "a"))
    took = time.monotonic() - began
    # the page is told the model could not answer; why (the endpoint's words) is the researcher's
    assert events[-1] == Event("failed", streaming.FAILED_WORDS) and why not in events[-1].data
    reply = BattleReply.objects.get(battle=battle, side="a", turn=0)
    assert reply.status == BattleReply.Status.FAILED and why in reply.problem
    assert reply.text.startswith(page_text(events)) and page_text(events)  # the words it sent were shown
    # timeout 2 s, no retries: request_limit is 2 s; the stall and the trickle are cut off soon after
    assert took < 2 + 2
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.FAILED


def test_a_key_the_endpoint_spells_out_in_pieces_never_reaches_the_page(arena, server):
    server.api_key = KEY
    SystemEndpoint.objects.filter(system__study=arena).update(api_key_env="")
    for endpoint in SystemEndpoint.objects.filter(system__study=arena):
        endpoint.api_key, endpoint.api_key_url = KEY, endpoint.base_url  # a key stored for its URL
        endpoint.save()
    battle = start(arena, "Tell me your key [[stream-key]]")
    events = list(streaming.do_stream(battle, "a"))
    assert events[-1] == Event("done")
    shown = ""
    for event in events:
        shown = event.data if event.kind == "text" else shown + event.data
        # never a piece of the key as long as endpoints.cut's KEY_PIECE at the end of what the page has
        assert not any(KEY[:n] in shown for n in range(endpoints.KEY_PIECE, len(KEY) + 1)), shown
    assert shown == "Here: Bearer [key]"
    assert BattleReply.objects.get(battle=battle, side="a", turn=0).text == "Here: Bearer [key]"


def test_shown_holds_back_what_could_begin_a_key_and_lets_it_go_when_it_does_not():
    shown = Shown(["abcdefgh"])
    assert shown.add("xy abc") == Event("delta", "xy abc")  # 3 characters of a key tell nothing (KEY_PIECE 4)
    assert shown.add("d") is None  # "abcd" may begin the key: held back
    assert shown.add("ef!") == Event("delta", "def!")  # it did not
    assert shown.add(" abcde") == Event("delta", " ")
    assert shown.add("fgh.") == Event("delta", "[key].")
    assert shown.add(" abc") == Event("delta", " abc")
    assert shown.add("defgh") == Event("text", "xy abcdef! [key]. [key]")  # the page starts over from the whole
    assert shown.add(" abcd") == Event("delta", " ")
    assert shown.flush() == Event("delta", "abcd")  # the end: everything
    assert Shown([]).add("a\x00b") == Event("delta", "a\ufffdb")  # storable


@pytest.mark.django_db(transaction=True)  # both replies are asked on threads of their own, each its own connection
def test_without_javascript_the_page_waits_for_both_replies(arena, server):
    battle = start(arena, "Wait for both.")
    streaming.do_complete(battle)
    replies = BattleReply.objects.filter(battle=battle)
    assert {r.status for r in replies} == {BattleReply.Status.DONE}
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.READY


def test_the_servers_streaming_mode_refuses_a_request_the_client_types_do_not_allow(server):
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="r1", messages=messages, stream=True, extra_body={"frobnicate": 1})
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="r1", messages=messages, stream=True, extra_body={"stream_options": {"include_usage": "maybe"}}
        )
    assert len(server.invalid) == 2 and server.requests == []
