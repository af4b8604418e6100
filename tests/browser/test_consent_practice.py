"""Consent and practice in the browser, at desktop and phone size: a rater agrees to the consent text, does the practice
round with feedback, and reaches the real pairs with the keyboard alone; every page axe-clean; on a phone the comment
box is folded behind "Add a comment" and still submits. The crowd page asks the Prolific study id only for Prolific."""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from annotation.elicitation import Answer
from annotation.models import GoldPair, Judgment, PracticeAnswer
from annotation.rating import consent, practice
from annotation.studies import enrolment, lifecycle
from tests.browser.conftest import wait_until_rating_page_ready

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Axe()
SIZES = [(1280, 900), (390, 844)]


def serious(page) -> list[str]:
    violations = AXE.run(page).response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:3]}"
        for v in violations
        if v["impact"] in ("critical", "serious")
    ]


@pytest.mark.parametrize("size", SIZES, ids=["desktop", "phone"])
def test_consent_then_practice_with_feedback_then_the_real_pairs_with_the_keyboard(
    browser_page, live_server, study, artifacts, size
) -> None:
    for i in range(2):
        GoldPair.objects.create(
            study=study,
            input=f"Translate 'bonjour' ({i}).",
            good_output="Hello.",
            bad_output="bonjour Hello the the of",
        )
    lifecycle.do_update_settings(
        study,
        {
            "consent_text": (
                "## Taking part\n\nYour answers are stored **without your name**. You may stop at any time."
            ),
            "practice_pairs": 2,
            "allow_comment": True,
            "allow_skip": True,
        },
        None,
    )
    rater = enrolment.do_create_rater_link(study, "keyboard")
    name = "desktop" if size[0] > 800 else "phone"
    page = browser_page.new_page(viewport={"width": size[0], "height": size[1]})
    found: dict[str, list[str]] = {}
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    expect(page.get_by_role("heading", name="Before you start")).to_be_visible()
    found["consent"] = serious(page)
    page.screenshot(path=str(artifacts / f"consent-{name}.png"), full_page=True)
    # focus starts on the consent text (one Enter must not agree unread); Tab reaches the instructions, then agree
    expect(page.get_by_test_id("consent-text")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="I agree")).to_be_focused()
    page.keyboard.press("Enter")

    for number in (1, 2):
        expect(page.get_by_role("heading", name=f"Practice pair {number} of 2")).to_be_visible()
        wait_until_rating_page_ready(page)
        if number == 1:
            found["practice pair"] = serious(page)
            page.screenshot(path=str(artifacts / f"practice-{name}.png"))
        page.keyboard.press("1")
        page.keyboard.press("Enter")
        feedback = page.get_by_test_id("practice-feedback")
        expect(feedback).to_be_visible()
        assert feedback.get_by_role("heading").inner_text() in ("Correct", "Not quite")
        expect(page.get_by_test_id("expected")).to_be_visible()
        if number == 1:
            found["practice feedback"] = serious(page)
            page.screenshot(path=str(artifacts / f"practice-feedback-{name}.png"))
        expect(page.get_by_test_id("practice-continue")).to_be_focused()
        page.keyboard.press("Enter")

    expect(page.get_by_role("heading", name="Pair 1 of 5")).to_be_visible()
    wait_until_rating_page_ready(page)
    found["rating page"] = serious(page)
    comment = page.get_by_test_id("comment")
    bar = page.locator("#rating-form").bounding_box()
    if name == "phone":
        assert comment.get_attribute("open") is None  # folded behind "Add a comment"
        page.screenshot(path=str(artifacts / f"rate-comment-folded-{name}.png"))
        assert bar["height"] < size[1] / 4, bar  # it took a third of the screen with the box open
        page.screenshot(path=str(artifacts / f"rate-comment-folded-{name}.png"))
        page.get_by_text("Add a comment").click()
    else:
        assert comment.get_attribute("open") is not None
        expect(page.get_by_text("Add a comment")).to_be_hidden()  # the box itself, no disclosure
    page.get_by_label("Comment on this pair (optional)").fill("Both are fine.")
    page.screenshot(path=str(artifacts / f"rate-comment-{name}.png"))
    page.locator("body").click(position={"x": 5, "y": 5})  # leave the text box: shortcuts act again
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Pair 2 of 5")).to_be_visible()
    [judgment] = Judgment.objects.filter(rater=rater)
    assert judgment.comment == "Both are fine."
    assert PracticeAnswer.objects.filter(rater=rater).count() == 2
    assert found == {page_name: [] for page_name in found}


@pytest.mark.parametrize("script", [True, False], ids=["with-javascript", "without-javascript"])
def test_the_prolific_study_id_is_asked_only_for_prolific_links(browser_page, live_server, researcher, study, script):
    # the crowd page's table of consent and practice is on the page too (it is checked by axe below)
    gold = GoldPair.objects.create(study=study, input="i", good_output="Good.", bad_output="good. Good bad")
    lifecycle.do_update_settings(study, {"consent_text": "Agree?", "practice_pairs": 1}, None)
    practised = enrolment.do_create_rater_link(study, "practised")
    consent.do_record_consent(practised)
    practice.do_answer(practised, gold.pk, Answer(choice="first"))
    client = Client()
    client.force_login(researcher)
    context = browser_page.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=script)
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    page = context.new_page()
    page.goto(live_server.url + reverse("external_links", args=[study.pk]))
    field = page.get_by_label("Prolific study id", exact=True)
    platform = page.get_by_test_id("new-link").get_by_label("Platform")
    expect(field).to_be_hidden()  # MTurk is chosen first
    platform.select_option("prolific")
    expect(field).to_be_visible()
    field.fill("abc123")
    platform.select_option("generic")
    expect(field).to_be_hidden()
    platform.select_option("prolific")
    page.get_by_role("button", name="Create link").click()
    expect(page.get_by_text("Only visits from Prolific study")).to_be_visible()
    expect(page.get_by_test_id("before-first-pair")).to_contain_text("practised")
    if script:  # axe runs as a script
        assert serious(page) == []
    context.close()
