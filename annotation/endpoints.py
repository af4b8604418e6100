"""Talking to an OpenAI-compatible chat-completions endpoint (``models.Endpoint``): the one home for its key, its
client and the run loop under every endpoint run (``annotation/endpoint_runs.py``: LLM judges and generated systems).

The official ``openai`` client speaks to hosted APIs, vLLM, Ollama and the llama.cpp server alike, and brings the
retries with exponential backoff on 429, 5xx, timeouts and dropped connections, honouring Retry-After. A run asks
``max_concurrency`` requests at a time on worker threads (no database there) and records each reply on the calling
thread as it arrives; it stops, pauses for other jobs and cuts off a request that outlives its time limit, and what
was cut off is recorded as failed, to be asked again on resume.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Protocol, TypeVar

import openai
from django.conf import settings
from django.core.exceptions import ValidationError

from annotation.models import Endpoint, key_variables, unknown_key_variable
from annotation.outbound import EndpointRefused, check_endpoint
from annotation.secrets_at_rest import SealedUnreadable, UnreadableSecret
from annotation.text import UNSTORABLE

TICK = 15.0  # seconds; well inside the staleness limit (annotation.worker.stale_after, 120 s)
# Errors a retry cannot mend: the run stops at once and says why (every other call would fail the same way).
FATAL = (
    openai.AuthenticationError,
    openai.PermissionDeniedError,
    openai.NotFoundError,
    openai.BadRequestError,
    openai.UnprocessableEntityError,
)
MAX_TOKENS_COUNTED = 2**31 - 1  # the database's integer: an endpoint's count beyond it is not believed
REQUEST_LIMIT_CAP = 900.0  # no request, with all its retries, may hold a thread longer than 15 minutes


class EndpointError(Exception):
    """An endpoint that cannot be used as configured; the message is for the researcher."""


def api_key(endpoint: Endpoint) -> str:
    """The stored key, else the named environment variable of the worker; a local server that needs none is
    configured with neither (the client still sends a placeholder)."""
    if endpoint.api_key:
        if isinstance(endpoint.api_key, SealedUnreadable):
            raise EndpointError(
                str(
                    UnreadableSecret(
                        "The stored key cannot be read: the server's encryption key changed since it was stored. "
                        "Type the key again on the endpoint's page."
                    )
                )
            )
        return endpoint.api_key
    if endpoint.api_key_env:
        if endpoint.api_key_env not in key_variables():  # stored before the operator's list, or by a script
            raise EndpointError(unknown_key_variable())
        value = os.environ.get(endpoint.api_key_env, "")
        if not value:
            raise EndpointError(
                f"The environment variable {endpoint.api_key_env} (the endpoint's API key) is not set "
                "for the worker; set it, store a key with the endpoint, or clear both for a server "
                "that needs no key."
            )
        return value
    return "no-key"


def check_configuration(endpoint: Endpoint) -> None:
    """Every caller, not only the form: ranges, the URL, the key variable, prices as decimals; the words name each
    field."""
    try:
        endpoint.full_clean()
    except ValidationError as exc:
        raise EndpointError(
            "; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items())
        ) from exc


def redact(text: str, endpoint: Endpoint) -> str:
    """An error message with the endpoint's key taken out (endpoints sometimes echo it)."""
    try:
        key = api_key(endpoint)
    except EndpointError:
        return text
    return text.replace(key, "[key]") if len(key) >= 4 else text


def check_target(endpoint: Endpoint) -> None:
    """Refuse a run whose endpoint the server may not call (annotation/outbound.py), checked again before each run
    (a host's address can change after the endpoint was saved)."""
    try:
        check_endpoint(endpoint.base_url)
    except EndpointRefused as exc:
        raise EndpointError(str(exc)) from None


def make_client(endpoint: Endpoint) -> openai.OpenAI:
    """The official client, never following redirects: an allowed host must not bounce a request (and its key)
    somewhere else."""
    return openai.OpenAI(
        base_url=endpoint.base_url,
        api_key=api_key(endpoint),
        timeout=endpoint.timeout_seconds,
        max_retries=endpoint.max_retries,
        http_client=openai.DefaultHttpxClient(follow_redirects=False, timeout=endpoint.timeout_seconds),
    )


def token_count(value, name: str, notes: list[str]) -> int:
    """A token count the endpoint reported, believed only when it is a whole number from 0 to 2^31 - 1; otherwise
    0, with a note. (A negative count once failed the database's check and dropped a paid reply.)"""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS_COUNTED:
        return value
    if value is not None:
        notes.append(f"the endpoint reported {name} = {str(value)[:40]}, not a token count; counted as 0")
    return 0


def tokens_used(completion, notes: list[str]) -> tuple[int, int]:
    """The prompt and completion tokens a chat completion reports (``token_count``: 0, with a note, when not
    believed)."""
    used = completion.usage
    return (
        token_count(used.prompt_tokens if used else None, "prompt_tokens", notes),
        token_count(used.completion_tokens if used else None, "completion_tokens", notes),
    )


def storable(value):
    """An endpoint's response as it can be kept: every string with the characters no database stores (NUL, a lone
    surrogate: PostgreSQL refuses both in text and in JSON) replaced by U+FFFD. Endpoint replies are untrusted."""
    if isinstance(value, str):
        return UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable(item) for item in value]
    return value


MALFORMED = (AttributeError, TypeError, ValueError, KeyError, IndexError)  # a reply the client did not validate


def malformed(exc: Exception) -> str:
    """Why a reply's shape could not be read (the openai client builds responses without validating them: a
    ``usage`` that is a string, a ``message`` that is null)."""
    return storable(f"The endpoint's response is malformed ({type(exc).__name__}: {str(exc)[:300]}).")


def cost(endpoint: Endpoint, prompt_tokens: int, completion_tokens: int) -> Decimal:
    """US$ at the endpoint's prices per million tokens."""
    return (
        (Decimal(prompt_tokens) * endpoint.price_input + Decimal(completion_tokens) * endpoint.price_output) / 10**6
    ).quantize(Decimal("0.0001"))


def request_limit(endpoint: Endpoint) -> float:
    """The most time one request may take with all its attempts, however its endpoint trickles bytes: the
    timeout (which the client applies per read) times the attempts, at most ``REQUEST_LIMIT_CAP``."""
    return min(endpoint.timeout_seconds * (endpoint.max_retries + 1), REQUEST_LIMIT_CAP)


@dataclasses.dataclass
class RunResult:
    asked: int = 0
    recorded: int = 0
    stopped: bool = False
    budget_reached: bool = False
    sliced: bool = False  # the run used its time slice and gave the worker back; the rest continues in a new job
    abandoned: int = 0  # requests cut off at their time limit (recorded as failed: asked again later)


R = TypeVar("R")  # a request
A = TypeVar("A")  # what came back for it
R_contra = TypeVar("R_contra", contravariant=True)  # a request, as a conversation takes it (never gives one back)


class Conversation(Protocol[R_contra, A]):
    """What a run does with its endpoint's requests (``endpoint_runs.EndpointRun`` is one)."""

    def ask(self, client: openai.OpenAI, request: R_contra) -> A:
        """One request, on a worker thread: no database; the errors no retry mends (``FATAL``) raised."""

    def do_record(self, reply: A) -> object | None:
        """What came back, on the calling thread; None when another run got there first."""

    def failure(self, request: R_contra, why: str) -> A:
        """What a request cut off with these words came back as."""


def do_run(
    endpoint: Endpoint,
    source: Iterator[R],
    total: int,
    talk: Conversation[R, A],
    *,
    progress: Callable[[int, int], None] = lambda done, total: None,
    should_stop: Callable[[], bool] = lambda: False,
    slice_seconds: float | None = None,
    result: RunResult | None = None,
) -> RunResult:
    """Ask for each request of ``source`` (``total`` of them), ``max_concurrency`` at a time, recording each reply
    as it arrives. ``should_stop`` is checked after each reply and every ``TICK`` seconds; once it says so -- or the
    run has used its ``slice_seconds`` (default SEPLAB_JUDGE_SLICE_SECONDS), so that one endpoint never holds the
    worker while other researchers' jobs wait -- no new request is sent and the ones in flight are cut off at once
    (their connections closed: they are recorded as failed and asked again on resume). A request that takes longer
    than ``request_limit`` with all its attempts (an endpoint trickling one byte at a time defeats a per-read
    timeout) is cut off the same way."""
    result = result or RunResult()
    check_target(endpoint)
    api_key(endpoint)  # a missing key is said before anything is sent
    progress(0, total)
    limit = request_limit(endpoint)
    ends = time.monotonic() + (settings.SEPLAB_JUDGE_SLICE_SECONDS if slice_seconds is None else slice_seconds)
    pool = concurrent.futures.ThreadPoolExecutor(
        max_workers=endpoint.max_concurrency, thread_name_prefix=f"endpoint-{type(endpoint).__name__}-{endpoint.pk}"
    )
    # one client per request: cutting a request off closes its own connection (and frees its thread) without
    # touching the others
    in_flight: dict[concurrent.futures.Future, tuple[R, float, openai.OpenAI]] = {}

    def refill() -> None:
        while len(in_flight) < endpoint.max_concurrency and not (result.stopped or result.sliced):
            request = next(source, None)
            if request is None:
                return
            client = make_client(endpoint)
            in_flight[pool.submit(talk.ask, client, request)] = (request, time.monotonic() + limit, client)
            result.asked += 1

    def cut_off(future: concurrent.futures.Future, why: str) -> None:
        request, _, client = in_flight.pop(future)
        client.close()  # the request's connection closes: its thread gets an error and ends
        if talk.do_record(talk.failure(request, why)) is not None:
            result.recorded += 1
        result.abandoned += 1

    try:
        refill()
        while in_flight:
            # a tick at least every TICK seconds keeps the job's heartbeat fresh and hears a stop while slow
            # requests are out; sooner when a request's time limit or the slice ends first
            now = time.monotonic()
            wake = min([TICK, ends - now, *(deadline - now for _, deadline, _ in in_flight.values())])
            finished, _ = concurrent.futures.wait(
                list(in_flight), timeout=max(wake, 0.01), return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in finished:
                in_flight.pop(future)[2].close()
                if talk.do_record(future.result()) is not None:
                    result.recorded += 1
            now = time.monotonic()
            for future, (_, deadline, _) in list(in_flight.items()):
                if now >= deadline:
                    cut_off(
                        future,
                        f"The request took longer than {limit:.0f} s with all its attempts (the endpoint "
                        "kept the connection open); cut off, asked again on resume.",
                    )
            if not (result.stopped or result.sliced):
                if should_stop():
                    result.stopped = True
                elif now >= ends and (in_flight or result.asked < total):
                    result.sliced = True
            if (result.stopped or result.sliced) and in_flight:
                why = (
                    "Stopped while the request was out; asked again on resume."
                    if result.stopped
                    else "The run paused for other jobs while the request was out; asked again when it goes on."
                )
                for future in list(in_flight):
                    cut_off(future, why)
            progress(result.recorded, total)
            refill()
    finally:
        for _, _, client in in_flight.values():  # an error on the way out: nothing keeps a connection open
            client.close()
        pool.shutdown(wait=False, cancel_futures=True)
    return result
