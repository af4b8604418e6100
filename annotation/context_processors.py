"""What every page may show about the background worker: ``worker_missing`` (no worker seen for a minute), read
from the database only by the pages that show it."""

from __future__ import annotations

from django.db import DatabaseError
from django.utils.functional import SimpleLazyObject


def _missing() -> bool:
    from annotation.worker import worker_missing

    try:
        return worker_missing()
    except DatabaseError:
        return False  # the page's own error handling says the database is unavailable


def worker(request) -> dict:
    return {"worker_missing": SimpleLazyObject(_missing)}
