"""Who the client is, and a small fixed-window rate limiter on Django's cache (local memory by default, Redis
in production via REDIS_URL) for anonymous open-link sign-ups and new crowd workers. Login lockout is
django-axes (config/settings.py), keyed by the same ``client_ip``."""

from __future__ import annotations

from functools import cache as memoize
from functools import wraps

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from python_ipware import IpWare


@memoize
def _forwarded() -> IpWare:
    # python-ipware counts the trusted proxies whose own addresses are in X-Forwarded-For: the last proxy is
    # REMOTE_ADDR, so a chain of SEPLAB_PROXY_COUNT proxies leaves SEPLAB_PROXY_COUNT - 1 of them in the header,
    # and the client is the entry just left of them (the right-most hop no trusted proxy vouches for).
    return IpWare(precedence=("HTTP_X_FORWARDED_FOR",), proxy_count=max(0, settings.SEPLAB_PROXY_COUNT - 1))


def client_ip(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR; behind the trusted proxy (BEHIND_PROXY=1), the address that proxy
    appended to X-Forwarded-For. Whatever a client writes into the header itself is never used."""
    remote = request.META.get("REMOTE_ADDR", "unknown")
    if not settings.BEHIND_PROXY:
        return remote
    ip, _ = _forwarded().get_client_ip(request.META)
    return str(ip) if ip is not None else remote


def client_key(address: str) -> str:
    """What one client is for a limit: its IPv4 address, or its IPv6 /64 (one household or one rented server
    has a whole /64, so counting addresses would give one client 2^64 tries)."""
    import ipaddress

    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


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
            if request.method == "POST" and not allow(f"{scope}:{client_key(client_ip(request))}", limit,
                                                      window_seconds):
                minutes = max(1, window_seconds // 60)
                return render(request, "annotation/rater_message.html", {
                    "title": "Too many attempts",
                    "message": f"Too many attempts from your network; please wait {minutes} minutes and try again.",
                }, status=429)
            return view(request, *args, **kwargs)
        return wrapped
    return decorator


def login_client_ip(request: HttpRequest) -> str | None:
    """``client_ip`` for django-axes, which stores it in an address column: None for a request that has no
    address at all (Django's test client's force_login)."""
    import ipaddress

    try:
        return str(ipaddress.ip_address(client_ip(request)))
    except ValueError:
        return None
