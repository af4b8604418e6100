"""Security pass, L8 and the bench databases: without DEBUG in the environment the app is in production mode and
refuses the development key; each bench run gets a PostgreSQL database of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def manage(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.own_database
def test_without_debug_in_the_environment_the_app_is_production_safe(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'x.sqlite3'}"
    refused = manage(env, "check")
    assert refused.returncode != 0 and "DEBUG=0 needs a real SECRET_KEY" in refused.stderr
    assert "set DEBUG=1 (make run does)" in refused.stderr
    assert manage({**env, "DEBUG": "1"}, "check").returncode == 0  # development mode is explicit
    makefile = (ROOT / "Makefile").read_text()
    assert "run test: export DEBUG ?= 1" in makefile


@pytest.mark.own_database
def test_each_bench_run_gets_a_postgresql_database_of_its_own(tmp_path):
    import psycopg

    from bench.scratch import prepare_database

    first, second = prepare_database("postgres", tmp_path), prepare_database("postgres", tmp_path)
    assert first != second and "seplab_load_" in first
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres") as conn:
        names = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
    assert {first.rsplit("/", 1)[1], second.rsplit("/", 1)[1]} <= names and "seplab_load" not in names
