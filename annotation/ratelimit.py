"""Who the client is, and a small fixed-window rate limiter on Django's cache (local memory by default, Redis
in production via REDIS_URL) for anonymous open-link sign-ups and new crowd workers. Login lockout is
django-axes (config/settings.py), keyed by the same ``client_ip``."""

from __future__ import annotations

from functools import cache as memoize
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext, ngettext
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


# An IPv6 client's wider networks, by prefix length, and how many clients' allowance each gets: a provider gives one
# home or one site a /56 or a /48 (RFC 6177), so addresses spread over its /64s are one site, not thousands of
# clients; a few times one client's allowance lets a campus or an office on one /48 still bring a lab session's people.
WIDER_NETWORKS = {56: 2, 48: 3}


def client_networks(address: str) -> list[tuple[str, int]]:
    """What one client counts against, narrowest first: (key, how many clients' allowance it gets) -- its own
    ``client_key``, and for an IPv6 client the /56 and the /48 around it."""
    own = client_key(address)
    wider = [(network, share) for prefix, share in WIDER_NETWORKS.items() if (network := supernet(own, prefix))]
    return [(own, 1), *wider]


def supernet(key: str, prefix: int) -> str | None:
    """The IPv6 network of ``prefix`` bits around a client (an address or a ``client_key`` such as its /64), e.g.
    the /48 a provider allocates to one site; None for an IPv4 client (its address is its whole network) or one
    without an address."""
    import ipaddress

    try:
        network = ipaddress.ip_network(key, strict=False)
    except ValueError:
        return None
    if not isinstance(network, ipaddress.IPv6Network) or network.prefixlen < prefix:
        return None
    return str(network.supernet(new_prefix=prefix))


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


def refuse_posts(request: HttpRequest, scope: str, limit: int, window_seconds: int, study=None) -> HttpResponse | None:
    """A 429 page with a plain explanation for a POST beyond ``limit`` per client and window -- and beyond its share
    of the IPv6 /56 and /48 around the client (``client_networks``) -- in the language the caller activated (a rater
    page's, ``access.speak_to_raters``); None when the request may go on. A network over its allowance counts no
    further."""
    if request.method != "POST" or all(
        allow(f"{scope}:{network}", limit * share, window_seconds)
        for network, share in client_networks(client_ip(request))
    ):
        return None
    minutes = max(1, window_seconds // 60)
    message = ngettext(
        "Too many attempts from your network; please wait %(minutes)d minute and try again.",
        "Too many attempts from your network; please wait %(minutes)d minutes and try again.",
        minutes,
    ) % {"minutes": minutes}
    return render(
        request,
        "annotation/rater_message.html",
        {"study": study, "title": gettext("Too many attempts"), "message": message},
        status=429,
    )


def login_client_ip(request: HttpRequest) -> str | None:
    """``client_ip`` for django-axes, which stores it in an address column: None for a request that has no
    address at all (Django's test client's force_login)."""
    import ipaddress

    try:
        return str(ipaddress.ip_address(client_ip(request)))
    except ValueError:
        return None


@checks.register(checks.Tags.caches, deploy=True)
def deploy_check_shared_cache(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``check --deploy``: the limits here and an arena stream's lease (``annotation/arena/streaming.py``) live in the
    cache, so several server processes (gunicorn's workers) need one cache they share; with each process's own, a
    page that reconnects to another process asks the endpoint for its reply again, and each process counts alone."""
    if "locmem" not in settings.CACHES["default"]["BACKEND"]:
        return []
    return [
        checks.Warning(
            "The cache is each server process's own (no REDIS_URL): an arena's reply streamed by one process is asked "
            "again when the rater's page reconnects to another, paid twice, and the open-link limits are per process.",
            hint="Set REDIS_URL for every server process (README, Production deployment), or run one process.",
            id="seplab.W010",
        )
    ]
