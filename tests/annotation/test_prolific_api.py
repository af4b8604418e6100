"""The Prolific API client against a local test server that checks every request (the real service
cannot be reached from here)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.crowd import sites
from annotation.models import ExternalLink, WorkerSession

TOKEN = "test-token-123"


@pytest.fixture
def prolific_server(
    settings,
) -> Iterator[tuple[str, dict[tuple[str, str], tuple[int, dict]], list[tuple[str, str, dict | None]]]]:
    """Answers like Prolific's API for the paths it knows; anything unexpected fails the request."""
    calls: list[tuple[str, str, dict | None]] = []
    routes: dict[tuple[str, str], tuple[int, dict]] = {}

    class Handler(BaseHTTPRequestHandler):
        def _handle(self, method: str):
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length)) if length else None
            calls.append((method, self.path, body))
            if self.headers.get("Authorization") != f"Token {TOKEN}":
                status, payload = 401, {"error": {"detail": "Invalid token"}}
            elif method == "POST" and self.headers.get("Content-Type") != "application/json":
                status, payload = 415, {"error": {"detail": "JSON expected"}}
            else:
                status, payload = routes.get((method, self.path), (404, {"error": {"detail": "Not found"}}))
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            self._handle("GET")

        def do_POST(self):  # noqa: N802
            self._handle("POST")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    settings.PROLIFIC_API_URL = base
    settings.PROLIFIC_TOKEN = TOKEN
    try:
        yield base, routes, calls
    finally:
        server.shutdown()


def run(*args) -> str:
    out = StringIO()
    call_command("prolific", *args, stdout=out)
    return out.getvalue()


def test_sync_follows_pages_and_matches_sessions(prolific_server, study):
    base, routes, calls = prolific_server
    link = ExternalLink.objects.create(study=study, platform="prolific")
    session = sites.do_accept(link, sites.Arrival("prolific", "P1", "SUB1", "PS1"))
    routes[("GET", "/api/v1/studies/PS1/submissions/")] = (
        200,
        {
            "results": [
                {
                    "id": "SUB1",
                    "participant_id": "P1",
                    "status": "AWAITING REVIEW",
                    "study_code": session.assignment.completion_code,
                }
            ],
            "_links": {"next": {"href": f"{base}/api/v1/studies/PS1/submissions/?page=2"}},
        },
    )
    routes[("GET", "/api/v1/studies/PS1/submissions/?page=2")] = (
        200,
        {
            "results": [{"id": "SUB2", "participant_id": "P2", "status": "RETURNED", "study_code": ""}],
            "_links": {"next": {"href": None}},
        },
    )
    rows = json.loads(run("sync", "--study", "small", "--prolific-study", "PS1"))
    assert [(r["submission_id"], r["code_matches"], r["answered"]) for r in rows] == [
        ("SUB1", True, False),
        ("SUB2", False, False),
    ]
    assert WorkerSession.objects.get(session_key="SUB1").platform_status == "AWAITING REVIEW"
    assert [c[:2] for c in calls] == [
        ("GET", "/api/v1/studies/PS1/submissions/"),
        ("GET", "/api/v1/studies/PS1/submissions/?page=2"),
    ]


def test_approve_and_reject_send_the_documented_transitions(prolific_server):
    _, routes, calls = prolific_server
    routes[("POST", "/api/v1/submissions/SUB1/transition/")] = (200, {"id": "SUB1", "status": "APPROVED"})
    routes[("POST", "/api/v1/submissions/SUB2/transition/")] = (200, {"id": "SUB2", "status": "REJECTED"})
    assert "Approved SUB1" in run("approve", "--submission", "SUB1")
    message = (
        "The attention checks in this task were answered incorrectly, which means the answers cannot be "
        "used; thank you for your time."
    )
    assert "Rejected SUB2" in run("reject", "--submission", "SUB2", "--message", message, "--category", "FAILED_CHECK")
    assert calls == [
        ("POST", "/api/v1/submissions/SUB1/transition/", {"action": "APPROVE"}),
        (
            "POST",
            "/api/v1/submissions/SUB2/transition/",
            {"action": "REJECT", "message": message, "rejection_category": "FAILED_CHECK"},
        ),
    ]


def test_rejections_need_a_real_explanation(prolific_server):
    _, _, calls = prolific_server
    with pytest.raises(CommandError, match="at least 100 characters"):
        run("reject", "--submission", "SUB2", "--message", "bad", "--category", "LOW_EFFORT")
    assert calls == []


def test_api_errors_are_reported(prolific_server, settings):
    _, routes, _ = prolific_server
    with pytest.raises(CommandError, match="Prolific answered 404 to POST"):
        run("approve", "--submission", "NOPE")
    settings.PROLIFIC_TOKEN = "wrong"
    with pytest.raises(CommandError, match="answered 401"):
        run("approve", "--submission", "SUB1")
    settings.PROLIFIC_TOKEN = ""
    with pytest.raises(CommandError, match="Set PROLIFIC_TOKEN"):
        run("approve", "--submission", "SUB1")
