from django.db import connection
from django.http import JsonResponse


def health(request):
    """Liveness and database reachability, for load balancers and monitoring."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:  # any database failure means "not healthy"; the detail stays in the logs
        return JsonResponse({"status": "error", "database": "unreachable"}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})
