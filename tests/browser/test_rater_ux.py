"""The rater's page on long real-world outputs, at desktop and phone size: answers in reach, instructions at
hand, the way forward from the last pair, and nothing that leads a rater to the researcher login."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from annotation.models import Assignment, Judgment
from annotation.studies import creation, enrolment, lifecycle
from tests.browser.conftest import wait_until_rating_page_ready

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# An AlpacaEval-like answer: prose, a list, a fenced code block and a table, long enough to run past a screen.
LONG = (
    "Here is how to list the files of a directory in Python.\n\n1. Import `os`.\n2. Call `os.listdir`.\n"
    "3. Filter what you need.\n\n```python\nimport os\n\nfor name in sorted(os.listdir('.')):\n"
    "    if name.endswith('.py'):\n        print(name)\n```\n\n| function | returns |\n|---|---|\n"
    "| `os.listdir` | names |\n| `os.scandir` | entries |\n\n"
    + "\n\n".join(f"Paragraph {n}: more detail about directory listings, globbing and pathlib." for n in range(40))
)


def long_study(researcher, name="long"):
    lines = [
        {
            "id": f"q{i}",
            "input": f"How do I list Python files? ({i})",
            "outputs": {"verbose": [LONG], "short": ["Use `glob.glob('*.py')`."]},
        }
        for i in range(3)
    ]
    study = creation.do_create_study(researcher, name, "".join(json.dumps(x) + "\n" for x in lines).encode(), "l.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 1, "judgments_per_assignment": 1}, None)  # one each
    return study


def test_on_a_phone_the_answer_bar_is_on_screen_and_no_key_hints_show(browser_page, live_server, researcher, artifacts):
    study = long_study(researcher)
    rater = enrolment.do_create_rater_link(study, "phone")
    context = browser_page.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").tap()
    expect(page.get_by_role("heading", name="Pair 1 of 1")).to_be_visible()
    bar = page.locator("#rating-form")
    box = bar.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 844  # the options, without scrolling
    expect(page.get_by_role("radio", name="Output 1")).to_be_in_viewport()
    assert page.locator("kbd").first.is_hidden()  # no keyboard on a touch screen
    expect(page.locator(".output-box.continues").first).to_be_visible()  # the long output goes on below
    page.screenshot(path=str(artifacts / "rate-phone.png"))
    page.get_by_role("radio", name="Output 2").tap()
    page.get_by_role("button", name="Submit").tap()
    expect(page.get_by_role("heading", name="Assignment complete")).to_be_visible()
    assert Judgment.objects.filter(rater=rater).count() == 1
    context.close()


def test_desktop_instructions_at_hand_and_enter_continues_after_the_last_pair(
    browser_page, live_server, researcher, artifacts
):
    study = long_study(researcher, "desk")
    lifecycle.do_update_settings(study, {"instructions": "Prefer the **correct** answer; length is no merit."}, None)
    rater = enrolment.do_create_rater_link(study, "desk")
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + rater.link_path())
    assert page.locator("a.brand").count() == 0  # the logo leads no rater to the researcher login
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Pair 1 of 1")).to_be_visible()
    panel = page.locator("details.instructions-panel")
    expect(panel).to_have_attribute("open", "")
    expect(panel.locator("strong")).to_have_text("correct")
    expect(page.locator("#rating-form")).to_be_in_viewport()
    assert "monospace" in page.locator(".rendered pre code").first.evaluate("e => getComputedStyle(e).fontFamily")
    page.screenshot(path=str(artifacts / "rate-desktop.png"))
    wait_until_rating_page_ready(page)
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Assignment complete")).to_be_visible()
    first = Assignment.objects.get(rater=rater)
    page.keyboard.press("Enter")  # continues to the next assignment
    expect(page.get_by_role("heading", name="Pair 1 of 1")).to_be_visible()
    assert Assignment.objects.filter(rater=rater).exclude(pk=first.pk).count() == 1


def test_the_open_link_goes_from_join_straight_to_the_first_pair(browser_page, live_server, researcher):
    study = long_study(researcher, "open")
    study.open_link_enabled = True
    study.save()
    page = browser_page.new_page()
    page.goto(live_server.url + study.open_link_path())
    page.get_by_role("button", name="Join and start").click()
    expect(page.get_by_role("heading", name="Pair 1 of 1")).to_be_visible()


def test_both_bad_by_key_then_revised_to_a_choice_in_the_browser(browser_page, live_server, researcher):
    lines = [{"id": "m0", "input": "Q", "outputs": {"a": ["A one", "A two"], "b": ["B one", "B two"]}}]
    multi = creation.do_create_study(
        researcher, "honest-k2", "".join(json.dumps(x) + "\n" for x in lines).encode(), "m.jsonl"
    )
    lifecycle.do_update_settings(multi, {"neither_option": True, "pairs_per_assignment": 2, "raters_per_item": 1}, None)
    rater = enrolment.do_create_rater_link(multi, "honest")
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    wait_until_rating_page_ready(page)
    expect(page.get_by_role("heading", name="Pair 1 of 2")).to_be_visible()
    page.keyboard.press("0")  # both are bad
    expect(page.get_by_role("radio", name="Both are bad")).to_be_checked()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Pair 2 of 2")).to_be_visible()
    page.get_by_test_id("revise-link").click()
    expect(page.get_by_test_id("revising")).to_be_visible()
    expect(page.get_by_role("heading", name="Pair 1 of 2")).to_be_visible()
    wait_until_rating_page_ready(page)
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Pair 2 of 2")).to_be_visible()
    old, new = Judgment.objects.filter(rater=rater).order_by("id")
    assert (old.choice, old.response_set, old.revised) == ("tie", [], True)
    assert new.choice in ("a", "b") and not new.revised and new.response_set is None


def test_ten_judgments_on_a_k1_study_are_one_assignment_with_one_completion_code(
    browser_page, live_server, researcher, artifacts
):
    lines = [
        {"id": f"a{i}", "input": f"Question {i}?", "outputs": {"x": [f"Answer X{i}."], "y": [f"Answer Y{i}."]}}
        for i in range(12)
    ]
    study = creation.do_create_study(
        researcher, "bundled", "".join(json.dumps(x) + "\n" for x in lines).encode(), "b.jsonl"
    )
    lifecycle.do_update_settings(study, {"raters_per_item": 1}, None)
    rater = enrolment.do_create_rater_link(study, "worker")
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + rater.link_path())
    expect(page.get_by_test_id("assignment-size")).to_contain_text("10 pairs")
    page.keyboard.press("Enter")
    wait_until_rating_page_ready(page)
    for number in range(1, 11):
        expect(page.get_by_role("heading", name=f"Pair {number} of 10")).to_be_visible()
        page.keyboard.press("1" if number % 2 else "2")
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Assignment complete")).to_be_visible()
    [assignment] = Assignment.objects.filter(rater=rater)
    expect(page.get_by_test_id("completion-code")).to_have_text(assignment.completion_code)
    page.get_by_test_id("copy-code").click()  # the code is copied with one click
    expect(page.get_by_test_id("copy-code")).to_have_text("Copied")
    # what it starts, in its words: the 2 items left of 12, not another 10
    expect(page.get_by_test_id("rate-more")).to_contain_text("Rate 2 more pairs")
    assert assignment.places.count() == 10 and Judgment.objects.filter(rater=rater).count() == 10
    page.screenshot(path=str(artifacts / "rate-bundle-complete.png"))


def test_skipping_an_item_with_a_reason_in_the_browser(browser_page, live_server, researcher):
    from annotation.models import Skip

    study = long_study(researcher, "skip")
    lifecycle.do_update_settings(study, {"allow_skip": True, "judgments_per_assignment": 2}, None)
    rater = enrolment.do_create_rater_link(study, "skipper")
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    expect(page.get_by_role("heading", name="Pair 1 of 2")).to_be_visible()
    page.get_by_text("Skip this item").click()
    page.get_by_label("Why?").select_option("unreadable")
    page.get_by_test_id("skip").click()
    expect(page.get_by_role("heading", name="Pair 2 of 2")).to_be_visible()
    assert Skip.objects.get(rater=rater).reason == "unreadable" and not Judgment.objects.filter(rater=rater).exists()


def test_without_javascript_the_browser_asks_for_a_missing_answer_and_the_server_keeps_the_rest(
    browser_page, live_server, study
):
    """No script at all: the radio groups' "required" stops the form in the browser, and a rationale of spaces (which
    the browser lets through) is refused by the server, which shows the page again with every answer given."""
    lifecycle.do_update_settings(
        study,
        {"further_questions": "clarity | forced_choice | Which output is clearer?\nwhy | rationale | Why?"},
        None,
    )
    rater = enrolment.do_create_rater_link(study, "no-script")
    context = browser_page.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    page = context.new_page()
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    expect(page.get_by_role("heading", name="Pair 1 of 5")).to_be_visible()
    assert page.locator("html[data-shortcuts='on']").count() == 0  # rate.js did not run
    page.get_by_role("group", name="Which output is better?").get_by_label("Output 2").check()
    page.get_by_label("Why?").fill("   ")
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.get_by_role("button", name="Submit").click()
    expect(page.locator('input[name="q-clarity-choice"]:invalid')).to_have_count(3)  # the browser asks for it
    assert posts == [] and not Judgment.objects.exists()
    page.get_by_role("group", name="Which output is clearer?").get_by_label("Output 1").check()
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_role("alert")).to_contain_text("Answer the question 'Why?' in a few words.")
    expect(page.get_by_role("group", name="Which output is better?").get_by_label("Output 2")).to_be_checked()
    expect(page.get_by_role("group", name="Which output is clearer?").get_by_label("Output 1")).to_be_checked()
    assert len(posts) == 1 and not Judgment.objects.exists()
    page.get_by_label("Why?").fill("It is shorter.")
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_role("heading", name="Pair 2 of 5")).to_be_visible()
    j = Judgment.objects.get()
    first, second = ("a", "b") if j.a_shown_first else ("b", "a")
    assert j.choice == second and j.answers == {
        "clarity": {"choice": first, "response_set": None, "strength": None},
        "why": {"text": "It is shorter."},
    }
    context.close()
