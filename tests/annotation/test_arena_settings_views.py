"""The Arena settings page (annotation/views/arena_settings.py) and an arena's study page: the form stores every
setting through ``setup.do_update_arena`` or none, each refusal beside its field with the line it is about; the study
page of an arena shows its link, battles, systems and budgets first and none of a file study's plan; a command with
the study's name is printed quoted for the shell."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

import pytest
from django.urls import reverse
from django.utils.html import escape

from annotation.arena import setup
from annotation.models import Arena, Battle, SystemEndpoint
from annotation.templatetags.shell import shell_quoted
from tests.annotation.generating import arena_rows

LOCAL = SimpleNamespace(base_url="http://127.0.0.1:8000/v1")  # never asked: these tests store rows only
BUDGET = 5


@pytest.fixture
def arena(researcher):
    study = arena_rows.arena(researcher, LOCAL, samples=2, request_budget=BUDGET)
    setup.do_update_arena(study, starters=["Write a haiku.", "Explain\nrecursion."], categories=["poetry"])
    return study


def form_data(**changes) -> dict:
    data = {
        "samples": "3",
        "max_turns": "2",
        "votes_per_rater_hour": "20",
        "votes_per_network_hour": "200",
        "attention_every": "0",
        "starters": "Write a haiku.\r\nTell me a joke.\r\n\r\nTell me a joke.",
        "categories": "poetry\r\njokes",
    }
    return {**data, **changes}


def stored(study) -> tuple:
    row = Arena.objects.get(study=study)
    endpoints = sorted(SystemEndpoint.objects.filter(system__study=study).values_list("samples", flat=True))
    return row.samples, row.max_turns, row.votes_per_rater_hour, row.starters, row.categories, endpoints


def test_the_page_shows_the_settings_with_a_line_each(researcher_client, arena):
    page = researcher_client.get(reverse("arena_settings", args=[arena.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Write a haiku.\nExplain\nrecursion.</textarea>" in html and "poetry</textarea>" in html
    assert 'name="samples" value="2" min="0" max="10"' in html  # the row's validators, in the browser
    assert "Fixed once the first battle starts" in html


def test_a_valid_post_stores_everything_and_each_system_asks_k_plus_one(researcher_client, arena):
    page = researcher_client.post(reverse("arena_settings", args=[arena.pk]), form_data())
    assert page.status_code == 302 and page.url == arena.get_absolute_url()
    k = 3
    assert stored(arena) == (k, 2, 20, ["Write a haiku.", "Tell me a joke."], ["poetry", "jokes"], [k + 1, k + 1])


def test_starters_left_as_shown_keep_a_starter_of_several_lines(researcher_client, arena):
    shown = "Write a haiku.\r\nExplain\r\nrecursion."
    researcher_client.post(reverse("arena_settings", args=[arena.pk]), form_data(starters=shown))
    assert Arena.objects.get(study=arena).starters == ["Write a haiku.", "Explain\nrecursion."]


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        (
            {"starters": "fine\n" + "x" * (setup.MAX_PROMPT_CHARS + 1)},
            f"Line 2 has {setup.MAX_PROMPT_CHARS + 1:,} characters; a starter prompt has at most "
            f"{setup.MAX_PROMPT_CHARS:,}.",
        ),
        (
            {"categories": "\n".join(f"c{i}" for i in range(setup.MAX_CATEGORIES + 1))},
            f"{setup.MAX_CATEGORIES + 1} categories (blank lines and repeats dropped); an arena has at most "
            f"{setup.MAX_CATEGORIES}.",
        ),
        (
            {"categories": "ok\n\n" + "c" * (setup.MAX_CATEGORY_CHARS + 1)},
            f"Line 3 has {setup.MAX_CATEGORY_CHARS + 1} characters; a category has at most {setup.MAX_CATEGORY_CHARS}.",
        ),
        ({"samples": str(setup.MAX_SAMPLES + 1)}, f"less than or equal to {setup.MAX_SAMPLES}"),
        ({"max_turns": "0"}, "greater than or equal to 1"),
        ({"votes_per_network_hour": "1000001"}, "less than or equal to 1000000"),
        ({"attention_every": "-1"}, "greater than or equal to 0"),
        ({"votes_per_rater_hour": "many"}, "Enter a whole number."),
    ],
)
def test_an_invalid_post_changes_nothing_and_says_what_is_wrong(researcher_client, arena, changes, words):
    before = stored(arena)
    page = researcher_client.post(reverse("arena_settings", args=[arena.pk]), form_data(**changes))
    assert page.status_code == 400
    html = page.content.decode()
    assert escape(words) in html and "Nothing was saved" in html
    assert stored(arena) == before


def test_the_page_is_its_researchers_and_an_arenas_only(client, researcher_client, other_researcher, arena, study):
    assert researcher_client.get(reverse("arena_settings", args=[study.pk])).status_code == 404  # no arena
    client.force_login(other_researcher)
    assert client.get(reverse("arena_settings", args=[arena.pk])).status_code == 404
    assert client.post(reverse("arena_settings", args=[arena.pk]), form_data()).status_code == 404
    assert Arena.objects.get(study=arena).max_turns == 3  # the default, unchanged


def test_an_arenas_study_page_shows_its_battles_systems_and_links_first(researcher_client, researcher, arena):
    battles = [arena_rows.ready_battle(arena, f"Prompt {i}.") for i in range(BUDGET)]
    statuses = [Battle.Status.VOTED, Battle.Status.VOTED, Battle.Status.FAILED, Battle.Status.REFUSED]
    for battle, status in zip(battles, statuses, strict=False):
        Battle.objects.filter(pk=battle.pk).update(status=status, flag="why" if status == "refused" else "")
    Battle.objects.filter(pk=battles[1].pk).update(flag="near-duplicate prompt")
    arena.name = "Team arena"
    arena.save(update_fields=["name"])
    html = researcher_client.get(arena.get_absolute_url()).content.decode()
    summary = html[html.index('data-testid="arena-summary"') :]
    assert html.index('data-testid="arena-summary"') < html.index("<h2>Manage</h2>")
    assert arena.open_link_path() in summary
    assert reverse("arena_settings", args=[arena.pk]) in summary and reverse("arena_board", args=[arena.pk]) in summary
    # every ready battle holds one ledger row a system: the budget used is the battles each system was in
    assert f"{BUDGET} / {BUDGET}" in summary and 'data-testid="budget-used-up"' in summary
    assert (
        f"<strong>{BUDGET}</strong> battles started on <strong>{BUDGET}</strong> prompts:\n"
        "    <strong>2</strong> voted, <strong>1</strong> failed (a system failed: no vote), <strong>1</strong> vote "
        "refused, <strong>1</strong> flagged (kept, not counted)."
    ) in summary
    assert escape(f"export_conversations --study {shlex.quote('Team arena')}") in summary
    for absent in ("Each assignment:", "Human judgments / plan", "per item (N)", "no-minimum-time", 'id="selection"'):
        assert absent not in html, absent


def test_a_file_studys_page_has_no_arena_section(researcher_client, study):
    html = researcher_client.get(study.get_absolute_url()).content.decode()
    assert "arena-summary" not in html and "Arena settings" not in html
    assert "Each assignment:" in html and 'id="selection"' in html


@pytest.mark.parametrize("name", ["Team arena", "it's", "plain-name", "$(rm -rf ~)", "a\nb"])
def test_a_study_name_is_one_shell_word(name):
    assert shlex.split(shell_quoted(name)) == [name]


def test_the_budget_planners_command_quotes_the_name(researcher_client, study):
    study.name = "Team study"
    study.save(update_fields=["name"])
    html = researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    assert escape("plan_budget --study 'Team study'") in html


def test_a_change_of_the_arena_settings_is_in_the_audit_trail_before_and_after(researcher_client, arena):
    from annotation.models import AuditEntry

    researcher_client.post(reverse("arena_settings", args=[arena.pk]), form_data())
    entry = AuditEntry.objects.get(study=arena, action="arena_settings")
    assert entry.username == "alice" and entry.detail["samples"] == ["2", "3"] and entry.detail["max_turns"][1] == "2"
    assert "samples" in researcher_client.get(reverse("team", args=[arena.pk])).content.decode()


def test_an_arenas_rater_link_is_shown_to_its_editors_only(client, researcher, arena, other_researcher):
    from annotation.studies import enrolment, team

    enrolment.do_set_open_link(arena, True)
    team.do_add_member(arena, other_researcher.username, "viewer", researcher)
    client.force_login(other_researcher)
    page = client.get(reverse("study_detail", args=[arena.pk])).content
    assert arena.open_link_path().encode() not in page and b'data-testid="arena-link-hidden"' in page
    client.force_login(researcher)
    assert arena.open_link_path().encode() in client.get(reverse("study_detail", args=[arena.pk])).content
