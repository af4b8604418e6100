"""Run a check on a database of a given kind, whichever database the suite itself runs on: a fresh, migrated
SQLite file or PostgreSQL database of its own (a unique name, dropped afterwards), in a child process with the
project's settings. For behaviour that belongs to one database (SQLite's write lock, PostgreSQL's parameter
limit), so both suite runs test it instead of skipping it."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

PRELUDE = """
import json, sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
"""


def run_on(kind: str, body: str, workdir: Path) -> dict:
    """Run ``body`` (Python; it sets ``result`` to something JSON can hold) and return ``result``."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1"}
    name = None
    if kind == "sqlite":
        env["DATABASE_URL"] = f"sqlite:///{workdir / 'other.sqlite3'}"
    elif kind == "postgresql":
        import psycopg

        name = f"seplab_check_{os.getpid()}_{secrets.token_hex(4)}"
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{name}"
    else:
        raise ValueError(kind)
    script = PRELUDE + body + "\nprint('RESULT ' + json.dumps(result))\n"
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
        )
    finally:
        if name:
            with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("RESULT "))
