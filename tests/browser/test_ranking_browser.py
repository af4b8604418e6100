"""Ranking and best-worst screens in a real browser, in German: the keys act on the output that has the focus, an
output is dragged by its handle (SortableJS), the places follow the order on screen, the answer stored is the order
the rater saw; axe finds nothing serious and nothing is wider than a phone."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from annotation.models import Ranking
from annotation.studies import creation, enrolment, lifecycle
from tests.browser.conftest import wait_until_rating_page_ready
from tests.browser.test_accessibility import serious

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SYSTEMS = ("s1", "s2", "s3", "s4")


def german_study(researcher, name, unit, **changes):
    lines = [
        json.dumps(
            {"id": f"item-{i}", "input": f"Frage {i}?", "outputs": {s: [f"Antwort von {s} auf {i}."] for s in SYSTEMS}}
        )
        for i in range(2)
    ]
    study = creation.do_create_study(researcher, name, ("\n".join(lines) + "\n").encode(), f"{name}.jsonl")
    settings = {"answer_unit": unit, "judgments_per_assignment": 2, "raters_language": "de", **changes}
    return lifecycle.do_update_settings(study, settings, None)


def labels(page) -> list[str]:
    """The outputs' labels top to bottom, as on screen."""
    return [t.removeprefix("Ausgabe ") for t in page.locator(".rank-item h3").all_inner_texts()]


def places(page) -> list[str]:
    return [s.input_value() for s in page.locator(".rank-item select[data-place]").all()]


def generation_of(page, label: str) -> int:
    return int(page.get_by_test_id(f"output-{label}").get_attribute("data-generation"))


def test_a_rater_ranks_with_the_keys_and_by_dragging(browser_page, live_server, researcher, artifacts):
    study = german_study(researcher, "rank-de", "rank")
    rater = enrolment.do_create_rater_link(study, "ranker")
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Mit dem Bewerten beginnen").click()
    expect(page.get_by_text("Eintrag 1 von 2")).to_be_visible()
    wait_until_rating_page_ready(page)
    page.locator("ol[data-ranking='rank'][data-ready='1']").wait_for()  # ranking.js has set the list up
    assert serious(page) == []
    assert labels(page) == ["A", "B", "C", "D"] and places(page) == ["", "", "", ""]
    # the keys act on the focused output: a digit gives it that place, Alt+arrows move it
    page.get_by_test_id("output-C").focus()
    page.keyboard.press("1")
    assert labels(page) == ["C", "A", "B", "D"] and places(page) == ["1", "2", "3", "4"]
    expect(page.get_by_test_id("output-C")).to_be_focused()
    page.get_by_test_id("output-A").focus()
    page.keyboard.press("Alt+ArrowDown")
    page.keyboard.press("Alt+ArrowDown")
    assert labels(page) == ["C", "B", "D", "A"]
    page.screenshot(path=str(artifacts / "rank-keys.png"), full_page=True)
    order = [generation_of(page, label) for label in labels(page)]
    page.evaluate("window.__sameDocument = true")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Eintrag 2 von 2")).to_be_visible()
    assert page.evaluate("window.__sameDocument") is True  # htmx swapped the next screen in
    assert Ranking.objects.get().order == order

    # the second screen: drag D to the top by its handle, then a place chosen in a list moves its output there
    page.locator("ol[data-ranking='rank'][data-ready='1']").wait_for()
    page.get_by_test_id("output-D").locator(".drag-handle").drag_to(
        page.get_by_test_id("output-A").locator(".drag-handle")
    )
    assert labels(page)[0] == "D" and places(page) == ["1", "2", "3", "4"]
    page.get_by_test_id("output-D").locator("select").select_option("3")
    assert labels(page)[2] == "D" and places(page) == ["1", "2", "3", "4"]
    page.get_by_role("button", name="Ausgabe B nach oben").click()  # the buttons, for those who neither drag nor type
    second = [generation_of(page, label) for label in labels(page)]
    page.get_by_role("button", name="Absenden").click()
    expect(page.get_by_role("heading", name="Auftrag abgeschlossen")).to_be_visible()
    assert list(Ranking.objects.order_by("id").values_list("order", flat=True)) == [order, second]
    assert sum(r.implied.count() for r in Ranking.objects.all()) == 12


@pytest.mark.parametrize("size", [(1280, 900), (390, 844)])
def test_a_rater_picks_the_best_and_the_worst_with_the_keys(browser_page, live_server, researcher, artifacts, size):
    study = german_study(researcher, f"bws-de-{size[0]}", "best_worst", outputs_shown=3)
    rater = enrolment.do_create_rater_link(study, "picker")
    page = browser_page.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Mit dem Bewerten beginnen").click()
    expect(page.get_by_text("Welche Ausgabe ist die beste, und welche die schlechteste?")).to_be_visible()
    wait_until_rating_page_ready(page)
    assert serious(page) == []
    assert page.evaluate("document.scrollingElement.scrollWidth") <= size[0]
    assert labels(page) == ["A", "B", "C"]
    page.keyboard.press("Enter")  # nothing chosen: the browser asks for the missing answer, nothing is sent
    assert not Ranking.objects.exists()
    page.get_by_test_id("output-B").focus()
    page.keyboard.press("b")
    page.get_by_test_id("output-C").focus()
    page.keyboard.press("w")
    expect(page.get_by_label("Ausgabe B ist die beste")).to_be_checked()
    expect(page.get_by_label("Ausgabe C ist die schlechteste")).to_be_checked()
    page.screenshot(path=str(artifacts / f"best-worst-{size[0]}.png"), full_page=True)
    page.keyboard.press("Enter")
    expect(page.get_by_text("Eintrag 2 von 2")).to_be_visible()
    ranking = Ranking.objects.get()
    assert (ranking.best_id, ranking.worst_id) == (generation_of_first(ranking, 1), generation_of_first(ranking, 2))


def generation_of_first(ranking: Ranking, place: int) -> int:
    """The generation shown at ``place`` (0-based) on the ranking's screen."""
    return ranking.shown[place]


def test_the_ranking_screen_at_phone_size_in_german(browser_page, live_server, researcher, artifacts):
    study = german_study(researcher, "rank-phone", "rank")
    rater = enrolment.do_create_rater_link(study, "phone")
    page = browser_page.new_page(viewport={"width": 390, "height": 844})
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Mit dem Bewerten beginnen").click()
    expect(page.get_by_text("Bringen Sie die Ausgaben in eine Reihenfolge, die beste zuerst.")).to_be_visible()
    assert serious(page) == []
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 390
    page.screenshot(path=str(artifacts / "rank-phone.png"), full_page=True)
