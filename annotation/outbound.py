"""Where the server may send a request a researcher configured (an LLM judge's or a generated system's endpoint):
the one check, used when an endpoint is saved, before each run and on every connection; the operator's key
variables and the hosts each is for; and the transport every request goes through.

A base URL is refused when it
- is not plain http(s), or carries a user name, a query or a fragment (``?`` would take over the request's path);
- names a host that resolves to an address that is not globally routable (``ipaddress``'s ``is_global``: loopback,
  private, link-local 169.254.169.254, shared 100.64.0.0/10 with the 100.100.100.200 metadata service, reserved,
  documentation ...; and IPv6 site-local ``fec0::/10``, deprecated but still routed inside sites, which ``is_global``
  lets through), to an IPv6 address carrying such an IPv4 address inside (IPv4-mapped ``::ffff:127.0.0.1``, 6to4
  ``2002:7f00:1::``, Teredo, NAT64 ``64:ff9b::7f00:1``), or to a cloud's host address that is global but answers only
  inside the cloud (``CLOUD_HOST_ADDRESSES``) -- in any spelling (``2130706433``, ``0x7f.1``), since the resolver's
  answer is what is checked -- unless the operator allows that host or network by name (``SEPLAB_JUDGE_PRIVATE_HOSTS``:
  host names, addresses or networks, comma-separated; a local vLLM on 127.0.0.1 is a real use). With DEBUG on the
  default allows loopback only.

The refusal says the same thing for every private target (nothing about what answers there). Requests go through
``EndpointTransport``: its connections resolve the host, check every address and connect to the address checked
(``PinnedBackend``), so a host whose DNS answer changes between the check and the connection (DNS rebinding) cannot
turn a request inward; TLS still verifies the host name and the Host header is the URL's. The transport also refuses
to send the operator's key variable to a host it is not for (``SEPLAB_JUDGE_KEY_VARIABLES``: ``NAME=HOST|HOST``),
asks for an uncompressed reply and reads at most ``SEPLAB_ENDPOINT_REPLY_BYTES`` of it (``ReplyTooLarge``). The
client never follows redirects (``endpoints.make_client``), and ignores the environment's proxies (a proxy would
connect to an address this module never saw).
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import re
import socket
import ssl
import threading
from collections.abc import Iterable, Iterator
from typing import Any, cast
from urllib.parse import urlsplit

import httpcore2
import httpx2
from django.conf import settings
from django.core import checks

REFUSED = (
    "This base URL points to a loopback, private, link-local or otherwise internal address, which this server does "
    "not call. The server's operator can allow a local endpoint by name (SEPLAB_JUDGE_PRIVATE_HOSTS)."
)
# Global addresses that answer only from inside a cloud, with the host's own credentials: Azure's wire server and
# instance metadata (168.63.129.16). Link-local 169.254.169.254 and shared 100.100.100.200 are not global already.
CLOUD_HOST_ADDRESSES = frozenset({ipaddress.ip_address("168.63.129.16")})
NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d
HOST_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# A reply past LARGE_REPLY_BYTES is read and parsed holding one of LARGE_REPLIES_AT_ONCE slots of the process: parsing
# JSON can take 25 times its bytes (4 MiB of "{}," is 100 MB of dicts), so 64 requests at once must not each do it.
LARGE_REPLY_BYTES = 256 * 1024
LARGE_REPLIES_AT_ONCE = 4
SLOT_TICK = 0.1  # seconds between looks, while waiting for a slot, at whether the request was cut off
_large_replies = threading.BoundedSemaphore(LARGE_REPLIES_AT_ONCE)
_reading = threading.local()  # this thread's: inside ``reading_replies``, holding a slot


class EndpointRefused(ValueError):
    """A base URL (or a key's destination) the server will not call, with the reason in words a researcher reads."""


class CutOff(Exception):
    """The request was cut off (stopped, out of time, its run paused) while it waited for a slot to read its reply."""


class ReplyTooLarge(Exception):
    """An endpoint's reply is longer than this server reads (``SEPLAB_ENDPOINT_REPLY_BYTES``); nothing of it is kept.
    Not an HTTP error, so the client does not ask again for another reply as large."""


# ----------------------------------------------------------------------------------------------------------
# Addresses


def resolve(host: str, port: int) -> list[str]:
    """The addresses of ``host`` (the system's resolver); a literal address is itself. Tests replace this to play a
    DNS server whose answers change."""
    # An IPv4 or IPv6 address each (a str): typeshed's sockaddr also allows other families' int.
    return list(
        dict.fromkeys(cast(str, info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
    )


def _allowed() -> tuple[set[str], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    names, networks = set(), []
    for entry in settings.SEPLAB_JUDGE_PRIVATE_HOSTS:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.add(entry.lower())
    return names, networks


def _embedded(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries to be reached through (mapped, 6to4, Teredo, NAT64, compatible)."""
    found = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
    if address in NAT64 or (address in IPV4_COMPATIBLE and int(address) > 0xFFFF):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [a for a in found if a is not None]


def is_routable(address: Address) -> bool:
    """A globally routable address the server may call without the operator's say: ``is_global``, not multicast,
    not IPv6 site-local, nothing internal inside it, no cloud's host address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_site_local:  # fec0::/10: deprecated, yet is_global and routed inside a site
            return False
        inner = _embedded(address)
        if any(not is_routable(a) for a in inner):
            return False
        if address.ipv4_mapped is not None or address in NAT64:
            return True  # the IPv4 address it stands for was checked (NAT64: a DNS64 network's public hosts)
    return (
        address.is_global
        and not (address.is_multicast or address.is_reserved or address.is_unspecified)
        and address not in CLOUD_HOST_ADDRESSES
    )


def checked_addresses(host: str, port: int, must_resolve: bool = True) -> list[str]:
    """The addresses of ``host`` the server may connect to, in the resolver's order: all of them, or
    ``EndpointRefused`` when one is internal and not allowed by the operator (the same words for every such target)
    or the host cannot be found (with ``must_resolve`` False: an empty list)."""
    host = host.lower().strip("[]")
    names, networks = _allowed()
    try:
        found = resolve(host, port)
    except (OSError, UnicodeError):
        if not must_resolve:
            return []
        raise EndpointRefused(f"The host {host} of the base URL cannot be found.") from None
    if not found:
        raise EndpointRefused(f"The host {host} of the base URL cannot be found.")
    for text in found:
        address = ipaddress.ip_address(text.split("%")[0])
        if not is_routable(address) and host not in names and not any(address in net for net in networks):
            raise EndpointRefused(REFUSED)
    return found


def check_endpoint(url: str, must_resolve: bool = True) -> None:
    """Raise ``EndpointRefused`` unless the server may send requests to ``url`` (see the module's docstring).
    ``must_resolve`` False (saving an endpoint): a host that cannot be found now is let through, to be checked again,
    and refused if it still cannot be found or is internal, before each run and on each connection."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointRefused("The base URL must be an http:// or https:// address with a host name.")
    if parts.username is not None or parts.password is not None:
        raise EndpointRefused("The base URL must not carry a user name or password; store the key with the judge.")
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise EndpointRefused("The base URL must not have a query (?) or a fragment (#).")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise EndpointRefused("The base URL's port is not a number from 1 to 65535.") from None
    checked_addresses(parts.hostname, port, must_resolve)


# ----------------------------------------------------------------------------------------------------------
# The operator's key variables


def key_hosts() -> dict[str, tuple[str, ...]]:
    """Each environment variable the operator lets endpoints read their key from, with the hosts it may be sent to
    (``SEPLAB_JUDGE_KEY_VARIABLES``: ``NAME=HOST[|HOST...]``)."""
    return {name: tuple(h.lower() for h in hosts) for name, hosts in settings.SEPLAB_JUDGE_KEY_VARIABLES.items()}


def host_of(url: str) -> str:
    """The host name of a base URL, lower case, without a port ("" when there is none)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def check_key_host(variable: str, url: str) -> None:
    """Raise ``EndpointRefused`` unless the operator's ``variable`` may be sent to the host of ``url``."""
    hosts = key_hosts().get(variable, ())
    host = host_of(url)
    if host not in hosts:
        where = ", ".join(hosts) if hosts else "no host (the operator named none)"
        raise EndpointRefused(
            f"The key in {variable} is for {where} only, not for {host or 'this URL'}: choose a base URL on "
            "its host, another variable, or store a key of your own."
        )


@checks.register(checks.Tags.security, deploy=True)
def deploy_check_key_variables(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``check --deploy``: every key variable the operator allows names the hosts it is for, as host names."""
    problems: list[checks.CheckMessage] = []
    hint = 'Write NAME=HOST[|HOST...], host names without ports: "OPENAI_API_KEY=api.openai.com,OTHER=h1|h2".'
    for name, hosts in settings.SEPLAB_JUDGE_KEY_VARIABLES.items():
        if not hosts:
            problems.append(
                checks.Error(
                    f"SEPLAB_JUDGE_KEY_VARIABLES names {name} without the hosts its key is for, so any endpoint a "
                    "researcher chooses could be sent the key.",
                    hint=hint,
                    id="seplab.E001",
                )
            )
        for host in hosts:
            try:
                ipaddress.ip_address(host)
            except ValueError:
                if not HOST_NAME.match(host.lower()):
                    problems.append(
                        checks.Error(
                            f"SEPLAB_JUDGE_KEY_VARIABLES: {name}'s host {host!r} is not a host name (no scheme, port "
                            "or path).",
                            hint=hint,
                            id="seplab.E002",
                        )
                    )
    return problems


# ----------------------------------------------------------------------------------------------------------
# The transport


class PinnedBackend(httpcore2.SyncBackend):
    """Connects to an address ``checked_addresses`` let through, resolved once for this connection: what was checked
    is what is called. The URL's host name still goes to TLS (its certificate is verified for it) and the Host
    header."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        failed: Exception | None = None
        for address in checked_addresses(host, port):
            try:
                stream = super().connect_tcp(address, port, timeout, local_address, socket_options)
                return _Stream(stream, stream.get_extra_info("socket"))
            except httpcore2.ConnectError as exc:  # the next address, as the resolver's order says
                failed = exc
        raise failed or httpcore2.ConnectError(f"no address of {host} answered")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying TLS context for every request (building one reads the CA bundle; sharing one is safe)."""
    return httpx2.create_ssl_context()


class _Stream(httpcore2.NetworkStream):
    """A connection whose close also shuts the socket down, so that a thread blocked reading a request that was cut
    off (stopped, out of time) wakes at once instead of at its timeout."""

    def __init__(self, stream: httpcore2.NetworkStream, sock: socket.socket) -> None:
        self.stream, self.sock = stream, sock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.stream.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.stream.write(buffer, timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        return _Stream(self.stream.start_tls(ssl_context, server_hostname, timeout), self.sock)

    def get_extra_info(self, info: str) -> Any:
        return self.stream.get_extra_info(info)


@contextlib.contextmanager
def reading_replies() -> Iterator[None]:
    """Around asking for a reply and parsing it on this thread: a reply that grows past ``LARGE_REPLY_BYTES`` waits
    for one of the ``LARGE_REPLIES_AT_ONCE`` slots, held until the block ends (its parsing done)."""
    _reading.inside = True
    try:
        yield
    finally:
        _reading.inside = False
        if getattr(_reading, "slot", False):
            _reading.slot = False
            _large_replies.release()


class _Capped(httpx2.SyncByteStream):
    """A reply's body, read until it passes ``limit`` bytes; past ``LARGE_REPLY_BYTES`` only in one of the few slots
    (``reading_replies``), waited for only while the request is not cut off (``closed``: its transport closed)."""

    def __init__(self, stream: httpx2.SyncByteStream, limit: int, closed: threading.Event) -> None:
        self.stream, self.limit, self.closed = stream, limit, closed

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        for chunk in self.stream:
            read += len(chunk)
            if read > self.limit:
                raise ReplyTooLarge(too_large(self.limit))
            large = read > LARGE_REPLY_BYTES and getattr(_reading, "inside", False)
            if large and not getattr(_reading, "slot", False):
                while not _large_replies.acquire(timeout=SLOT_TICK):
                    if self.closed.is_set():
                        raise CutOff("The request was cut off while its reply waited to be read.")
                _reading.slot = True
            yield chunk

    def close(self) -> None:
        self.stream.close()


def too_large(limit: int) -> str:
    return f"The endpoint's reply is longer than {limit:,} bytes, more than this server reads; nothing of it is kept."


class EndpointTransport(httpx2.HTTPTransport):
    """The one way a request reaches an endpoint: connections pinned to checked addresses (``PinnedBackend``); the
    operator's key sent only to its hosts (``key_variable``: the variable whose value is the request's key); an
    uncompressed reply read up to ``reply_bytes``."""

    def __init__(self, *, key_variable: str = "", reply_bytes: int | None = None) -> None:
        # HTTPTransport's own __init__ only builds a pool: this one is built instead, on the pinned backend
        self._pool = httpcore2.ConnectionPool(
            ssl_context=_ssl_context(), network_backend=PinnedBackend(), max_connections=1
        )
        self.key_variable = key_variable
        self.reply_bytes = settings.SEPLAB_ENDPOINT_REPLY_BYTES if reply_bytes is None else reply_bytes
        self.closed = threading.Event()  # set when the client closes: the request was cut off, or is over

    def close(self) -> None:
        self.closed.set()  # first: a reply waiting for a slot gives up (closing the connection does not wake it)
        super().close()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.key_variable:  # before each request, whatever URL it was built with
            check_key_host(self.key_variable, str(request.url))
        request.headers["Accept-Encoding"] = "identity"  # the bytes counted are the bytes read
        response = super().handle_request(request)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        length = response.headers.get("Content-Length", "")
        if encoding not in ("", "identity") or (length.isdigit() and int(length) > self.reply_bytes):
            response.close()
            if encoding not in ("", "identity"):
                raise ReplyTooLarge(
                    f"The endpoint sent a compressed reply ({encoding[:40]}) though none was asked for; "
                    "this server reads replies uncompressed only."
                )
            raise ReplyTooLarge(too_large(self.reply_bytes))
        assert isinstance(response.stream, httpx2.SyncByteStream)
        response.stream = _Capped(response.stream, self.reply_bytes, self.closed)
        return response
