"""An arena battle in Chromium against tests/judge_server.py's streaming mode, keyboard only, at desktop and phone
size: the open link, a prompt sent with Ctrl+Enter, both replies streamed into their panes, a vote as a digit then
Enter, the names shown, "New battle"; axe finds nothing serious on the prompt box, mid-stream and after the vote. A
model that fails is shown as failed for that battle and "New battle" brings the prompt back. A German arena speaks
SepLab's German words where the rating page does."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from annotation.arena import setup
from annotation.arena.setup import SystemSpec
from annotation.models import Battle, BattleReply, Judgment
from annotation.studies import lifecycle
from tests.annotation.test_rater_language import english_words
from tests.browser.conftest import wait_until_rating_page_ready
from tests.judge_server import server_fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Axe()
SIZES = [(1280, 900), (390, 844)]
server = server_fixture()


def serious(page) -> list[str]:
    violations = AXE.run(page).response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:3]}"
        for v in violations
        if v["impact"] in ("critical", "serious")
    ]


COVERED = """() => {
  const reply = document.querySelector("[data-testid=reply-right]");
  reply.scrollIntoView({block: "end"});
  const r = reply.getBoundingClientRect(), v = document.getElementById("rating-form").getBoundingClientRect();
  return Math.max(0, Math.min(r.bottom, v.bottom) - Math.max(r.top, v.top));
}"""


def english_on(page, *own: str) -> set[str]:
    """SepLab's English words on the page (``english_words``: the rater strings' words German never uses), with the
    study's own texts (its name, starters, categories, the prompt and the replies) set aside."""
    text = page.locator("body").inner_text() + " " + page.title()
    for words in own:
        text = text.replace(words, " ")
    return {w for w in re.findall(r"[A-Za-zÄÖÜäöüß]+", text) if w.lower() in english_words()}


def make_arena(researcher, server, **settings):
    study = setup.do_create_arena(
        researcher,
        "Team arena",
        [SystemSpec("red", "r1", server.base_url), SystemSpec("blue", "b2", server.base_url)],
        samples=0,
        endpoint_fields={"api_key_env": "", "timeout_seconds": 10.0, "max_retries": 0},  # a whole reply: 10 s
        starters=["Write a haiku about tests."],
        categories=["poetry", "code"],
    )
    if settings:
        lifecycle.do_update_settings(study, settings, None)
    return study


def join(page, live_server, study) -> None:
    """The open link, joined with Enter (its button has the focus)."""
    page.goto(live_server.url + study.open_link_path())
    expect(page.get_by_role("button", name="Join and start")).to_be_focused()  # before the key, on a loaded machine
    page.keyboard.press("Enter")
    expect(page.get_by_label("Your prompt")).to_be_focused()


@pytest.mark.slow(seconds=20)
@pytest.mark.parametrize("size", SIZES, ids=["desktop", "phone"])
def test_a_keyboard_only_battle_streams_votes_reveals_and_starts_the_next(
    browser_page, live_server, researcher, server, artifacts, size
):
    server.stream_rate = 12.0  # words a second: a reply takes a few seconds, long enough to look at mid-stream
    study = make_arena(researcher, server)
    name = "desktop" if size[0] > 800 else "phone"
    page = browser_page.new_page(viewport={"width": size[0], "height": size[1]})
    join(page, live_server, study)
    found = {"prompt box": serious(page)}
    page.keyboard.type("Explain recursion to a child.")
    page.keyboard.press("Control+Enter")
    expect(page.get_by_test_id("battle")).to_be_visible(timeout=30_000)  # the first prompt loads the language model
    left, right = page.get_by_test_id("reply-left"), page.get_by_test_id("reply-right")
    expect(page.get_by_role("heading", name="Model A")).to_be_visible()
    expect(page.get_by_role("heading", name="Model B")).to_be_visible()
    expect(left).not_to_be_empty()  # the first words arrived while the reply is still being written
    expect(page.get_by_test_id("answering")).to_be_visible()
    found["mid-stream"] = serious(page)
    page.screenshot(path=str(artifacts / f"arena-streaming-{name}.png"), full_page=True)
    # both replies whole: the page asks what comes next, the vote
    page.locator("#rating-form, [data-testid=battle-failed]").first.wait_for(timeout=15_000)
    assert list(BattleReply.objects.filter(status=BattleReply.Status.FAILED).values_list("problem", flat=True)) == []
    expect(page.locator("#rating-form")).to_be_visible()
    wait_until_rating_page_ready(page)
    battle = Battle.objects.get(study=study)
    replies = {r.side: r.text for r in BattleReply.objects.filter(battle=battle, turn=0)}
    shown_left, shown_right = ("a", "b") if battle.a_shown_first else ("b", "a")
    assert left.inner_text().strip() == replies[shown_left].strip()
    assert right.inner_text().strip() == replies[shown_right].strip()
    found["vote"] = serious(page)
    if name == "phone":  # the vote is not pinned over the replies: Model B's reply, scrolled to its end, is uncovered
        covered = page.evaluate(COVERED)
        assert covered == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= size[0]
    # a digit, then Enter: Model B (the right) is better
    page.locator("body").focus()
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    revealed = page.get_by_test_id("revealed")
    expect(revealed).to_be_visible()
    names = {page.get_by_test_id("name-left").inner_text(), page.get_by_test_id("name-right").inner_text()}
    assert names == {"red", "blue"}
    found["after the vote"] = serious(page)
    page.screenshot(path=str(artifacts / f"arena-voted-{name}.png"), full_page=True)
    # the vote is the battle's judgment, in model coordinates: the right pane is system B when A was shown first
    judgment = Judgment.objects.get(pair__item=battle.item)
    assert judgment.choice == (Judgment.Choice.B if battle.a_shown_first else Judgment.Choice.A)
    assert battle.item.input == "Explain recursion to a child."
    new_battle = page.get_by_role("button", name=re.compile("New battle"))
    expect(new_battle).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_label("Your prompt")).to_be_focused()
    expect(page.get_by_label("Your prompt")).to_have_value("")
    assert found == {key: [] for key in found}


@pytest.mark.slow(seconds=10)
def test_a_failed_model_is_shown_failed_and_new_battle_keeps_the_prompt(browser_page, live_server, researcher, server):
    server.stream_rate = 50.0
    study = make_arena(researcher, server)
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    join(page, live_server, study)
    prompt = "Both fail here [[stream-error]]"
    page.keyboard.type(prompt)
    page.keyboard.press("Control+Enter")
    failed = page.get_by_test_id("battle-failed")
    expect(failed).to_be_visible(timeout=15_000)
    expect(failed).to_contain_text("failed for this battle")
    expect(page.get_by_test_id("pane-failed").first).to_be_visible()
    assert serious(page) == []
    assert Battle.objects.get(study=study).status == Battle.Status.FAILED
    expect(page.get_by_role("button", name=re.compile("New battle"))).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_label("Your prompt")).to_have_value(prompt)  # nothing the rater typed is lost


@pytest.mark.slow(seconds=10)
def test_a_starter_and_a_german_arena(browser_page, live_server, researcher, server):
    server.stream_rate = 100.0
    study = make_arena(researcher, server, raters_language="de")
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + study.open_link_path())
    expect(page.locator("main button").first).to_be_focused()  # the join button, before its key (a loaded machine)
    page.keyboard.press("Enter")
    expect(page.get_by_label("Ihr Prompt")).to_be_focused()
    assert serious(page) == []
    own = ("Team arena", "Write a haiku about tests.", "poetry", "code")
    assert english_on(page, *own) == set()
    page.get_by_role("button", name="Write a haiku about tests.").click()
    expect(page.get_by_label("Ihr Prompt")).to_have_value("Write a haiku about tests.")
    page.get_by_label("Kategorie").select_option("poetry")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#rating-form")).to_be_visible(timeout=15_000)
    assert Battle.objects.get(study=study).category == "poetry"
    # SepLab's own words of the rating page, in German: the keys' help and the Enter key
    expect(page.get_by_text("Tastatur:")).to_be_visible()
    expect(page.get_by_test_id("vote")).to_contain_text("Eingabetaste")
    assert serious(page) == []
    replies = [r.text for r in BattleReply.objects.filter(battle__study=study)]
    assert english_on(page, *replies, *own) == set()  # the arena's own words and its default question, in German
    expect(page.get_by_text("Welche Antwort ist besser?")).to_be_visible()
