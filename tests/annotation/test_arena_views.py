"""An arena's rater pages (annotation/views/arena.py) through Django's test client against tests/judge_server.py's
streaming mode: a rater's link and the open link lead to the prompt box; a prompt starts a battle whose page streams
both replies (server-sent events); then the vote form, the vote recorded as a judgment, the names; a refused prompt
comes back in the box; a failed model offers a new battle with the prompt kept; without JavaScript the page waits."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from annotation.arena import setup
from annotation.arena.setup import SystemSpec
from annotation.models import Battle, BattleReply, Judgment
from annotation.models.arena import NOT_ASKED
from annotation.studies import enrolment
from tests.judge_server import server_fixture

server = server_fixture()


@pytest.fixture
def arena(researcher, server):
    server.stream_rate = 400.0
    return setup.do_create_arena(
        researcher,
        "arena",
        # gen- models: the streamed reply names no model (a name in a reply would refuse the vote)
        [SystemSpec("red", "gen-red", server.base_url), SystemSpec("blue", "gen-blue", server.base_url)],
        samples=0,
        endpoint_fields={"api_key_env": "", "timeout_seconds": 10.0, "max_retries": 0},  # a loaded machine
        starters=["Write a haiku."],
        categories=["poetry"],
    )


@pytest.fixture
def token(arena):
    return enrolment.do_create_rater_link(arena, "rater").token()


def stream(client, token, battle, side: str) -> str:
    response = client.get(reverse("arena_stream", args=[token, battle.pk, side]))
    assert response["Content-Type"] == "text/event-stream" and response["Cache-Control"] == "no-cache"
    return b"".join(response.streaming_content).decode()


def test_the_rater_link_and_the_open_link_lead_to_the_prompt_box(client, arena, token):
    home = reverse("arena_home", args=[token])
    assert client.get(reverse("rater_home", args=[token])).url == home
    page = client.get(home)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="prompt"' in html and "Write a haiku." in html and '<option value="poetry"' in html
    # the open link: joining makes a rater and goes to their prompt box
    joined = client.post(arena.open_link_path())
    assert re.fullmatch(r"/r/[^/]+/arena/", joined.url)


def test_a_battle_streams_both_replies_then_takes_the_vote_and_shows_the_names(client, arena, token, server):
    started = client.post(reverse("arena_home", args=[token]), {"prompt": "  Hello there.  ", "category": "poetry"})
    battle = Battle.objects.get(study=arena)
    assert started.url == reverse("arena_battle", args=[token, battle.pk])
    assert (battle.item.input, battle.category) == ("Hello there.", "poetry")
    page = client.get(started.url).content.decode()
    for side in ("left", "right"):
        assert f'data-stream="{reverse("arena_stream", args=[token, battle.pk, side])}"' in page
    assert "Model A" in page and "Model B" in page and 'data-testid="answering"' in page
    assert "?wait=1" in page  # the way without JavaScript
    assert 'id="rating-form"' not in page
    events = {side: stream(client, token, battle, side) for side in ("left", "right")}
    replies = {r.side: r for r in BattleReply.objects.filter(battle=battle)}
    left = replies["a" if battle.a_shown_first else "b"]
    assert events["left"].startswith('retry: 1000\n\nevent: text\ndata: ""\n\nevent: delta\n')
    assert events["left"].endswith('event: done\ndata: ""\n\n') and left.status == BattleReply.Status.DONE
    assert server.invalid == []
    page = client.get(started.url).content.decode()
    assert 'id="rating-form"' in page and "data-stream" not in page
    assert escape(left.text) in page
    # the options named after the panes, with the rating page's keys
    assert re.search(r'value="first" data-key="1"[^>]*> Model A', page)
    assert re.search(r'value="second" data-key="2"[^>]*> Model B', page)
    key = re.search(r'name="key" value="([0-9a-f]+)"', page)[1]
    voted = client.post(
        reverse("arena_vote", args=[token, battle.pk]),
        {"pair": battle.pk, "key": key, "client_ms": "900", "choice": "second"},
        HTTP_HX_REQUEST="true",
    )
    html = voted.content.decode()
    assert voted.status_code == 200 and 'data-testid="revealed"' in html
    battle.refresh_from_db()
    names = ("red", "blue") if battle.a_shown_first else ("blue", "red")
    assert re.search(rf'data-testid="name-left">{names[0]}<', html)
    assert re.search(rf'data-testid="name-right">{names[1]}<', html)
    assert "New battle" in html and "Your vote is counted." in html
    judgment = Judgment.objects.get(pair__item=battle.item)  # the item holds the rater's own prompt
    assert judgment.choice == (Judgment.Choice.B if battle.a_shown_first else Judgment.Choice.A)
    # the same vote again (a double click): still one judgment
    client.post(
        reverse("arena_vote", args=[token, battle.pk]),
        {"pair": battle.pk, "key": key, "client_ms": "900", "choice": "second"},
    )
    assert Judgment.objects.filter(pair__item=battle.item).count() == 1


def test_a_refused_prompt_comes_back_in_the_box(client, arena, token):
    response = client.post(reverse("arena_home", args=[token]), {"prompt": "   "})
    assert response.status_code == 400
    assert 'role="alert"' in response.content.decode() and not Battle.objects.exists()
    # a starter is sent as it is, whatever the box holds
    response = client.post(reverse("arena_home", args=[token]), {"prompt": "", "starter": "0"})
    assert Battle.objects.get().item.input == "Write a haiku."


def test_a_failed_model_offers_a_new_battle_with_the_prompt_kept(client, arena, token):
    client.post(reverse("arena_home", args=[token]), {"prompt": "Fail [[stream-error]]", "category": "poetry"})
    battle = Battle.objects.get()
    assert "event: failed" in stream(client, token, battle, "left")
    page = client.get(reverse("arena_battle", args=[token, battle.pk])).content.decode()
    assert 'data-testid="battle-failed"' in page and "failed for this battle" in page
    assert 'name="prompt" value="Fail [[stream-error]]"' in page and 'name="category" value="poetry"' in page
    assert 'id="rating-form"' not in page
    # the other model is not asked once the battle failed: nothing to vote on, nothing to pay for
    assert "event: failed" in stream(client, token, battle, "right")
    assert set(BattleReply.objects.filter(battle=battle).values_list("status", flat=True)) == {"failed"}
    again = client.get(reverse("arena_home", args=[token]), {"prompt": "Fail [[stream-error]]"}).content.decode()
    assert ">Fail [[stream-error]]</textarea>" in again


def test_a_follow_up_turn_streams_two_more_replies(client, arena, token):
    client.post(reverse("arena_home", args=[token]), {"prompt": "First."})
    battle = Battle.objects.get()
    for side in ("left", "right"):
        stream(client, token, battle, side)
    client.post(reverse("arena_turn", args=[token, battle.pk]), {"prompt": "And then?"})
    page = client.get(reverse("arena_battle", args=[token, battle.pk])).content.decode()
    assert "Your message 2" in page and "And then?" in page and page.count("data-stream=") == 2
    assert "event: done" in stream(client, token, battle, "right")
    assert BattleReply.objects.filter(battle=battle, turn=1).count() == 2


def test_a_stream_of_another_raters_battle_is_not_found(client, arena, token):
    client.post(reverse("arena_home", args=[token]), {"prompt": "Mine."})
    battle = Battle.objects.get()
    other = enrolment.do_create_rater_link(arena, "other").token()
    assert client.get(reverse("arena_stream", args=[other, battle.pk, "left"])).status_code == 404
    assert client.get(reverse("arena_battle", args=[other, battle.pk])).status_code == 404
    assert client.get(reverse("arena_stream", args=[token, battle.pk, "middle"])).status_code == 404


@pytest.mark.django_db(transaction=True)  # both replies are asked on threads of their own
def test_without_javascript_the_page_waits_for_both_whole_replies(client, arena, token):
    client.post(reverse("arena_home", args=[token]), {"prompt": "No script here."})
    battle = Battle.objects.get()
    page = client.get(reverse("arena_battle", args=[token, battle.pk]), {"wait": "1"}).content.decode()
    assert 'id="rating-form"' in page and "data-stream" not in page
    for reply in BattleReply.objects.filter(battle=battle):
        assert reply.status == BattleReply.Status.DONE and escape(reply.text) in page


def ready_battle(client, token, prompt: str) -> tuple[Battle, str]:
    """A battle on ``prompt`` with both replies streamed whole, and its page."""
    client.post(reverse("arena_home", args=[token]), {"prompt": prompt, "category": "poetry"})
    battle = Battle.objects.get(item__input=prompt)
    for side in ("left", "right"):
        stream(client, token, battle, side)
    return battle, client.get(reverse("arena_battle", args=[token, battle.pk])).content.decode()


def test_a_reply_that_names_its_model_says_at_once_that_a_vote_would_not_count(client, arena, token):
    prompt = "Who are you? [[say-name]]"  # the local server's reply then begins with its model's name (gen-red …)
    battle, page = ready_battle(client, token, prompt)
    assert 'data-testid="named-own-model"' in page and re.search(r"named its own model \(gen-(red|blue)\)", page)
    assert 'id="rating-form"' not in page  # no vote offered: it would be refused
    assert f'name="prompt" value="{escape(prompt)}"' in page and 'name="category" value="poetry"' in page
    assert re.search(r'autofocus data-enter data-testid="new-battle">New battle', page)
    assert "<title>Arena · arena · SepLab</title>" in page


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "form"])
def test_a_refused_vote_is_shown_on_the_arenas_own_page_with_the_prompt_kept(client, arena, token, htmx):
    prompt = "Name yourself. [[say-name]]"
    battle, _page = ready_battle(client, token, prompt)
    vote = {"pair": battle.pk, "key": "k1", "client_ms": "900", "choice": "first"}  # from a page shown earlier
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.post(reverse("arena_vote", args=[token, battle.pk]), vote, **headers)
    if not htmx:  # the form's post is answered with the battle's page, as a counted vote is
        assert response.status_code == 302 and response.url == reverse("arena_battle", args=[token, battle.pk])
        response = client.get(response.url)
    html = response.content.decode()
    assert response.status_code == 200 and 'data-testid="revealed"' in html and "This vote cannot count" in html
    assert "names its own model" not in html  # the flag's words are the researcher's (the board), not the rater's
    assert ("<title>" in html) is not htmx and 'id="battle"' in html
    assert f'name="prompt" value="{escape(prompt)}"' in html and 'data-testid="new-battle"' in html
    assert Battle.objects.get(pk=battle.pk).status == Battle.Status.REFUSED and not Judgment.objects.exists()


def test_the_keys_help_names_the_options_as_shown(client, arena, token):
    _battle, page = ready_battle(client, token, "Keys?")
    keys = re.search(r'<p class="muted keys">(.*?)</p>', page, re.S)[1]
    assert "<kbd>1</kbd> / <kbd>←</kbd> Model A," in keys and "<kbd>2</kbd> / <kbd>→</kbd> Model B," in keys
    assert "Output" not in keys


def test_a_failed_battle_says_which_models_failed_in_proper_words(client, arena, token):
    client.post(reverse("arena_home", args=[token]), {"prompt": "Fail [[stream-error]]"})
    battle = Battle.objects.get()
    for side in ("left", "right"):
        stream(client, token, battle, side)
    url = reverse("arena_battle", args=[token, battle.pk])
    page = client.get(url).content.decode()
    # the left model failed first; the right one was then never asked: it is not named as failing
    right = "a" if not battle.a_shown_first else "b"
    assert BattleReply.objects.get(battle=battle, side=right).problem == NOT_ASKED
    assert "<h2>A model failed</h2>" in page and "Model A failed for this battle" in page
    assert "Both models failed" not in page
    # both failed (the right one asked and failing too)
    BattleReply.objects.filter(battle=battle, side=right).update(problem="The model crashed mid-reply.")
    page = client.get(url).content.decode()
    assert "<h2>Both models failed</h2>" in page and "Both models failed for this battle" in page
    assert "A model failed" not in page and "Model A, Model B" not in page


def test_the_prompt_box_says_what_an_arena_is_once(client, arena, token):
    page = client.get(reverse("arena_home", args=[token])).content.decode()
    assert page.count("side by side") == 1 and 'id="prompt-help"' not in page
    arena.instructions = ""
    arena.save(update_fields=["instructions"])
    page = client.get(reverse("arena_home", args=[token])).content.decode()
    assert page.count("side by side") == 1 and 'aria-describedby="prompt-help"' in page


def test_a_german_arena_shows_its_default_words_in_german(client, arena, token):
    from annotation import rater_words

    # what create_arena stores is what the page translates
    assert {arena.question, arena.tie_label, arena.neither_label, arena.instructions} <= rater_words.DEFAULT_WORDS
    arena.raters_language = "de"
    arena.save(update_fields=["raters_language"])
    home = client.get(reverse("arena_home", args=[token])).content.decode()
    assert "Zwei anonyme Modelle antworten nebeneinander" in home and "Ihr Prompt" in home
    _battle, page = ready_battle(client, token, "Hallo.")
    for words in ("Welche Antwort ist besser?", "Unentschieden", "Beide sind schlecht", "Modell A", "Abstimmen"):
        assert words in page
    # a question the researcher wrote is shown as written
    arena.question = "Which reply is better?!"
    arena.save(update_fields=["question"])
    _battle, page = ready_battle(client, token, "Noch einmal.")
    assert "Which reply is better?!" in page


def test_after_an_attention_check_the_rater_gets_their_own_prompt_back(client, arena, token):
    """An attention check shows a known prompt instead of the one typed (kept in the item as ``typed``); after its
    answer, "New battle" opens the box with the typed prompt in it: nothing the rater typed is lost."""
    from annotation.models import GoldPair

    arena.arena.attention_every = 1
    arena.arena.save()
    GoldPair.objects.create(study=arena, input="What is 2 + 2?", good_output="4", bad_output="5")
    started = client.post(reverse("arena_home", args=[token]), {"prompt": "My own question about rivers"})
    battle = Battle.objects.get()
    assert battle.gold_id is not None and started.status_code == 302
    page = client.get(started.url).content.decode()
    key = re.search(r'name="key" value="([0-9a-f]+)"', page)[1]
    good = "first" if battle.a_shown_first else "second"
    voted = client.post(
        reverse("arena_vote", args=[token, battle.pk]),
        {"pair": battle.pk, "key": key, "client_ms": "900", "choice": good},
        HTTP_HX_REQUEST="true",
    )
    html = voted.content.decode()
    assert voted.status_code == 200 and "New battle" in html
    assert 'name="prompt" value="My own question about rivers"' in html
