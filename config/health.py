"""GET /healthz: liveness and whether the database can take a write now, for load balancers and monitoring."""

from django.conf import settings
from django.db import connection
from django.http import JsonResponse

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


def health(request):
    state = database_state()
    if state != "ok":
        return JsonResponse({"status": "error", "database": state}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})
