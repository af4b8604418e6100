"""A rater in a real browser: keyboard-only assignment, htmx swaps, escaping, and the no-JS path."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Dialog, expect

from annotation.models import Assignment, Judgment
from annotation.rating import recording
from annotation.studies import creation, enrolment, lifecycle
from tests.annotation.test_rendering import XSS
from tests.browser.conftest import wait_until_rating_page_ready
from tests.conftest import study_jsonl

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each step: the key pressed and the display-coordinate answer it means.
KEY_STEPS = [("1", "first"), ("ArrowRight", "second"), ("3", "tie"), ("ArrowLeft", "first"), ("2", "second")]


def test_a_rater_completes_an_assignment_with_the_keyboard_only(browser_page, live_server, researcher, artifacts):
    study = creation.do_create_study(researcher, "kbd", study_jsonl(2), "k.jsonl")
    lifecycle.do_update_settings(study, {"judgments_per_assignment": 5}, None)  # one item's five pairs
    rater = enrolment.do_create_rater_link(study, "keyboard-rater")
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + rater.link_path())
    expect(page.get_by_role("button", name="Start rating")).to_be_focused()
    page.keyboard.press("Enter")  # the autofocused start button
    expect(page.get_by_text("Pair 1 of 5")).to_be_visible()
    expect(page.locator("html")).to_have_attribute("data-shortcuts", "on")
    wait_until_rating_page_ready(page)
    page.evaluate("window.__sameDocument = true")  # gone if any step reloads the page
    for number, (key, _) in enumerate(KEY_STEPS, start=1):
        expect(page.get_by_text(f"Pair {number} of 5")).to_be_visible()
        if number == 1:
            page.screenshot(path=str(artifacts / "rate-pair.png"), full_page=True)
        page.keyboard.press(key)
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Assignment complete")).to_be_visible()
    assert page.evaluate("window.__sameDocument") is True  # htmx swapped every pair in place
    page.screenshot(path=str(artifacts / "rate-complete.png"))

    assignment = Assignment.objects.get(rater=rater)
    assert assignment.status == "completed"
    expect(page.get_by_test_id("completion-code")).to_have_text(assignment.completion_code)
    judgments = list(Judgment.objects.filter(rater=rater).select_related("assignment_pair").order_by("id"))
    assert len(judgments) == 5
    for judgment, (_, shown) in zip(judgments, KEY_STEPS, strict=True):
        expected = {
            "first": "a" if judgment.a_shown_first else "b",
            "second": "b" if judgment.a_shown_first else "a",
            "tie": "tie",
        }[shown]
        assert judgment.choice == expected
        assert judgment.client_time_ms is not None and judgment.time_on_task_ms is not None
    assert [j.assignment_pair.position for j in judgments] == [0, 1, 2, 3, 4]


def test_an_output_with_a_script_tag_is_shown_as_text(browser_page, live_server, researcher, artifacts) -> None:
    line = {
        "id": "x",
        "input": "Say hello <b>politely</b>.",
        "outputs": {"evil": ["<script>alert(1)</script>\nHello   there"], "good": ["Hello."]},
    }
    study = creation.do_create_study(researcher, "xss", (json.dumps(line) + "\n").encode(), "x.jsonl")
    rater = enrolment.do_create_rater_link(study, "r")
    page = browser_page.new_page()
    dialogs: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    outputs = page.locator(".output").all_inner_texts()
    assert "<script>alert(1)</script> Hello there" in outputs  # Markdown: one paragraph, the tag as text
    expect(page.get_by_role("paragraph").filter(has_text="Say hello <b>politely</b>.")).to_be_visible()
    expect(page.locator("pre.source").first).to_be_hidden()
    page.get_by_text("Show the source text").click()  # the source keeps every space and line break
    assert "<script>alert(1)</script>\nHello   there" in page.locator("pre.source").all_inner_texts()
    assert page.locator("main script").count() == 0
    page.screenshot(path=str(artifacts / "rate-xss.png"))
    assert dialogs == []


@pytest.mark.slow(seconds=11)
def test_a_corpus_of_xss_vectors_runs_nothing_and_loads_nothing_from_another_host(
    browser_page, live_server, researcher, artifacts
) -> None:
    lines = [
        {
            "id": "corpus",
            "input": "Answer. " + XSS[0],
            "outputs": {
                "evil": ["\n\n".join(XSS)],
                "good": ["Hello **there**.\n\n```python\nprint('hi')\n```\n\n- a\n- b"],
            },
        }
    ]
    lines += [
        {"id": f"v{n}", "input": vector, "outputs": {"evil": [vector], "good": ["Fine."]}}
        for n, vector in enumerate(XSS)
    ]
    study = creation.do_create_study(
        researcher, "xss-corpus", "".join(json.dumps(x) + "\n" for x in lines).encode(), "x.jsonl"
    )
    lifecycle.do_update_settings(study, {"raters_per_item": 1, "judgments_per_assignment": 1}, None)  # an item each
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    dialogs: list[str] = []
    foreign: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.on("request", lambda request: None if request.url.startswith(live_server.url) else foreign.append(request.url))
    checked_code = False
    for n in range(len(lines)):  # every item: its input and both outputs, rendered and as source
        rater = enrolment.do_create_rater_link(study, f"r{n}")
        response = page.goto(live_server.url + rater.link_path())
        assert "unsafe-inline" not in response.headers["content-security-policy"]
        page.get_by_role("button", name="Start rating").click()
        expect(page.get_by_test_id("output-1")).to_be_visible()
        code = page.locator(".rendered pre code")
        if code.count():  # the corpus item: highlighted code in a monospace font
            assert "monospace" in code.first.evaluate("e => getComputedStyle(e).fontFamily")
            page.screenshot(path=str(artifacts / "rate-xss-corpus.png"), full_page=True)
            checked_code = True
        page.get_by_text("Show the source text").click()
        expect(page.get_by_test_id("source-1")).to_be_visible()
    page.wait_for_timeout(300)
    assert dialogs == [] and foreign == [] and checked_code


def test_the_rating_page_works_without_javascript(browser_page, live_server, researcher):
    study = creation.do_create_study(researcher, "nojs", study_jsonl(1), "n.jsonl")
    rater = enrolment.do_create_rater_link(study, "r")
    context = browser_page.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    for number in range(1, 6):
        expect(page.get_by_text(f"Pair {number} of 5")).to_be_visible()
        page.get_by_label("Output 2").check()
        page.get_by_role("button", name="Submit").click()
    expect(page.get_by_role("heading", name="Assignment complete")).to_be_visible()
    assert Judgment.objects.filter(rater=rater).count() == 5
    assert not Judgment.objects.filter(rater=rater, client_time_ms__isnull=False).exists()


def test_narrow_screens_stack_the_outputs(browser_page, live_server, researcher, artifacts):
    study = creation.do_create_study(researcher, "narrow", study_jsonl(1), "n.jsonl")
    rater = enrolment.do_create_rater_link(study, "r")
    page = browser_page.new_page(viewport={"width": 390, "height": 844})
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    first, second = (page.get_by_test_id(f"output-{i}").bounding_box() for i in (1, 2))
    assert second["y"] > first["y"] + first["height"] - 1  # below, not beside
    page.screenshot(path=str(artifacts / "rate-narrow.png"), full_page=True)


def test_a_failed_save_shows_a_retry_message_and_the_retry_counts_once(
    browser_page, live_server, researcher, monkeypatch
):
    from django.db import OperationalError

    study = creation.do_create_study(researcher, "flaky", study_jsonl(1), "f.jsonl")
    rater = enrolment.do_create_rater_link(study, "r")
    real, failures = recording.do_record_judgment, []

    def flaky(*args, **kwargs):
        if not failures:
            failures.append(kwargs["idempotency_key"])
            raise OperationalError("database restarting")
        return real(*args, **kwargs)

    monkeypatch.setattr(recording, "do_record_judgment", flaky)
    page = browser_page.new_page()
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    expect(page.locator("html")).to_have_attribute("data-shortcuts", "on")
    wait_until_rating_page_ready(page)
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.get_by_text("could not be saved just now")).to_be_visible()
    expect(page.get_by_text("Pair 1 of 5")).to_be_visible()
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Pair 2 of 5")).to_be_visible()
    [judgment] = Judgment.objects.filter(rater=rater)
    assert judgment.idempotency_key == failures[0]


# The 5-point scale with "both are bad": the key pressed, and the stored (side shown, strength) it means.
SCALE_STEPS = [
    ("5", ("second", 2)),
    ("1", ("first", 2)),
    ("3", ("tie", None)),
    ("0", ("both_bad", None)),
    ("4", ("second", 1)),
]


def test_the_preference_scale_is_answered_with_the_keys_its_mode_defines(browser_page, live_server, researcher):
    study = creation.do_create_study(researcher, "scale", study_jsonl(2), "s.jsonl")
    lifecycle.do_update_settings(
        study, {"elicitation": "preference_scale", "neither_option": True, "judgments_per_assignment": 5}, None
    )
    rater = enrolment.do_create_rater_link(study, "scale-rater")
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    wait_until_rating_page_ready(page)
    for number, (key, _) in enumerate(SCALE_STEPS, start=1):
        expect(page.get_by_text(f"Pair {number} of 5")).to_be_visible()
        page.keyboard.press(key)
        page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Assignment complete")).to_be_visible()
    judgments = list(Judgment.objects.filter(rater=rater).order_by("id"))
    stored = []
    for judgment, (_, (shown, strength)) in zip(judgments, SCALE_STEPS, strict=True):
        side = {"first": "a" if judgment.a_shown_first else "b", "second": "b" if judgment.a_shown_first else "a"}
        stored.append((judgment.choice, judgment.response_set, judgment.strength))
        assert stored[-1] == (
            (side[shown], None, strength) if shown in side else ("tie", [] if shown == "both_bad" else None, None)
        )
    assert len(stored) == 5
