"""``setup.do_update_arena``: an arena's own settings changed all or nothing, checked by the ``Arena`` row's
validators; K kept in its two places (the row, and every system's endpoint asking K + 1 samples of a prompt)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from annotation.arena import setup
from annotation.errors import ServiceError
from annotation.models import Arena, SystemEndpoint
from tests.annotation.generating import arena_rows

LOCAL = SimpleNamespace(base_url="http://127.0.0.1:8000/v1")  # never asked: these tests store rows only


@pytest.fixture
def arena(researcher):
    return arena_rows.arena(researcher, LOCAL, samples=2)


def stored(study) -> tuple:
    row = Arena.objects.get(study=study)
    samples = sorted(SystemEndpoint.objects.filter(system__study=study).values_list("samples", flat=True))
    return (
        row.samples,
        row.max_turns,
        row.votes_per_rater_hour,
        row.votes_per_network_hour,
        row.attention_every,
        row.starters,
        row.categories,
        samples,
    )


def test_every_setting_is_stored_and_each_system_asks_k_plus_one_samples(arena):
    k = 5
    setup.do_update_arena(
        arena,
        samples=k,
        max_turns=4,
        votes_per_rater_hour=30,
        votes_per_network_hour=90,
        attention_every=7,
        starters=[" Tell me a joke. ", "Tell me a joke.", "Write a haiku\nabout rain."],
        categories=["coding", "chat"],
    )
    n_systems = arena.systems.count()
    assert stored(arena) == (
        k,
        4,
        30,
        90,
        7,
        ["Tell me a joke.", "Write a haiku\nabout rain."],  # stripped, a repeat dropped, lines kept
        ["coding", "chat"],
        [k + 1] * n_systems,
    )


def test_a_change_leaving_k_alone_leaves_the_endpoints_alone(arena):
    SystemEndpoint.objects.filter(system__study=arena).update(samples=9)  # as if set on a system's own page
    setup.do_update_arena(arena, max_turns=2)
    assert stored(arena)[-1] == [9, 9]


def test_k_is_fixed_once_the_first_battle_starts(arena):
    """Every prompt's separability rests on one K (sep-ELO's weights are on one scale): before any battle K may
    change, after the first it is refused by name and nothing changes; the same K again is no change."""
    setup.do_update_arena(arena, samples=4)
    arena_rows.ready_battle(arena, "An earlier prompt.")
    before = stored(arena)
    with pytest.raises(ServiceError, match=r"samples: K is 4 and the arena has battles"):
        setup.do_update_arena(arena, samples=5, max_turns=2)
    assert stored(arena) == before
    setup.do_update_arena(arena, samples=4, max_turns=2)  # K as it is: the other fields change
    assert stored(arena)[1] == 2 and stored(arena)[-1] == before[-1]


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        (
            {"samples": setup.MAX_SAMPLES + 1},
            f"samples: Ensure this value is less than or equal to {setup.MAX_SAMPLES}",
        ),
        ({"max_turns": 0}, "max_turns: Ensure this value is greater than or equal to 1"),
        ({"votes_per_rater_hour": 0}, "votes_per_rater_hour: Ensure this value is greater than or equal to 1"),
        ({"votes_per_network_hour": 1_000_001}, "votes_per_network_hour: Ensure this value is less than or equal to"),
        ({"attention_every": 101}, "attention_every: Ensure this value is less than or equal to 100"),
        ({"samples": "many"}, "samples: “many” value must be an integer"),
        ({"samples": True}, "samples: a whole number, not True"),
        ({"starters": "one text"}, "starters: a list of texts, not one text"),
        ({"starters": ["x" * (setup.MAX_PROMPT_CHARS + 1)]}, f"{setup.MAX_PROMPT_CHARS + 1:,} characters"),
        ({"categories": [f"c{i}" for i in range(setup.MAX_CATEGORIES + 1)]}, f"{setup.MAX_CATEGORIES + 1} categor"),
        ({"categories": ["  "]}, "A category is empty"),
        ({"budget": 3}, "Not an arena setting: budget"),
    ],
)
def test_a_bad_value_is_refused_by_name_and_nothing_changes(arena, fields, words):
    before = stored(arena)
    with pytest.raises(ServiceError, match=words.replace("(", r"\(")):
        setup.do_update_arena(arena, **{"max_turns": 5, "samples": 1, **fields})  # the good ones neither
    assert stored(arena) == before


def test_a_study_that_is_no_arena_is_refused(study):
    with pytest.raises(ServiceError, match="is not an arena"):
        setup.do_update_arena(study, max_turns=2)
