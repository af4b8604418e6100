"""A new arena: ``setup.do_create_arena`` and ``manage.py create_arena`` (the issue's contract line): the study with
an arena's settings, its ``Arena`` row, each system from its endpoint with K + 1 samples, every system pair a
comparison and no rating task; the open rater link printed as ``external_link`` prints links; every bad input refused
by name with nothing created."""

from __future__ import annotations

import io
import re
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.access import access_open_link
from annotation.arena import setup
from annotation.arena.setup import SystemSpec
from annotation.errors import ServiceError
from annotation.models import Arena, Battle, Comparison, Item, Study, System, SystemEndpoint, Task
from annotation.plan import planning
from annotation.studies import enrolment, lifecycle

URL = "http://127.0.0.1:8000/v1"


def create(*options: str) -> str:
    out = io.StringIO()
    call_command("create_arena", *options, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def specs(*labels: str) -> list[SystemSpec]:
    return [SystemSpec(label, f"gen-{label}", URL) for label in labels]


def test_an_arena_is_a_study_of_its_kind_with_every_system_pair_and_no_tasks(researcher):
    study = setup.do_create_arena(
        researcher,
        "  arena  ",
        specs("red", "green", "blue"),
        samples=4,
        endpoint_fields={"request_budget": 50, "temperature": 0.7},
        starters=["Tell me a joke.", " Tell me a joke. ", "Write a haiku."],
        categories=["coding", "chat"],
    )
    study = Study.objects.get(pk=study.pk)
    assert study.name == "arena" and study.is_arena and study.accepts_raters
    assert (study.allow_tie, study.neither_option, study.open_link_enabled) == (True, True, True)
    assert (study.raters_per_item, study.pairs_per_assignment, study.elicitation) == (1, 1, "forced_choice")
    arena = Arena.objects.get(study=study)
    assert arena.samples == 4 and arena.starters == ["Tell me a joke.", "Write a haiku."]
    assert arena.categories == ["coding", "chat"]
    endpoints = list(SystemEndpoint.objects.filter(system__study=study).order_by("id"))
    assert [(e.system.name, e.model, e.base_url, e.samples) for e in endpoints] == [
        (name, f"gen-{name}", URL, 4 + 1) for name in ("red", "green", "blue")
    ]
    assert {(e.request_budget, e.temperature, e.api_key_env) for e in endpoints} == {(50, 0.7, "")}
    pairs = set(Comparison.objects.filter(study=study).values_list("system_a__name", "system_b__name"))
    assert pairs == {("red", "green"), ("red", "blue"), ("green", "blue")}  # 3 choose 2, in the order added
    assert not Task.objects.filter(study=study).exists()
    assert study.crowd_settings is not None and study.selection_settings is not None  # every settings row


def test_rebuilding_an_arenas_plan_keeps_its_pairs_and_releases_nothing(researcher):
    study = setup.do_create_arena(researcher, "rebuilt", specs("a", "b"))
    before = list(study.comparisons.values_list("pk", flat=True))
    assert planning.do_rebuild_plan(study) == 0
    assert list(study.comparisons.values_list("pk", flat=True)) == before
    assert [s.name for s in planning.systems_with_outputs(study)] == ["a", "b"]  # compared without outputs


@pytest.mark.parametrize(
    ("systems", "kwargs", "said"),
    [
        (specs("a"), {}, "at least two systems"),
        ([SystemSpec("a", "m", URL), SystemSpec("A", "m", URL)], {}, "Two systems are labelled 'A'"),
        ([SystemSpec("a", "", URL), SystemSpec("b", "m", URL)], {}, "a label, a model and a base URL"),
        (specs("a", "b"), {"samples": 11}, "K is a whole number from 0 to 10"),
        (specs("a", "b"), {"samples": -1}, "K is a whole number from 0 to 10"),
        (specs("a", "b"), {"starters": ["  "]}, "A starter prompt is empty"),
        (specs("a", "b"), {"starters": ["x" * 8001]}, "8,001 characters; at most 8,000"),
        (specs("a", "b"), {"categories": ["c" * 101]}, "at most 100"),
        (specs("a", "b"), {"base_url": "ftp://example.org"}, "is not an http(s) address"),
        (specs("a", "b"), {"endpoint_fields": {"temperature": 3.0}}, "System 'a': temperature:"),
        (specs("a", "b"), {"endpoint_fields": {"model": "x"}}, "model is set per system"),
        (specs("a", "b"), {"endpoint_fields": {"colour": "red"}}, "Not an endpoint setting"),
        ([SystemSpec("a", "m", "http://169.254.169.254/v1"), *specs("b")], {}, "System 'a': base_url:"),
    ],
)
def test_bad_input_is_refused_by_name_and_nothing_is_created(researcher, systems, kwargs, said):
    with pytest.raises(ServiceError, match=re.escape(said)):
        setup.do_create_arena(researcher, "bad", systems, **kwargs)
    assert not Study.objects.exists() and not System.objects.exists() and not Arena.objects.exists()


def test_a_name_the_researcher_has_already_is_refused(researcher):
    setup.do_create_arena(researcher, "taken", specs("a", "b"))
    with pytest.raises(ServiceError, match="you already have a study named 'taken'"):
        setup.do_create_arena(researcher, "taken", specs("c", "d"))
    assert Study.objects.count() == 1 and System.objects.count() == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "small=llama3.2:1b@http://127.0.0.1:11434/v1",
            SystemSpec("small", "llama3.2:1b", "http://127.0.0.1:11434/v1"),
        ),
        ("x = org/model@v2@https://api.example.org/v1", SystemSpec("x", "org/model@v2", "https://api.example.org/v1")),
    ],
)
def test_a_system_option_reads_label_model_and_url(text, expected):
    assert setup.parse_system(text) == expected


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("small", "write LABEL=MODEL@BASE_URL"),
        ("small=model", "write LABEL=MODEL@BASE_URL"),
        ("small=model@127.0.0.1:8000", "write LABEL=MODEL@BASE_URL"),
        ("=model@http://h/v1", "the label before '=' is empty"),
        ("a=@http://h/v1", "the model between '=' and '@' is empty"),
    ],
)
def test_a_malformed_system_option_says_what_is_wrong(text, said):
    with pytest.raises(ServiceError, match=re.escape(said)):
        setup.parse_system(text)


def test_create_arena_prints_the_open_rater_link_that_opens_the_arena(researcher):
    said = create(
        "--name",
        "cli arena",
        "--system",
        f"one=gen-one@{URL}",
        "--system",
        f"two=gen-two@{URL}",
        "--system",
        f"three=gen-three@{URL}",
        "--samples",
        "2",
        "--base-url",
        "https://arena.example.org/",
        "--budget",
        "20",
        "--temperature",
        "0.5",
        "--max-tokens",
        "256",
        "--timeout",
        "30",
        "--retries",
        "2",
        "--concurrency",
        "8",
        "--seed",
        "7",
        "--system-prompt",
        "Be brief.",
        "--price-input",
        "0.5",
        "--price-output",
        "1.5",
    )
    study = Study.objects.get(name="cli arena")
    assert study.owner == researcher and study.is_arena and study.arena.samples == 2
    assert "Created arena 'cli arena': 3 systems (one, two, three), 3 system pairs, K = 2" in said
    url = re.search(r"^URL to paste: (\S+)$", said, re.M)
    assert url is not None and url[1] == f"https://arena.example.org{study.open_link_path()}"
    assert access_open_link(url[1].rsplit("/join/", 1)[1].strip("/")) == study  # the link opens this study
    fields = set(
        SystemEndpoint.objects.filter(system__study=study).values_list(
            "request_budget",
            "temperature",
            "max_tokens",
            "timeout_seconds",
            "max_retries",
            "max_concurrency",
            "seed",
            "system_prompt",
            "price_input",
            "price_output",
            "samples",
        )
    )
    assert fields == {(20, 0.5, 256, 30.0, 2, 8, 7, "Be brief.", Decimal("0.5"), Decimal("1.5"), 3)}


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--system", f"one=m@{URL}"], "at least two systems"),
        (["--system", f"one=m@{URL}", "--system", "two=m"], "write LABEL=MODEL@BASE_URL"),
        (["--system", f"one=m@{URL}", "--system", f"two=m@{URL}", "--timeout", "200"], "timeout_seconds"),
        (["--system", f"one=m@{URL}", "--system", f"two=m@{URL}", "--api-key-env", "NOPE"], "api_key_env"),
        (["--system", f"one=m@{URL}", "--system", f"two=m@{URL}", "--owner", "nobody"], "No user named 'nobody'"),
    ],
)
def test_create_arena_refuses_bad_input_and_creates_nothing(researcher, options, said):
    with pytest.raises(CommandError, match=re.escape(said)):
        create("--name", "refused", *options)
    assert not Study.objects.exists() and not System.objects.exists()


def test_create_arena_takes_every_endpoint_option_of_generate_and_no_other():
    """The contract: generate's options but the study, the system, its URL, its model and K apply to every system."""
    from annotation.management.commands import create_arena, generate

    def options(command) -> set[str]:
        parser = command.Command().create_parser("manage.py", command.__name__.rsplit(".", 1)[1])
        return {o for action in parser._actions for o in action.option_strings}

    own = {"--study", "--system", "--base-url", "--model", "--samples"}
    arena_own = {"--name", "--system", "--samples", "--base-url", "--owner", "--description", "--starter", "--category"}
    assert options(generate) - own == options(create_arena) - arena_own
    assert "--price-output" in options(create_arena) and "--api-key-env" in options(create_arena)


def test_create_arena_without_systems_is_an_argument_error(researcher):
    with pytest.raises(CommandError, match="--system"):
        create("--name", "none")
    assert not Study.objects.exists()


def test_an_arenas_pairs_may_change_until_one_has_battles(researcher):
    study = setup.do_create_arena(researcher, "re-paired", specs("red", "green", "blue"))
    red, green = study.systems.get(name="red"), study.systems.get(name="green")
    lifecycle.do_update_settings(study, {"pair_mode": Study.PairMode.BASELINE, "baseline": red}, None)
    pairs = set(study.comparisons.values_list("system_a__name", "system_b__name"))
    assert pairs == {("green", "red"), ("blue", "red")}  # each system against the baseline
    green_red = study.comparisons.get(system_a=green)
    rater = enrolment.do_create_rater_link(study, "r")
    item = Item.objects.create(study=study, external_id="battle-x", input="Hi?", position=0)
    Battle.objects.create(study=study, rater=rater, item=item, comparison=green_red, a_shown_first=True)
    with pytest.raises(ServiceError, match="This arena has battles of green vs red, so its system pairs can no longer"):
        lifecycle.do_update_settings(Study.objects.get(pk=study.pk), {"pair_mode": Study.PairMode.ALL}, None)
    study.refresh_from_db()
    assert study.pair_mode == Study.PairMode.BASELINE and study.comparisons.count() == 2
    assert Battle.objects.get().comparison_id == green_red.pk and not Task.objects.filter(study=study).exists()
