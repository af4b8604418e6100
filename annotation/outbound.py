"""Where the server may send a request a researcher configured (an LLM judge's endpoint): the one check, used when a
judge is saved and again before each run.

A base URL is refused when it
- is not plain http(s), or carries a user name, a query or a fragment (``?`` would take over the request's path);
- names a host that resolves to a loopback, private, link-local (169.254.169.254: cloud metadata), multicast,
  reserved or unspecified address -- in any spelling (``2130706433``, ``0x7f.1``, ``[::ffff:127.0.0.1]``), since the
  resolver's answer is what is checked -- unless the operator allows that host or network by name
  (``SEPLAB_JUDGE_PRIVATE_HOSTS``: host names, addresses or networks, comma-separated; a local vLLM on 127.0.0.1 is a
  real use). With DEBUG on the default allows loopback only.

The refusal says the same thing for every private target (nothing about what answers there), and the client never
follows redirects (``make_client``), so an allowed public host cannot bounce a request inward. A host whose DNS
answer changes between the check and the request (DNS rebinding) is checked again before each run, not per
request: the remaining window is the length of one run.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import cast
from urllib.parse import urlsplit

from django.conf import settings

REFUSED = (
    "This base URL points to a loopback, private or link-local address, which this server does not call. "
    "The server's operator can allow a local endpoint by name (SEPLAB_JUDGE_PRIVATE_HOSTS)."
)


class EndpointRefused(ValueError):
    """A base URL the server will not call, with the reason in words a researcher reads."""


def _allowed() -> tuple[set[str], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    names, networks = set(), []
    for entry in settings.SEPLAB_JUDGE_PRIVATE_HOSTS:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.add(entry.lower())
    return names, networks


def _internal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


def check_endpoint(url: str, must_resolve: bool = True) -> None:
    """Raise ``EndpointRefused`` unless the server may send requests to ``url`` (see the module's docstring).
    ``must_resolve`` False (saving a judge): a host that cannot be found now is let through, to be checked again,
    and refused if it still cannot be found or is private, before each run."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointRefused("The base URL must be an http:// or https:// address with a host name.")
    if parts.username is not None or parts.password is not None:
        raise EndpointRefused("The base URL must not carry a user name or password; store the key with the judge.")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise EndpointRefused("The base URL must not have a query (?) or a fragment (#).")
    host = parts.hostname.lower()
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise EndpointRefused("The base URL's port is not a number from 1 to 65535.") from None
    names, networks = _allowed()
    try:
        # An IPv4 or IPv6 address each (a str): typeshed's sockaddr also allows other families' int.
        found = {cast(str, info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (socket.gaierror, UnicodeError):
        if not must_resolve:
            return
        raise EndpointRefused(f"The host {host} of the base URL cannot be found.") from None
    for text in found:
        address = ipaddress.ip_address(text.split("%")[0])
        if _internal(address) and host not in names and not any(address in net for net in networks):
            raise EndpointRefused(REFUSED)
