"""Hostile input and access control: each bad request gets a clear 4xx and changes nothing."""

from __future__ import annotations

import json
import socket

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.exchange import exports, judgment_files
from annotation.models import Assignment, ExternalLink, Judgment, Rater, Study
from annotation.rating import allocation, imports
from annotation.studies import creation, enrolment
from tests.conftest import answer_all, study_jsonl

# ---- CSV injection --------------------------------------------------------------------------


def test_exported_csv_cells_cannot_run_formulas_and_still_round_trip(study, researcher):
    line = {
        "item": "item-0",
        "system_a": "sys-a",
        "system_b": "sys-b",
        "shown_first": "sys-a",
        "rater": '=HYPERLINK("http://evil")',
        "rater_kind": "judge",
        "choice": "sys-a",
        "note": "+1 cmd",
    }
    imports.do_import_judgments(study, (json.dumps(line) + "\n").encode(), "j.jsonl")
    row = judgment_files.judgment_csv_row(next(exports.judgment_lines(study)))
    assert '\'=HYPERLINK("http://evil")' in row and not any(c.startswith(("=", "+", "@")) for c in row)
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(judgment_files.JUDGMENT_CSV_COLUMNS)
    writer.writerow(row)
    copy = creation.do_create_study(researcher, "copy", study_jsonl(), "s.jsonl")
    imports.do_import_judgments(copy, buffer.getvalue().encode(), "j.csv")
    assert list(exports.judgment_lines(copy)) == list(exports.judgment_lines(study))


# ---- hostile files ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"[" * 50000 + b"]" * 50000 + b"\n", "nested too deeply"),
        (b'{"id": "x", "input": "a\\u0000b", "outputs": {"a": ["x"], "b": ["y"]}}\n', "NUL character"),
        (b'{"id": "x"}\x00\n', "NUL byte"),
        (b"\xff\xfe\x00garbage", "NUL byte"),
        (b'{"id": "x", "input": "\xc3\x28"}\n', "not valid UTF-8"),
    ],
)
def test_hostile_study_files_are_refused_and_change_nothing(researcher_client, data, message):
    response = researcher_client.post(
        reverse("study_create"), {"name": "hostile", "file": SimpleUploadedFile("h.jsonl", data)}
    )
    assert response.status_code == 400 and message in response.content.decode()
    assert not Study.objects.exists()


def test_a_million_item_file_over_the_limit_is_refused_before_parsing(researcher_client, settings):
    settings.SEPLAB_MAX_IMPORT_BYTES = 10 * 1024 * 1024
    line = b'{"id": "i", "input": "x", "outputs": {"a": ["x"], "b": ["y"]}}\n'
    data = line * 1_000_000  # ~66 MB
    response = researcher_client.post(
        reverse("study_create"), {"name": "huge", "file": SimpleUploadedFile("h.jsonl", data)}
    )
    assert response.status_code == 400 and b"file too large" in response.content
    assert not Study.objects.exists()


def test_uploaded_files_are_never_stored_or_served_back_raw(researcher_client, settings):
    from django.apps import apps
    from django.db import models

    html = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    lines = [
        {"id": "evil", "input": html, "outputs": {"a": [html], "b": ["plain"]}},
        {"id": "fine", "input": "ok", "outputs": {"a": ["x"], "b": ["y"]}},
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    response = researcher_client.post(
        reverse("study_create"),
        {"name": "uploaded", "file": SimpleUploadedFile("evil.html", data, content_type="text/html")},
    )
    assert response.status_code == 302
    study = Study.objects.get(name="uploaded")
    # Nothing keeps the upload as a file: it is parsed in memory and only its rows are stored.
    assert not [f for m in apps.get_models() for f in m._meta.get_fields() if isinstance(f, models.FileField)]
    assert settings.MEDIA_ROOT == "" and settings.MEDIA_URL in ("", "/")
    for path in ("/media/evil.html", "/static/evil.html", "/evil.html", "/uploads/evil.html"):
        assert researcher_client.get(path).status_code == 404, path
    # Its contents come back only as escaped text on pages and as attachments that browsers never render.
    item = study.items.get(external_id="evil")
    page = researcher_client.get(reverse("item_detail", args=[study.pk, item.pk])).content.decode()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page and "<script>alert(" not in page
    assert "<img src=x" not in page
    for fmt, content_type in (("jsonl", "application/x-ndjson"), ("csv", "text/csv")):
        download = researcher_client.get(reverse("judgments_export", args=[study.pk, fmt]))
        assert download["Content-Type"].startswith(content_type) and download["X-Content-Type-Options"] == "nosniff"
        assert download["Content-Disposition"].startswith("attachment")


# ---- rater endpoints --------------------------------------------------------------------------


def test_tampered_and_replayed_tokens_are_404(client, rater, study):
    token = rater.token()
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert client.get(reverse("rater_home", args=[tampered])).status_code == 404
    other_study = Study.objects.create(owner=study.owner, name="other")
    forged = Rater(pk=rater.pk + 1000, study=other_study, external_id="x", token_nonce=rater.token_nonce)
    assert client.get(reverse("rater_home", args=[forged.token()])).status_code == 404
    link = ExternalLink.objects.create(study=study, platform="generic")
    old = link.path()
    link.nonce = "rotated"
    link.save()
    assert client.get(old, {"worker_id": "w"}).status_code == 404


def test_wrong_methods_and_missing_fields(client, rater):
    assignment = allocation.do_start_assignment(rater)
    submit = reverse("rate_submit", args=[rater.token(), assignment.pk])
    assert client.get(submit).status_code == 405
    assert client.get(reverse("rater_start", args=[rater.token()])).status_code == 405
    response = client.post(submit, {"choice": "first", "unexpected": "x"})
    assert response.status_code == 400 and b"incomplete" in response.content
    assert not Judgment.objects.exists()


# ---- rate limiting ----------------------------------------------------------------------------


def test_login_attempts_are_rate_limited(client, researcher):
    for _ in range(9):
        assert client.post(reverse("login"), {"username": "alice", "password": "wrong"}).status_code == 200
    tenth = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
    assert tenth.status_code == 429 and b"Too many failed logins" in tenth.content
    blocked = client.post(reverse("login"), {"username": "alice", "password": "pw-alice"})
    assert blocked.status_code == 429 and "_auth_user_id" not in client.session


def test_open_link_sign_ups_are_rate_limited(client, study, monkeypatch):

    # this test is about the sign-up limit per client; the cap on one network's unanswered places (3) is
    # tests/hardening/test_claimed_as_shown.py's
    monkeypatch.setattr(allocation, "UNANSWERED_PER_CLIENT", 100)
    study.open_link_enabled = True
    study.save()
    for n in range(30):
        fresh = type(client)()
        # accepted: straight to a first pair while places last (12 here), then "nothing left to rate"
        assert fresh.post(study.open_link_path()).status_code == (302 if n < 12 else 200)
    assert type(client)().post(study.open_link_path()).status_code == 429
    assert Rater.objects.filter(source="open_link").count() == 30


def redis_up() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=0.5).close()
        return True
    except OSError:
        return False


def test_rate_limits_are_shared_through_redis(client, researcher, settings):
    if not redis_up():
        pytest.fail(
            "Redis is not answering on 127.0.0.1:6379: start redis-server (REDIS_URL shares the rate "
            "limits between processes, and this test checks exactly that)"
        )
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:6379/15",
            "KEY_PREFIX": "seplab-test",
        }
    }
    from django.core.cache import cache

    cache.clear()
    for _ in range(10):
        client.post(reverse("login"), {"username": "alice", "password": "wrong"})
    assert client.post(reverse("login"), {"username": "alice", "password": "wrong"}).status_code == 429
    cache.clear()


# ---- access matrix ---------------------------------------------------------------------------


@pytest.fixture
def world(study, researcher, other_researcher):
    admin = get_user_model().objects.create_superuser("root", password="pw-root")
    rater = enrolment.do_create_rater_link(study, "r1")
    other = enrolment.do_create_rater_link(study, "r2")
    assignment = allocation.do_start_assignment(rater)
    answer_all(assignment)
    return {
        "study": study,
        "admin": admin,
        "researcher": researcher,
        "other_researcher": other_researcher,
        "rater": rater,
        "other_rater": other,
        "assignment": assignment,
    }


RESEARCHER_URLS = [
    "study_detail",
    "study_items",
    "study_settings",
    "separability",
    "report",
    "external_links",
    "live_selection",
]


@pytest.mark.parametrize("role", ["anonymous", "rater", "other_rater", "researcher", "other_researcher", "admin"])
def test_the_access_matrix(client, world, role):
    study, assignment = world["study"], world["assignment"]
    if role in ("researcher", "other_researcher", "admin"):
        client.force_login(world[role])
    expected_researcher = {
        "anonymous": 302,
        "rater": 302,
        "other_rater": 302,
        "researcher": 200,
        "other_researcher": 404,
        "admin": 404,
    }[role]
    for name in RESEARCHER_URLS:
        assert client.get(reverse(name, args=[study.pk])).status_code == expected_researcher, (role, name)
    export = client.get(reverse("judgments_export", args=[study.pk, "jsonl"]))
    assert export.status_code == expected_researcher
    # the assignment page: only its own rater's token opens it, whoever is logged in
    token = world["other_rater"].token() if role == "other_rater" else world["rater"].token()
    status = client.get(reverse("rate", args=[token, assignment.pk])).status_code
    assert status == (404 if role == "other_rater" else 200), role
    admin_page = client.get("/admin/").status_code
    assert admin_page == (200 if role == "admin" else 302)
    assert Judgment.objects.count() == 5 and Assignment.objects.count() == 1


def test_link_tokens_never_reach_the_logs(client, rater, study):
    import io
    import logging

    from config.logfilters import RedactTokens, redact

    token = rater.token()
    assert redact(f"Not Found: /r/{token}/a/9/") == "Not Found: /r/[redacted]/a/9/"
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "Not Found: %s", (f"/x/{token}/",), None)
    RedactTokens().filter(record)
    assert token not in record.getMessage() and "/x/[redacted]/" in record.getMessage()
    [handler] = [
        h
        for h in logging.getLogger("django.request").handlers  # the configured console handler
        if any(isinstance(f, RedactTokens) for f in h.filters)
    ]
    stream = io.StringIO()
    previous = handler.setStream(stream)
    try:
        assert client.get(f"/r/{token}/a/999999/").status_code == 404  # Django logs 404s with their path
    finally:
        handler.setStream(previous)
    logged = stream.getvalue()
    assert "Not Found: /r/[redacted]/a/999999/" in logged and token not in logged


def test_secrets_never_reach_the_logs(client, researcher, study, rater, settings, monkeypatch):
    """A server error on an authenticated API call, a failed login and a rater page: what the configured
    handlers write names the failures but holds no secret key, API token, password or link token."""
    import io
    import logging

    from django.test import Client
    from rest_framework.authtoken.models import Token

    from analytics import stored

    handlers = {
        h
        for name in ("", "django.request")
        for h in logging.getLogger(name).handlers
        if isinstance(h, logging.StreamHandler)
    }
    assert handlers
    stream = io.StringIO()
    previous = {h: h.setStream(stream) for h in handlers}
    api_token = Token.objects.create(user=researcher).key

    def broken_report(study, population):
        raise RuntimeError("the report failed")

    monkeypatch.setattr(stored, "do_serve", broken_report)
    try:
        api = Client(raise_request_exception=False)
        failed = api.get(f"/api/studies/{study.pk}/report/", HTTP_AUTHORIZATION=f"Token {api_token}")
        assert failed.status_code == 500 and failed.json() == {"detail": "Server error; it has been logged."}
        login = client.post(reverse("login"), {"username": "alice", "password": "wrong-Pa55word-secret"})
        assert login.status_code == 200
        assert client.get(f"/r/{rater.token()}/a/999999/").status_code == 404
    finally:
        for handler, old in previous.items():
            handler.setStream(old)
    logged = stream.getvalue()
    assert f"Internal Server Error: /api/studies/{study.pk}/report/" in logged and "the report failed" in logged
    for secret in (settings.SECRET_KEY, api_token, "wrong-Pa55word-secret", rater.token()):
        assert secret not in logged


def test_api_errors_are_json_everywhere_under_api_and_html_elsewhere(client, researcher):
    from rest_framework.authtoken.models import Token

    auth = {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=researcher).key}"}
    for path in ("/api/no-such-thing/", "/api/studies/abc/", "/api/studies/999999/"):
        response = client.get(path, **auth)
        assert response.status_code == 404 and response["Content-Type"] == "application/json", path
        assert response.json() == {"detail": "Not found."} or "detail" in response.json()
    bad_page = client.get("/api/studies/?page=abc", **auth)
    assert bad_page.status_code == 400 and bad_page.json() == {"page": ["A page number is one positive integer."]}
    html = client.get("/no-such-page/")
    assert html.status_code == 404 and html["Content-Type"].startswith("text/html")
