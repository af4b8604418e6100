"""A small fixed-window rate limiter on Django's cache (local memory by default, Redis in production
via REDIS_URL), for login attempts and anonymous open-link sign-ups."""

from __future__ import annotations

from functools import wraps

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR", "unknown")


def allow(key: str, limit: int, window_seconds: int) -> bool:
    """Count one event for ``key``; False once more than ``limit`` happened in the current window."""
    cache_key = f"ratelimit:{key}"
    if cache.add(cache_key, 1, timeout=window_seconds):
        return True
    try:
        count = cache.incr(cache_key)
    except ValueError:  # expired between add and incr
        cache.set(cache_key, 1, timeout=window_seconds)
        return True
    return count <= limit


def limit_posts(scope: str, limit: int, window_seconds: int):
    """Refuse POSTs beyond ``limit`` per client IP and window with 429 and a plain explanation."""
    def decorator(view):
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method == "POST" and not allow(f"{scope}:{client_ip(request)}", limit, window_seconds):
                minutes = max(1, window_seconds // 60)
                return render(request, "annotation/rater_message.html", {
                    "title": "Too many attempts",
                    "message": f"Too many attempts from your network; please wait {minutes} minutes and try again.",
                }, status=429)
            return view(request, *args, **kwargs)
        return wrapped
    return decorator
