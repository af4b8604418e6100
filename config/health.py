"""GET /healthz: liveness, whether the database can take a write now, and when a background worker was last seen,
for load balancers and monitoring."""

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.shortcuts import render

LOCK_PROBE_MS = 1000  # a write lock not free within a second means submits are queueing behind it


def database_state() -> str:
    """ok, locked (SQLite: another process holds the write lock, so every submit waits), read-only
    (PostgreSQL: a standby), or unreachable."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
            if connection.vendor == "postgresql":
                cursor.execute("SELECT pg_is_in_recovery()")
                return "read-only" if cursor.fetchone()[0] else "ok"
            if connection.vendor == "sqlite" and not connection.in_atomic_block:
                # Readers never wait in WAL mode, so SELECT 1 says nothing about writes: take the write lock
                # and let go of it at once, waiting at most LOCK_PROBE_MS.
                timeout_ms = int(settings.DATABASES["default"].get("OPTIONS", {}).get("timeout", 5) * 1000)
                cursor.execute(f"PRAGMA busy_timeout = {LOCK_PROBE_MS}")
                try:
                    cursor.execute("BEGIN IMMEDIATE")
                    cursor.execute("ROLLBACK")
                except Exception as exc:  # noqa: BLE001 -- sqlite3.OperationalError, wrapped or not
                    if "locked" in str(exc):
                        return "locked"
                    raise
                finally:
                    cursor.execute(f"PRAGMA busy_timeout = {timeout_ms}")
    except Exception:  # any database failure means "not healthy"; the detail stays in the logs
        return "unreachable"
    return "ok"


def worker_state() -> dict:
    """When a background worker was last seen, and whether none has been for a minute (annotation/worker.py). The
    web server's own health does not depend on it: pages keep serving and jobs wait."""
    from annotation.worker import last_seen, worker_missing

    try:
        seen = last_seen()
        return {"last_seen": seen.isoformat() if seen else None, "missing": worker_missing()}
    except Exception:  # noqa: BLE001 -- the database state above says why
        return {"last_seen": None, "missing": True}


def health(request):
    """The state as JSON (load balancers, monitors), or as a small page to a browser that asks for HTML (a person
    checking by hand reads it in words, in a page with a title and a language)."""
    state = database_state()
    body = {"status": "ok" if state == "ok" else "error", "database": state, "worker": worker_state()}
    status = 200 if state == "ok" else 503
    if request.accepts("text/html") and "text/html" in request.headers.get("Accept", ""):
        return render(request, "healthz.html", {"state": body}, status=status)
    return JsonResponse(body, status=status)
