"""Security pass, L2: while the database is unavailable every rater request gets the retry page (503, Retry-After),
never a bare 500; /healthz tells the truth about a held SQLite write lock."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.urls import reverse

from annotation import access
from annotation.rating import allocation
from annotation.views import raters
from tests.other_database import run_on


@pytest.fixture
def down(monkeypatch):
    def fail(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    return fail


def test_every_rater_request_gets_the_retry_page(client, study, rater, monkeypatch, down):
    assignment = allocation.do_start_assignment(rater)
    page = reverse("rate", args=[rater.token(), assignment.pk])
    monkeypatch.setattr(raters._PAGE, "rows", down)  # the page's and the submit's lookup
    monkeypatch.setattr(
        access.Rater.objects, "select_related", lambda *a: (_ for _ in ()).throw(OperationalError("database is locked"))
    )  # the welcome page's and the start's lookup
    for response in (
        client.get(page),
        client.post(page + "submit/", {"pair": 1, "key": "k", "choice": "first"}),
        client.get(reverse("rater_home", args=[rater.token()])),
        client.post(reverse("rater_start", args=[rater.token()])),
    ):
        assert response.status_code == 503 and response["Retry-After"] == "2"
        assert b"Nothing you answered is lost" in response.content and b'<html lang="en' in response.content
    german = client.get(page, HTTP_ACCEPT_LANGUAGE="de")  # the study cannot be read: the browser's language
    assert german.status_code == 503 and '<html lang="de">' in german.content.decode()
    assert "Ihre bisherigen Antworten sind nicht verloren" in german.content.decode()
    assert "Accept-Language" in german["Vary"]


def test_the_api_says_so_in_json(researcher, study, monkeypatch, down):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    monkeypatch.setattr("annotation.views.api.StudyViewSet.get_queryset", down)
    response = api.get("/api/studies/")
    assert response.status_code == 503 and "briefly unavailable" in response.json()["detail"]


@pytest.mark.slow(seconds=7)
@pytest.mark.own_database
def test_health_reports_a_held_sqlite_write_lock(tmp_path):
    """On a SQLite database of its own, whichever database this suite runs on: the lock is SQLite's."""
    result = run_on(
        "sqlite",
        """
import sqlite3, time
from django.db import connection
from django.test import Client
client = Client()
before = client.get("/healthz").json()
holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=1)
holder.execute("BEGIN IMMEDIATE")
started = time.monotonic()
locked = client.get("/healthz")
seconds = time.monotonic() - started
holder.rollback()
holder.close()
result = {"before": before, "locked": [locked.status_code, {k: v for k, v in locked.json().items() if k != "worker"}],
          "seconds": seconds,
          "after": client.get("/healthz").status_code}
""",
        tmp_path,
    )
    assert result["before"] == {"status": "ok", "database": "ok", "worker": {"last_seen": None, "missing": True}}
    assert result["locked"] == [503, {"status": "error", "database": "locked"}] and result["seconds"] < 5
    assert result["after"] == 200


@pytest.mark.slow(seconds=7)
@pytest.mark.own_database
def test_health_is_ok_on_a_writable_postgresql(tmp_path):
    result = run_on(
        "postgresql",
        """
from django.test import Client
response = Client().get("/healthz")
result = [response.status_code, response.json()]
""",
        tmp_path,
    )
    assert result == [200, {"status": "ok", "database": "ok", "worker": {"last_seen": None, "missing": True}}]
