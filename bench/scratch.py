"""A throw-away Django setup for the bench scripts that drive the product itself: a database of the run's own (a
SQLite file in a new temporary folder, or a PostgreSQL database with a unique name, dropped when the run ends),
migrated, with the project's settings."""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"  # the server's own database, to create and drop others


def setup_scratch_database(prefix: str, kind: str = "sqlite") -> Path:
    """Point Django at a new database of this run's own (``kind`` sqlite or postgresql) with a fresh temporary
    folder, set it up and migrate; returns the folder."""
    workdir = Path(tempfile.mkdtemp(prefix=f"seplab-{prefix}-"))
    os.environ.update(
        {"DATABASE_URL": prepare_database(kind, workdir, prefix), "DJANGO_SETTINGS_MODULE": "config.settings"}
    )
    os.environ.setdefault("DEBUG", "1")  # a local scratch run, in development mode
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return workdir


def prepare_database(kind: str, workdir: Path, prefix: str = "load") -> str:
    """A database of this run's own: a SQLite file in its folder, or a PostgreSQL database with a unique name,
    dropped when the run ends (another run's database is never touched)."""
    if kind == "sqlite":
        return f"sqlite:///{workdir / f'{prefix}.sqlite3'}"
    import atexit

    name = database_name(prefix)
    create_database(name)

    def drop() -> None:
        from django.db import connections

        connections.close_all()
        drop_database(name)

    atexit.register(drop)
    return f"postgres://postgres@127.0.0.1:5432/{name}"


def database_name(prefix: str) -> str:
    """A PostgreSQL database name no other run has (the process id and random hex)."""
    return f"seplab_{prefix}_{os.getpid()}_{secrets.token_hex(4)}"


def create_database(name: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
