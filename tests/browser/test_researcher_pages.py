"""The researcher's pages on the demo in Chromium: the study page's copy buttons, the report by population,
the stale report refreshing itself over htmx, and the screenshots in the README."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from analytics import stored
from analytics.populations import Population
from annotation.models import Study
from tests.analytics.test_report import imported

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def logged_in(browser_page, live_server, study):
    client = Client()
    client.force_login(study.owner)
    context = browser_page.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    return context


def keep(page, artifacts, name: str, height: int = 2200) -> None:
    """A screenshot of the page's top ``height`` pixels in test-artifacts; copied to docs/screenshots with
    SEPLAB_UPDATE_SCREENSHOTS=1."""
    path = artifacts / name
    page.screenshot(path=str(path), full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": height})
    if os.environ.get("SEPLAB_UPDATE_SCREENSHOTS") == "1":
        shutil.copy(path, DOCS / name)


def test_the_demo_study_page_and_report_by_population(browser_page, live_server, artifacts):
    call_command("load_demo", "--base-url", live_server.url, stdout=open(os.devnull, "w"))
    study = Study.objects.get(name="demo")
    context = logged_in(browser_page, live_server, study)
    page = context.new_page()
    page.goto(live_server.url + study.get_absolute_url())
    expect(page.get_by_test_id("selection-summary")).to_contain_text("Cluster-stratified")
    expect(page.get_by_test_id("progress")).to_contain_text("Judge verdicts")
    keep(page, artifacts, "study-page.png", height=2700)
    rater = study.raters.get(external_id="demo-rater")
    page.get_by_role("button", name="Copy: Link for demo-rater").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == live_server.url + rater.link_path()

    page.goto(live_server.url + reverse("report", args=[study.pk]))
    expect(page.get_by_test_id("report-state-fresh")).to_be_visible()  # load_demo computed it
    expect(page.get_by_test_id("population-label")).to_have_text("Humans")
    expect(page.get_by_role("heading", name="ELO", exact=True)).to_be_visible()
    keep(page, artifacts, "report.png")
    page.get_by_label("Whose judgments").select_option("all")
    page.get_by_role("button", name="Show").click()
    # the mixed view is computed in the background: run the worker's job, the page reloads itself over htmx
    expect(page.get_by_test_id("report-state-missing")).to_be_visible()
    stored.refresh(study, Population(kind="all"))
    expect(page.get_by_test_id("mixed-population")).to_be_visible(timeout=10_000)
    expect(page.get_by_test_id("report-state-fresh")).to_be_visible()
    context.close()


def test_a_stale_report_says_so_and_refreshes_in_place(browser_page, live_server, researcher, study):
    imported(study, [("h1", "human", "sys-a", "sys-a"), ("h2", "human", "sys-b", "sys-a")])
    stored.refresh(study, Population())
    context = logged_in(browser_page, live_server, study)
    page = context.new_page()
    imported(study, [("h3", "human", "sys-a", "sys-b")])  # new data after the report was computed
    page.goto(live_server.url + reverse("report", args=[study.pk]))
    expect(page.get_by_test_id("report-state-stale")).to_contain_text("New data since this report was computed")
    expect(page.locator(".stats > div").first).to_contain_text("2 judgments")  # the numbers from before
    stored.refresh(study, Population())
    expect(page.get_by_test_id("report-state-fresh")).to_be_visible(timeout=10_000)
    expect(page.locator(".stats > div").first).to_contain_text("3 judgments")
    context.close()
