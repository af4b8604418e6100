"""An MTurk-style HIT in a real browser: our link inside an <iframe> on another origin, completed with
the keyboard, submitting to a local stand-in for turkSubmitTo."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode

import pytest
from playwright.sync_api import expect

from annotation.models import ExternalLink, WorkerSession

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def requester_site() -> Iterator[tuple[str, dict[str, str], list[dict]]]:
    """A tiny site on another origin: serves the frame page and records externalSubmit posts."""
    received: list[dict] = []
    pages: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's naming)
            body = pages.get(self.path, "not found").encode()
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length", 0))
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            received.append({"path": self.path, **form})
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            self.wfile.write(b"<p>HIT submitted</p>")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages, received
    finally:
        server.shutdown()


def test_a_hit_in_an_iframe_is_completed_and_submitted(
    browser_page, live_server, study, settings, requester_site, artifacts
):
    origin, pages, received = requester_site
    settings.SEPLAB_FRAME_ANCESTORS = [origin]
    settings.SEPLAB_TURK_SUBMIT_HOSTS = [origin]
    link = ExternalLink.objects.create(study=study, platform="mturk")
    query = urlencode({"assignmentId": "ASSIGN-1", "hitId": "HIT-1", "workerId": "WORKER-1", "turkSubmitTo": origin})
    pages["/hit.html"] = (
        f'<h1>Requester HIT</h1><iframe src="{live_server.url}{link.path()}?{query}" '
        'width="1100" height="800" title="task"></iframe>'
    )

    page = browser_page.new_page(viewport={"width": 1200, "height": 900})
    page.goto(f"{origin}/hit.html")
    frame = page.frame_locator("iframe")
    expect(frame.get_by_text("Pair 1 of 5")).to_be_visible()
    expect(frame.locator("html")).to_have_attribute("data-shortcuts", "on")
    frame.locator("body").click()  # keyboard focus inside the frame
    for number in range(1, 6):
        expect(frame.get_by_text(f"Pair {number} of 5")).to_be_visible()
        page.keyboard.press("2")
        page.keyboard.press("Enter")
    expect(frame.get_by_role("button", name="Submit the HIT")).to_be_visible()
    page.screenshot(path=str(artifacts / "hit-iframe-complete.png"))
    frame.get_by_role("button", name="Submit the HIT").click()
    expect(frame.get_by_text("HIT submitted")).to_be_visible()

    session = WorkerSession.objects.get()
    assert session.assignment.status == "completed" and session.assignment.judgments.count() == 5
    assert received == [
        {
            "path": "/mturk/externalSubmit",
            "assignmentId": "ASSIGN-1",
            "completion_code": session.assignment.completion_code,
        }
    ]


def test_the_frame_is_refused_to_sites_not_listed(browser_page, live_server, study, settings, requester_site):
    origin, pages, _ = requester_site
    settings.SEPLAB_FRAME_ANCESTORS = ["https://worker.mturk.com"]
    link = ExternalLink.objects.create(study=study, platform="generic")
    pages["/evil.html"] = f'<iframe src="{live_server.url}{link.path()}?worker_id=W9" title="task"></iframe>'
    page = browser_page.new_page()
    page.goto(f"{origin}/evil.html")
    page.wait_for_timeout(1000)
    frame = page.frames[1]
    assert "Pair 1 of" not in frame.content()  # Chromium blocked the framed page (CSP frame-ancestors)
