"""The production deployment path: settings that refuse insecure defaults, `check --deploy`, the
health endpoint, and gunicorn + whitenoise actually serving with the security headers."""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.urls import reverse

ROOT = Path(__file__).resolve().parents[1]


def production_env(tmp_path: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
    env.update(
        {
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "127.0.0.1,seplab.example.org",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'prod.sqlite3'}",
            "STATIC_ROOT": str(tmp_path / "static"),
            "HTTPS": "1",
            "REDIS_URL": "redis://127.0.0.1:6379/0",  # the servers' shared cache (README, Production deployment)
        }
    )
    env.update(extra)
    return env


def manage(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.own_database
def test_check_deploy_passes_with_production_settings(tmp_path):
    result = manage(production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.own_database
def test_check_deploy_warns_when_the_server_processes_share_no_cache(tmp_path):
    """Without REDIS_URL each gunicorn worker has its own cache: an arena stream's lease (and the open-link limits)
    would hold in one process only, and a page reconnecting to another would have the reply asked and paid again."""
    env = {k: v for k, v in production_env(tmp_path).items() if k != "REDIS_URL"}
    result = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    said = result.stdout + result.stderr
    assert result.returncode != 0 and "seplab.W010" in said and "REDIS_URL" in said


@pytest.mark.own_database
@pytest.mark.parametrize(
    ("variables", "refused"),
    [
        ("OPENAI_API_KEY", "seplab.E001"),  # a name without the hosts its key is for
        ("OPENAI_API_KEY=api.openai.com,OTHER=", "seplab.E001"),
        ("OPENAI_API_KEY=api.openai.com:443", "seplab.E002"),  # host names without ports
        ("OPENAI_API_KEY=https://api.openai.com", "seplab.E002"),
        ("OPENAI_API_KEY=api.openai.com,OTHER=host1.example|host2.example", ""),
    ],
)
def test_check_deploy_refuses_a_key_variable_without_its_hosts(tmp_path, variables, refused):
    """The operator's key variables are tied to the hosts their keys are for (SEPLAB_JUDGE_KEY_VARIABLES, NAME=HOST|
    HOST): a name alone would let a researcher's endpoint receive the key."""
    env = production_env(tmp_path, SEPLAB_JUDGE_KEY_VARIABLES=variables)
    result = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    said = result.stdout + result.stderr
    if refused:
        assert result.returncode != 0 and refused in said and "SEPLAB_JUDGE_KEY_VARIABLES" in said
    else:
        assert result.returncode == 0, said


@pytest.mark.own_database
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"SECRET_KEY": ""}, "DEBUG=0 needs a real SECRET_KEY"),
        ({"SECRET_KEY": "short"}, "DEBUG=0 needs a real SECRET_KEY"),
        ({"ALLOWED_HOSTS": ""}, "DEBUG=0 needs ALLOWED_HOSTS"),
    ],
)
def test_production_refuses_to_start_on_development_defaults(tmp_path, change, message):
    env = production_env(tmp_path, **change)
    if not change.get("SECRET_KEY", "x"):
        env.pop("SECRET_KEY")
    if "ALLOWED_HOSTS" in change and not change["ALLOWED_HOSTS"]:
        env.pop("ALLOWED_HOSTS")
    result = manage(env, "check")
    assert result.returncode != 0 and message in result.stderr


def test_a_browser_reads_the_health_in_a_page_with_a_title_and_a_language(client, db):
    page = client.get(reverse("health"), HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    html = page.content.decode()
    assert '<html lang="en">' in html and "<title>SepLab health: ok</title>" in html and "Database: ok" in html
    assert client.get(reverse("health"), HTTP_ACCEPT="*/*")["Content-Type"] == "application/json"


def test_the_health_endpoint(client, db, monkeypatch):
    response = client.get(reverse("health"))
    assert response.status_code == 200 and response.json() == {
        "status": "ok",
        "database": "ok",
        "worker": {"last_seen": None, "missing": True},
    }
    from config import health

    class Down:
        def cursor(self):
            raise RuntimeError("database down")

    monkeypatch.setattr(health, "connection", Down())
    down = client.get(reverse("health"))
    assert down.status_code == 503 and down.json()["database"] == "unreachable"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow(seconds=25)
@pytest.mark.own_database
def test_gunicorn_serves_the_app_with_static_files_and_security_headers(tmp_path):
    env = production_env(tmp_path, HTTPS="0")
    for args in (("migrate", "--noinput"), ("collectstatic", "--noinput")):
        result = manage(env, *args)
        assert result.returncode == 0, result.stderr
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "config/gunicorn.conf.py",
            "config.wsgi:application",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("gunicorn did not answer within 20 s")
        with urllib.request.urlopen(f"{base}/accounts/login/", timeout=5) as r:
            headers = r.headers
            assert r.status == 200
        assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"
        assert "default-src 'self'" in headers["Content-Security-Policy"]
        assert headers["Referrer-Policy"] == "same-origin"
        with urllib.request.urlopen(f"{base}/accounts/login/", timeout=5) as r:
            page = r.read().decode()
        css = re.search(r'href="(/static/css/seplab\.[0-9a-f]+\.css)"', page).group(1)  # the hashed stylesheet URL
        with urllib.request.urlopen(f"{base}{css}", timeout=5) as r:
            assert r.status == 200 and "max-age" in r.headers["Cache-Control"]
        with urllib.request.urlopen(f"{base}/favicon.ico", timeout=5) as r:  # redirected to the hashed icon
            assert r.status == 200 and r.url.endswith(".svg") and "/static/favicon." in r.url
        # The access log (on, to stdout) never holds a link token or a credential.
        secret = "eyJyIjoxLCJuIjoiYWJjIn0:SECRETSIGNATURE"
        request = urllib.request.Request(
            f"{base}/r/{secret}/",
            headers={"Authorization": "Token APITOKENSECRET", "Referer": f"{base}/x/{secret}/?assignmentId=A1"},
        )
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(request, timeout=5)
        assert missing.value.code == 404
    finally:
        server.terminate()
        output = server.communicate(timeout=10)[0].decode()
    assert '"GET /r/[redacted]/ HTTP/1.1" 404' in output and f"{base}/x/[redacted]/" in output
    assert "SECRETSIGNATURE" not in output and "APITOKENSECRET" not in output
