"""An arena against the local OpenAI-compatible server (tests/judge_server.py, streaming), and how a test drives a
battle's replies: through ``streaming.do_stream``, as the rater's page does.

A vote on a reply that names its own model is refused (Chatbot Arena's rule, ``abuse.names_own_model``); the
server's streamed reply names its model only for a prompt with ``[[say-name]]``, and the systems here answer as models
whose names are too short to be looked for anyway ("m1", "m2", "m3": ``abuse.MIN_NAME_CHARS``)."""

from __future__ import annotations

import pytest

from annotation.arena import setup, streaming
from annotation.arena.setup import SystemSpec
from annotation.models import Battle
from annotation.studies import enrolment
from tests.judge_server import running

LABELS = ("red", "green", "blue")


@pytest.fixture
def server():
    with running() as server:
        server.stream_rate = 1000.0  # words a second: a reply streams in a few milliseconds
        yield server


def make_arena(researcher, server, name: str = "arena", labels=LABELS, models=None, **kwargs):
    models = models or [f"m{i + 1}" for i in range(len(labels))]
    specs = [SystemSpec(label, model, server.base_url) for label, model in zip(labels, models, strict=True)]
    fields = {"timeout_seconds": 5.0, "max_retries": 0, **kwargs.pop("endpoint_fields", {})}
    return setup.do_create_arena(researcher, name, specs, endpoint_fields=fields, **kwargs)


@pytest.fixture
def arena(researcher, server):
    return make_arena(researcher, server)


@pytest.fixture
def rater(arena):
    return enrolment.do_create_rater_link(arena, "rater-1")


def answered(battle: Battle) -> Battle:
    """Both replies of the battle's current turn streamed to their end (side a, then b), the battle as it is then."""
    for side in ("a", "b"):
        for _ in streaming.do_stream(Battle.objects.get(pk=battle.pk), side):
            pass
    return Battle.objects.get(pk=battle.pk)
