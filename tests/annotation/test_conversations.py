"""Conversation items: a study file's OpenAI-style ``messages`` (JSONL, and a ``messages`` column in CSV) checked by
line and field, stored with their transcript as the input, shown as a conversation with the judged turn marked on
the rater's page, the preview and the item page, sent as the chat to an endpoint that generates a system's outputs,
and kept by the API and a duplicate."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from annotation import conversations
from annotation.exchange.rules import FormatError
from annotation.exchange.study_files import parse_study
from annotation.generating import runner
from annotation.models import Generation, Item
from annotation.rating import allocation
from annotation.studies import creation, enrolment, lifecycle
from tests.annotation.test_team import client_for
from tests.judge_server import server_fixture

server = server_fixture()

CHAT = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": "I want to visit Lisbon in May."},
    {"role": "assistant", "content": "Lovely choice! How many days?"},
    {"role": "user", "content": "Four days. <script>alert(1)</script> What should I see?"},
]


def line(item_id: str, messages, **more) -> dict:
    return {
        "id": item_id,
        "messages": messages,
        "outputs": {"sys-a": [f"Belém and Alfama ({item_id})."], "sys-b": [f"Sintra ({item_id})."]},
        **more,
    }


def jsonl(*lines: dict) -> bytes:
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


def problems_of(data: bytes, filename: str = "s.jsonl") -> list[tuple[int | None, str | None, str]]:
    with pytest.raises(FormatError) as refused:
        parse_study(data, filename)
    return [(p.line, p.field, p.message) for p in refused.value.problems]


def test_a_conversation_is_read_with_its_transcript_as_the_input():
    parts = [
        *CHAT[:3],
        {"role": "user", "content": [{"type": "text", "text": "Four days."}, {"type": "text", "text": "What?"}]},
    ]
    parsed = parse_study(jsonl(line("c1", CHAT), line("c2", parts)), "s.jsonl")
    first, second = parsed.items
    assert first.messages == CHAT and second.messages[-1] == {"role": "user", "content": "Four days.\n\nWhat?"}
    assert first.input == (
        "System: You are a travel agent.\n\nUser: I want to visit Lisbon in May.\n\n"
        "Assistant: Lovely choice! How many days?\n\nUser: Four days. <script>alert(1)</script> What should I see?"
    )
    assert parsed.systems == ["sys-a", "sys-b"]


def test_every_problem_of_a_conversation_is_named_by_line_and_field():
    found = problems_of(
        jsonl(
            line("ok", CHAT),
            line("not-a-list", "hello"),
            line("bad-role", [{"role": "robot", "content": "hi"}]),
            line("empty", [{"role": "user", "content": "  "}]),
            line("tool", [{"role": "user", "content": "hi", "tool_calls": []}]),
            line("ends-with-assistant", CHAT[:3]),
            {**line("both", CHAT), "input": "also this"},
            line("image", [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
            line("huge", [{"role": "user", "content": "x" * 200}] * (conversations.MAX_TURNS + 1)),
        )
    )
    by_line = {(n, field): reason for n, field, reason in found}
    assert "non-empty list" in by_line[(2, "messages")]
    assert "role must be one of system, developer, user, assistant" in by_line[(3, "messages[0].role")]
    assert by_line[(4, "messages[0].content")] == "empty content"
    assert "tool calls are not supported" in by_line[(5, "messages[0]")]
    assert "the last message must be the user's" in by_line[(6, "messages[2].role")]
    assert "not both" in by_line[(7, "messages")]
    assert "content must be text" in by_line[(8, "messages[0].content")]
    assert f"at most {conversations.MAX_TURNS} messages" in by_line[(9, "messages")]
    assert not any(n == 1 for n, _, _ in found)  # the good line has no problem


def test_a_conversation_longer_than_the_text_limit_is_refused():
    long_chat = [{"role": "user", "content": "x" * 60}, {"role": "assistant", "content": "y" * 60}] * 2
    with pytest.raises(FormatError) as refused:
        parse_study(jsonl(line("long", long_chat[:-1])), "s.jsonl", max_text_chars=100)
    assert any(p.field == "messages" and "the limit is 100" in p.message for p in refused.value.problems)


def csv_file(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue().encode()


def test_a_csv_holds_a_conversation_as_json_in_a_messages_column():
    chat = json.dumps(CHAT)
    parsed = parse_study(
        csv_file(
            [
                ["item_id", "messages", "system", "sample", "output"],
                ["c1", chat, "sys-a", "0", "Belém."],
                ["c1", chat, "sys-b", "0", "Sintra."],
            ]
        ),
        "s.csv",
    )
    assert parsed.items[0].messages == CHAT and parsed.items[0].outputs == {"sys-a": ["Belém."], "sys-b": ["Sintra."]}
    found = problems_of(
        csv_file(
            [
                ["item_id", "messages", "system", "sample", "output"],
                ["c1", chat, "sys-a", "0", "Belém."],
                ["c1", json.dumps(CHAT[:2] + CHAT[3:]), "sys-b", "0", "Sintra."],
                ["c2", "{not json", "sys-a", "0", "x"],
            ]
        ),
        "s.csv",
    )
    assert (3, "messages", "differs from line 2 for item 'c1'") in found
    assert any(n == 4 and field == "messages" and "malformed JSON" in reason for n, field, reason in found)
    both = problems_of(csv_file([["item_id", "input", "messages", "system", "sample", "output"]]), "s.csv")
    assert any(field == "messages" and "not both" in reason for _, field, reason in both)
    alone = parse_study(csv_file([["item_id", "messages"], ["c1", chat]]), "inputs.csv")  # inputs alone
    assert alone.items[0].messages == CHAT and alone.systems == []


@pytest.fixture
def chat_study(researcher):
    study = creation.do_create_study(researcher, "chats", jsonl(line("c1", CHAT), line("c2", CHAT[1:2])), "s.jsonl")
    return lifecycle.do_update_settings(study, {"raters_per_item": 1}, None)


def test_the_rater_sees_the_conversation_and_the_judged_turn_marked(chat_study, client):
    rater = enrolment.do_create_rater_link(chat_study, "reader")
    assignment = allocation.do_start_assignment(rater)
    assert assignment is not None
    page = client.get(reverse("rate", args=[rater.token(), assignment.pk])).content.decode()
    assert 'data-testid="conversation"' in page and 'data-testid="judged-turn"' in page
    assert "The turn you judge: the assistant's next reply" in page
    first = assignment.pairs.order_by("position").first().pair.item
    assert page.count('data-testid="turn"') == len(first.messages)
    assert "<script>alert(1)</script>" not in page  # a turn is untrusted text


def test_the_item_page_and_the_preview_show_the_turns(chat_study, researcher_client):
    item = chat_study.items.get(external_id="c1")
    page = researcher_client.get(reverse("item_detail", args=[chat_study.pk, item.pk])).content.decode()
    assert "A conversation of 4 messages" in page and page.count('data-testid="turn"') == 4
    assert "You are a travel agent." in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'data-testid="judged-turn"' in page
    preview = researcher_client.get(reverse("study_preview", args=[chat_study.pk])).content.decode()
    assert 'data-testid="conversation"' in preview and 'data-testid="judged-turn"' in preview


def test_the_api_and_a_duplicate_keep_the_conversation(chat_study, researcher):
    items = client_for(researcher).get(f"/api/studies/{chat_study.pk}/items/").json()["results"]
    assert {i["id"]: i["messages"] for i in items}["c1"] == CHAT
    copy = lifecycle.do_duplicate_study(chat_study, "chats again", researcher)
    assert Item.objects.get(study=copy, external_id="c1").messages == CHAT


def test_an_endpoint_generating_a_system_is_sent_the_conversation(researcher, server):
    study = creation.do_create_study(researcher, "to generate", jsonl({"id": "c1", "messages": CHAT}), "s.jsonl")
    endpoint = runner.do_add_endpoint_system(
        study,
        "agent",
        base_url=server.base_url,
        model="gen-agent-1",
        api_key_env="",
        samples=1,
        max_retries=1,
        timeout_seconds=5.0,
        system_prompt="Answer in one line.",
    )
    assert runner.GenerationRun(endpoint).do_run().recorded == 1 and not server.invalid
    (sent,) = server.requests  # validated against the openai client's own message types
    # one leading system message: the endpoint's prompt, then the conversation's own
    assert sent["messages"] == [
        {"role": "system", "content": "Answer in one line.\n\nYou are a travel agent."},
        *CHAT[1:],
    ]
    assert Generation.objects.filter(system=endpoint.system).count() == 1
    # a developer turn goes as a system one, merged with the leading system message; a plain input as the user's
    run = runner.GenerationRun(endpoint)
    developer = runner.Request(1, 0, "x", (("developer", "Be terse."), ("user", "Hi"), ("assistant", "Yes?")))
    assert run.messages(developer) == [
        {"role": "system", "content": "Answer in one line.\n\nBe terse."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Yes?"},
    ]
    assert run.messages(runner.Request(1, 0, "Plain?")) == [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "Plain?"},
    ]


def test_a_german_rater_reads_the_conversation_in_german(chat_study, client):
    lifecycle.do_update_settings(chat_study, {"raters_language": "de"}, None)
    rater = enrolment.do_create_rater_link(chat_study, "leser")
    assignment = allocation.do_start_assignment(rater)
    assert assignment is not None
    page = client.get(reverse("rate", args=[rater.token(), assignment.pk])).content.decode()
    assert ">Unterhaltung<" in page and "Zu beurteilen ist die nächste Antwort des Assistenten" in page
    assert ">Nutzer<" in page and ">User<" not in page and "The turn you judge" not in page


def test_a_long_conversation_shows_its_last_three_messages_and_folds_the_earlier_ones(researcher, client):
    chat = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"Turn number {i}."} for i in range(6)] + [
        {"role": "user", "content": "The last question?"}
    ]
    study = creation.do_create_study(researcher, "long chat", jsonl(line("long", chat)), "s.jsonl")
    rater = enrolment.do_create_rater_link(study, "reader")
    assignment = allocation.do_start_assignment(rater)
    assert assignment is not None
    page = client.get(reverse("rate", args=[rater.token(), assignment.pk])).content.decode()
    folded, shown = page.split('data-testid="earlier-turns"')[1].split("</details>")
    assert "The earlier messages (4)" in folded and folded.count('data-testid="turn"') == 4
    assert shown.count('data-testid="turn"') == 3 and 'start="5"' in shown and "The last question?" in shown
    item = study.items.get()
    client.force_login(researcher)  # the item page shows every message
    item_page = client.get(reverse("item_detail", args=[study.pk, item.pk])).content.decode()
    assert item_page.count('data-testid="turn"') == 7 and "earlier-turns" not in item_page
