"""Playwright (Python) driving Debian's Chromium against pytest-django's live server.

Never downloads a browser: it uses the system Chromium, which `make test` installs when missing
(`make browser` / `apt-get install chromium`), or CHROMIUM=/path/to/chromium. Without one the browser
tests fail with that advice: the rater flow is a feature, not an optional extra.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def wait_until_rating_page_ready(page) -> None:
    """Until rate.js has bound its shortcuts (it marks <html data-shortcuts="on">; htmx, loaded in the head,
    runs before it). Waiting on htmx alone raced the deferred rate.js on a busy machine. A locator, not
    wait_for_function: polling a JavaScript expression needs eval, which the page's CSP forbids."""
    page.locator("html[data-shortcuts='on']").wait_for(state="attached")


def find_chromium() -> str | None:
    for candidate in (
        os.environ.get("CHROMIUM"),
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture(scope="module")
def chromium() -> Iterator:
    """One Chromium for a module's tests on this worker (launching one per test cost ~0.6 s each). Module-scoped,
    not session-scoped: Playwright's sync API keeps an event loop running in this thread while it is started, and
    Django refuses synchronous ORM calls under a running loop, so the guard is lifted only while a browser module's
    tests run (every test in tests/browser is a browser test); pytest tears this down before a test of another
    module runs on the worker."""
    executable = find_chromium()
    if executable is None:
        message = (
            "No Chromium found for the browser tests: install Debian's chromium "
            "(`make browser`, or `apt-get install chromium`) or set CHROMIUM=/path/to/chromium."
        )
        pytest.fail(message)
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
            try:
                yield browser
            finally:
                browser.close()
    finally:
        connections.close_all()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def browser_page(chromium, live_server) -> Iterator:
    """The module's Chromium for one test: each test opens its own contexts (``new_context`` / ``new_page``), and
    whatever it left open is closed afterwards, so no cookie, storage or page reaches the next test."""
    yield chromium
    for context in list(chromium.contexts):
        context.close()
    # ORM calls made while Playwright's loop runs use a connection of their own (its greenlet has its own
    # context); close it, or PostgreSQL cannot drop the test database.
    connections.close_all()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
