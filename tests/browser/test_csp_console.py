"""The rater pages run under the project's Content Security Policy without a violation: htmx is configured not to
inject its indicator style (base.html's htmx-config), and no page of ours sets an inline style or script the policy
refuses. Chromium reports every refusal on the console ("Refused to apply inline style ..."), which is read here."""

from __future__ import annotations

import pytest

from annotation.studies import creation, enrolment
from tests.browser.conftest import wait_until_rating_page_ready
from tests.conftest import study_jsonl

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_rater_pages_log_no_content_security_policy_refusal(browser_page, live_server, researcher):
    study = creation.do_create_study(researcher, "csp", study_jsonl(3), "c.jsonl")
    rater = enrolment.do_create_rater_link(study, "csp")
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    refused: list[str] = []
    page.on(
        "console",
        lambda m: refused.append(m.text) if "Content Security Policy" in m.text or "Refused to" in m.text else None,
    )
    page.goto(live_server.url + rater.link_path())  # the welcome page
    page.get_by_role("button", name="Start rating").click()
    wait_until_rating_page_ready(page)
    page.keyboard.press("1")
    page.keyboard.press("Enter")  # an htmx swap to the next pair
    wait_until_rating_page_ready(page)
    page.goto(live_server.url + study.open_link_path())
    assert refused == []
