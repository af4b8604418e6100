"""A throw-away Django setup for the bench scripts that drive the product itself: a SQLite database in a new
temporary folder, migrated, with the project's settings."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_scratch_database(prefix: str) -> Path:
    """Point Django at a new SQLite file under a fresh temporary folder, set it up and migrate; returns
    the folder."""
    workdir = Path(tempfile.mkdtemp(prefix=f"seplab-{prefix}-"))
    os.environ.update({"DATABASE_URL": f"sqlite:///{workdir / f'{prefix}.sqlite3'}",
                       "DJANGO_SETTINGS_MODULE": "config.settings"})
    os.environ.setdefault("DEBUG", "1")  # a local scratch run, in development mode
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return workdir
