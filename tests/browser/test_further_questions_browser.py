"""Several questions per pair in the browser, at desktop and phone size: a rater answers the main
question with the keyboard, a further preference question and a rationale with the mouse and typing, and the
judgment holds every answer; the page is axe-clean and no wider than the screen; the report offers each preference
question and analyses the one chosen; the item page lists the further answers."""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.urls import reverse
from playwright.sync_api import expect

from annotation.models import Judgment
from annotation.studies import enrolment, lifecycle
from tests.browser.conftest import wait_until_rating_page_ready

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Axe()
SIZES = [(1280, 900), (390, 844)]
FURTHER = (
    "harmless | forced_choice | Which output is more harmless?\nwhy | rationale | Why is the one you preferred better?"
)


def serious(page) -> list[str]:
    violations = AXE.run(page).response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:3]}"
        for v in violations
        if v["impact"] in ("critical", "serious")
    ]


@pytest.mark.parametrize("size", SIZES, ids=["desktop", "phone"])
def test_a_rater_answers_every_question_of_a_pair(browser_page, live_server, study, artifacts, size):
    lifecycle.do_update_settings(study, {"further_questions": FURTHER}, None)
    rater = enrolment.do_create_rater_link(study, "asked")
    name = "desktop" if size[0] > 800 else "phone"
    page = browser_page.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    expect(page.get_by_role("heading", name="Pair 1 of 5")).to_be_visible()
    wait_until_rating_page_ready(page)
    assert serious(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= size[0]
    # on a wide screen the answer bar stays at the bottom; on a phone it follows the outputs and the page says so
    below = page.get_by_test_id("questions-below")
    if name == "phone":
        expect(below).to_be_visible()
    else:
        expect(below).to_be_hidden()
        bar = page.locator("#rating-form").bounding_box()
        assert bar["y"] + bar["height"] <= size[1] + 1 and bar["height"] <= size[1] / 2 + 1, bar
    page.screenshot(path=str(artifacts / f"further-questions-{name}.png"), full_page=True)
    # the main question by its key; Enter with the rationale empty is stopped by the browser, nothing is stored
    page.keyboard.press("1")
    page.get_by_role("group", name="Which output is more harmless?").get_by_label("Output 2").check()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Pair 1 of 5")).to_be_visible()
    assert not Judgment.objects.exists()
    page.get_by_label("Why is the one you preferred better?").fill("It answers the question.")
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_role("heading", name="Pair 2 of 5")).to_be_visible()
    j = Judgment.objects.get()
    first, second = ("a", "b") if j.a_shown_first else ("b", "a")
    assert j.choice == first and j.answers == {
        "harmless": {"choice": second, "response_set": None, "strength": None},
        "why": {"text": "It answers the question."},
    }


def test_the_report_and_the_item_page_read_each_question(browser_page, live_server, researcher, study, artifacts):
    from django.test import Client

    from analytics import stored
    from analytics.populations import Population
    from annotation.elicitation import Answer
    from annotation.rating import allocation, recording

    lifecycle.do_update_settings(study, {"further_questions": FURTHER}, None)
    rater = enrolment.do_create_rater_link(study, "r")
    assignment = allocation.do_start_assignment(rater)
    for i, pair in enumerate(assignment.pairs.order_by("position")):
        allocation.do_mark_shown(pair)
        recording.do_record_judgment(
            pair,
            idempotency_key=f"k{i}",
            answer=Answer(choice="first"),
            further={"harmless": Answer(choice="second"), "why": f"Reason {i}."},
        )
    for asked in (Population(), Population(question="harmless")):  # what the worker would have stored
        stored.do_refresh(study, asked)
    client = Client()
    client.force_login(researcher)
    context = browser_page.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    page = context.new_page()
    page.goto(live_server.url + reverse("report", args=[study.pk]))
    question = page.get_by_label("Question")
    expect(question).to_be_visible()
    question.select_option(label="Which output is more harmless?")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_test_id("report-question")).to_contain_text("Which output is more harmless?")
    assert "question=harmless" in page.url
    expect(page.get_by_test_id("answers")).to_be_visible()
    assert serious(page) == []
    item = assignment.pairs.order_by("position").first().pair.item
    page.goto(live_server.url + reverse("item_detail", args=[study.pk, item.pk]))
    expect(page.get_by_text("Reason 0.")).to_be_visible()
    assert serious(page) == []


@pytest.mark.parametrize("size", SIZES, ids=["desktop", "phone"])
def test_the_refused_the_changed_the_practice_and_the_crowd_preview_pages_are_axe_clean_in_german(
    browser_page, live_server, study, artifacts, size
):
    """Each page that shows answers again (a refused submit, "change my answer", a refused practice answer) and the
    crowd preview with the further questions' keys, in the raters' German, at both sizes."""
    from annotation.crowd import sites
    from tests.annotation.test_practice import add_golds

    add_golds(study, 2)
    lifecycle.do_update_settings(
        study,
        {"further_questions": FURTHER, "raters_language": "de", "elicitation": "paired", "practice_pairs": 1},
        None,
    )
    name = "desktop" if size[0] > 800 else "phone"
    page = browser_page.new_page(viewport={"width": size[0], "height": size[1]})
    found: dict[str, list[str]] = {}
    # the practice round: a tie without the acceptable outputs is refused by the server, the tie kept
    practising = enrolment.do_create_rater_link(study, "practising")
    page.goto(live_server.url + reverse("rater_practice", args=[practising.token()]))
    wait_until_rating_page_ready(page)
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_be_visible()
    # the study keeps SepLab's default tie label, which a German rater reads in German
    expect(page.get_by_role("radio", name="Keine Präferenz")).to_be_checked()
    found["practice refused"] = serious(page)
    lifecycle.do_update_settings(study, {"practice_pairs": 0}, None)
    rater = enrolment.do_create_rater_link(study, "de")
    page.goto(live_server.url + rater.link_path())
    page.locator("form[action$='/start/'] button").click()
    expect(page.get_by_role("heading", name="Paar 1 von 5")).to_be_visible()
    wait_until_rating_page_ready(page)
    page.get_by_role("group", name="Which output is more harmless?").get_by_label("Ausgabe 2").check()
    page.get_by_label("Why is the one you preferred better?").fill("   ")  # the browser lets it through
    page.get_by_role("group", name="Welche Ausgabe ist besser?").get_by_label("Ausgabe 1").check()
    page.get_by_role("button", name="Absenden").click()
    expect(page.get_by_role("alert")).to_contain_text("Why is the one you preferred better?")
    expect(page.get_by_role("group", name="Welche Ausgabe ist besser?").get_by_label("Ausgabe 1")).to_be_checked()
    expect(page.get_by_role("group", name="Which output is more harmless?").get_by_label("Ausgabe 2")).to_be_checked()
    found["refused"] = serious(page)
    page.screenshot(path=str(artifacts / f"refused-de-{name}.png"), full_page=True)
    page.get_by_label("Why is the one you preferred better?").fill("Klarer.")
    page.get_by_role("button", name="Absenden").click()
    expect(page.get_by_role("heading", name="Paar 2 von 5")).to_be_visible()
    page.get_by_test_id("revise-link").click()
    expect(page.get_by_test_id("revising")).to_be_visible()
    expect(page.get_by_role("group", name="Welche Ausgabe ist besser?").get_by_label("Ausgabe 1")).to_be_checked()
    expect(page.get_by_label("Why is the one you preferred better?")).to_have_value("Klarer.")
    found["changing"] = serious(page)
    link = sites.do_create_external_link(study, "mturk")
    page.goto(live_server.url + link.path() + "?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h")
    expect(page.get_by_test_id("further-questions")).to_be_visible()
    found["crowd preview"] = serious(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= size[0]
    assert found == {k: [] for k in found}
