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


@pytest.mark.slow(seconds=7)
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
    # every link box shows its whole link, wrapped inside it (they once cut it at about 210 px), beside its button
    whole = "e => e.scrollWidth <= e.clientWidth && e.scrollHeight <= e.clientHeight + 1"
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        boxes = page.locator(".copy-link textarea.copy")
        assert boxes.count() == study.raters.filter(source="personal_link").count() + 1  # and the open link
        assert all(box.evaluate(whole) for box in boxes.all())
        open_link = page.locator(".copy-link", has=page.locator("#copy-open"))
        edge = max(b["x"] + b["width"] for b in (open_link.bounding_box(), page.locator("#raters").bounding_box()))
        assert edge <= width  # the open link's box and its Copy button stay on the card and the screen
        # the settings page's jump list on a phone: every label whole and on the screen
        if width == 390:
            page.goto(live_server.url + reverse("study_settings", args=[study.pk]))
            for jump in page.locator(".settings-nav a").all():
                box = jump.bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= width and jump.evaluate(whole)
            # a menu's chosen option wraps over the lines it needs ("Random: one random system pair per item, ...")
            tall_enough = (
                "e => { const c = document.createElement('canvas').getContext('2d'), s = getComputedStyle(e);"
                " c.font = `${s.fontSize} ${s.fontFamily}`;"
                " const lines = Math.ceil(c.measureText(e.options[e.selectedIndex].text).width / e.clientWidth);"
                " return e.clientHeight >= lines * parseFloat(s.lineHeight); }"
            )
            menus = page.locator("form.settings fieldset > .field select").all()
            assert menus and all(menu.evaluate(tall_enough) for menu in menus)
            # the crowd page's fields stay on their cards (the gold pairs' boxes ran 20 to 40 px off them)
            page.goto(live_server.url + reverse("external_links", args=[study.pk]))
            sticking_out = "e => e.getBoundingClientRect().right > e.closest('.card').getBoundingClientRect().right"
            assert not any(field.evaluate(sticking_out) for field in page.locator(".card select, .card textarea").all())
            page.goto(live_server.url + study.get_absolute_url())

    page.goto(live_server.url + reverse("report", args=[study.pk]))
    expect(page.get_by_test_id("report-state-fresh")).to_be_visible()  # load_demo computed it
    expect(page.get_by_test_id("population-label")).to_have_text("Humans")
    expect(page.get_by_role("heading", name="ELO", exact=True)).to_be_visible()
    keep(page, artifacts, "report.png")
    page.get_by_label("Whose judgments").select_option("all")
    page.get_by_role("button", name="Show").click()
    # the mixed view is computed in the background: run the worker's job, the page reloads itself over htmx
    expect(page.get_by_test_id("report-state-missing")).to_be_visible()
    stored.do_refresh(study, Population(kind="all"))
    expect(page.get_by_test_id("mixed-population")).to_be_visible(timeout=10_000)
    expect(page.get_by_test_id("report-state-fresh")).to_be_visible()
    context.close()


def test_a_stale_report_says_so_and_refreshes_in_place(browser_page, live_server, researcher, study):
    imported(study, [("h1", "human", "sys-a", "sys-a"), ("h2", "human", "sys-b", "sys-a")])
    stored.do_refresh(study, Population())
    context = logged_in(browser_page, live_server, study)
    page = context.new_page()
    imported(study, [("h3", "human", "sys-a", "sys-b")])  # new data after the report was computed
    page.goto(live_server.url + reverse("report", args=[study.pk]))
    expect(page.get_by_test_id("report-state-stale")).to_contain_text("New data since this report was computed")
    expect(page.locator(".stats > div").first).to_contain_text("2 judgments")  # the numbers from before
    stored.do_refresh(study, Population())
    expect(page.get_by_test_id("report-state-fresh")).to_be_visible(timeout=10_000)
    expect(page.locator(".stats > div").first).to_contain_text("3 judgments")
    context.close()


@pytest.mark.slow(seconds=9)
def test_a_judge_runs_from_the_browser_with_stop_and_resume(browser_page, live_server, researcher):
    """Add a judge against the local OpenAI-compatible server, start it, watch the progress bar, stop it, resume
    it; the worker's job runs on a thread as ``db_worker`` would run it."""
    import threading

    from django.db import connections

    from annotation.jobs import run_job
    from annotation.models import Job, Judge, Judgment
    from tests.annotation.test_judge_runner import KEY, study_with
    from tests.judge_server import JudgeServer

    server = JudgeServer(api_key=KEY).start()
    server.delay = 0.25
    study = study_with(researcher, [f"Question {i}?" for i in range(6)])

    def work() -> threading.Thread:
        job = Job.objects.filter(kind="judge").first()
        assert job is not None

        def run() -> None:
            try:
                run_job.call(job.pk)
            finally:
                connections.close_all()

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    try:
        context = logged_in(browser_page, live_server, study)
        page = context.new_page()
        page.goto(live_server.url + reverse("judges", args=[study.pk]))
        page.get_by_label("Name").fill("local-judge")
        page.get_by_label("Base URL").fill(server.base_url)
        page.get_by_label("Model", exact=True).fill("judge-model")
        page.get_by_label("API key environment variable").select_option("")
        page.get_by_label("API key (stored)").fill(KEY)
        page.get_by_label("Requests at once").fill("1")
        page.get_by_role("button", name="Add the judge").click()
        expect(page.get_by_test_id("judge-start")).to_have_text("Start (12 requests to go)")
        page.get_by_test_id("judge-start").click()
        thread = work()
        expect(page.locator("progress[aria-label='Judge progress']")).to_be_visible()
        expect(page.get_by_test_id("judge-usage")).not_to_contain_text("0 judged", timeout=10_000)
        page.get_by_test_id("judge-stop").click()
        thread.join(timeout=30)
        expect(page.get_by_test_id("judge-message")).to_contain_text("Stopped:", timeout=10_000)
        done = Judgment.objects.filter(rater__judge__isnull=False).count()
        assert 1 <= done < 12
        expect(page.get_by_test_id("judge-start")).to_have_text(f"Resume ({12 - done} requests to go)")
        page.get_by_test_id("judge-start").click()
        thread = work()
        expect(page.get_by_text("Every pair of the judge's scope is judged in both orders.")).to_be_visible(
            timeout=20_000
        )
        thread.join(timeout=30)
        expect(page.get_by_test_id("judge-usage")).to_contain_text("12 judged")
        keys = list(Judgment.objects.filter(rater=Judge.objects.get().rater).values_list("pair_id", "a_shown_first"))
        assert len(keys) == 12 == len(set(keys)) and not server.invalid
        context.close()
    finally:
        server.shutdown()
        server.server_close()
