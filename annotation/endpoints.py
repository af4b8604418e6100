"""Talking to an OpenAI-compatible chat-completions endpoint (``models.Endpoint``): the one home for its key, its
client and the run loop under every endpoint run (``annotation/endpoint_runs.py``: LLM judges and generated systems).

The official ``openai`` client speaks to hosted APIs, vLLM, Ollama and the llama.cpp server alike, and brings the
retries with exponential backoff on 429, 5xx, timeouts and dropped connections, honouring Retry-After. A run asks
``max_concurrency`` requests at a time on worker threads (no database there) and records each reply on the calling
thread as it arrives; it stops (within ``STOP_TICK`` of Stop being pressed, however long the requests out), pauses
for other jobs and cuts off a request that outlives its time limit, and what was cut off is recorded as failed, to be
asked again on resume. Every request goes through ``outbound.EndpointTransport`` (addresses checked and pinned, the
operator's key only to its hosts, replies read up to a limit); a reply that cannot be read (too long, not JSON, nested
too deep, empty) is one failed call, never a failed run; every string kept from a reply or an error has the keys
taken out before it is cut short, and a piece of a key the cut split is taken out too (``cut``); log-probabilities
whose tokens spell a key are not kept.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Protocol, TypeVar

import openai
from django.conf import settings
from django.core.exceptions import ValidationError

from annotation import outbound
from annotation.models import Endpoint, key_variables, unknown_key_variable
from annotation.outbound import EndpointRefused, check_endpoint, check_key_host
from annotation.secrets_at_rest import SealedUnreadable, UnreadableSecret
from annotation.text import UNSTORABLE

T = TypeVar("T")  # a field's type, as a reply should have it
TICK = 15.0  # seconds between progress reports (the job's heartbeat), well inside annotation.worker.stale_after
STOP_TICK = 0.5  # seconds between looks at the Stop button while requests are out
ERROR_CHARS = 2000  # an endpoint's error is kept (and shown) up to this many characters
KEY_PIECE = 4  # a piece of a key this long or longer, left at the end of a cut, is taken out too
CLOSE_WAIT = 2.0  # seconds a run waits, on its way out, for the threads of requests it cut off to end
# Errors a retry cannot mend: the run stops at once and says why (every other call would fail the same way).
FATAL = (
    openai.AuthenticationError,
    openai.PermissionDeniedError,
    openai.NotFoundError,
    openai.BadRequestError,
    openai.UnprocessableEntityError,
)
MAX_TOKENS_COUNTED = 2**31 - 1  # the database's integer: an endpoint's count beyond it is not believed
# What a reply that came back could not be read as (the client parses the body before it is ours): not JSON, nested
# deeper than the parser goes, an empty body; each becomes one failed call.
UNREADABLE = (ValueError, TypeError, RecursionError)


class EndpointError(Exception):
    """An endpoint that cannot be used as configured; the message is for the researcher."""


def api_key(endpoint: Endpoint) -> str:
    """The stored key, else the named environment variable of the worker; a local server that needs none is
    configured with neither (the client still sends a placeholder). A stored key only for the base URL it was
    entered for; the operator's variable only for the hosts it names (``outbound.check_key_host``)."""
    if endpoint.api_key:
        if endpoint.api_key_url != endpoint.base_url:
            raise EndpointError(key_url_changed(endpoint))
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
        try:
            check_key_host(endpoint.api_key_env, endpoint.base_url)
        except EndpointRefused as exc:
            raise EndpointError(str(exc)) from None
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


def key_url_changed(endpoint: Endpoint) -> str:
    return (
        f"The stored key was entered for {endpoint.api_key_url or 'another base URL'}, not {endpoint.base_url}; a "
        "stored key is sent only to the URL it was entered for. Type the key again on the endpoint's page."
    )


def secrets(endpoint: Endpoint) -> list[str]:
    """Every key this server could send anywhere: the endpoint's stored key and the values of the operator's key
    variables, longest first (one may hold another)."""
    found = [] if isinstance(endpoint.api_key, SealedUnreadable) else [endpoint.api_key or ""]
    found += [os.environ.get(name, "") for name in key_variables()]
    return sorted({key for key in found if len(key) >= 4}, key=len, reverse=True)


def redact(value, keys: Sequence[str]):
    """Text -- or a reply's JSON, every string and key in it -- with every key of ``keys`` (``secrets``) taken out
    (endpoints echo them: in errors, in replies that repeat the request's headers)."""
    if isinstance(value, str):
        for key in keys:
            value = value.replace(key, "[key]")
        return value
    if isinstance(value, dict):
        return {redact(k, keys): redact(item, keys) for k, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(item, keys) for item in value)
    return value


def cut(text: str, limit: int, keys: Sequence[str]) -> str:
    """``text`` with the keys taken out, then cut to its first ``limit`` characters; a cut that splits a key would
    keep its first part, so a piece of ``KEY_PIECE`` or more characters at the end that begins a key is taken out
    too. Every cut of an endpoint's words goes through here, never a bare ``[:limit]``."""
    text = redact(text, keys)
    if len(text) <= limit:
        return text
    text = text[:limit]
    piece = max(
        (n for key in keys for n in range(KEY_PIECE, len(key)) if text.endswith(key[:n])),
        default=0,
    )
    return f"{text[:-piece]}[key]" if piece else text


def spells_a_key(pieces: Sequence[str], keys: Sequence[str]) -> bool:
    """Whether strings kept apart (a reply's tokens) spell a key when read one after another."""
    joined = "".join(pieces)
    return any(key in joined for key in keys)


def described(exc: BaseException, keys: Sequence[str]) -> str:
    """An error as the ledger keeps it: its kind and words, the keys taken out, at most ``ERROR_CHARS`` characters
    (an endpoint's error message can be megabytes long)."""
    return shortened(f"{type(exc).__name__}: {exc}", keys)


def shortened(text: str, keys: Sequence[str], limit: int = ERROR_CHARS) -> str:
    """``text`` as ``cut`` keeps it, saying how much more there was."""
    text = redact(text, keys)
    return text if len(text) <= limit else f"{cut(text, limit, keys)} … ({len(text) - limit:,} more characters)"


def check_target(endpoint: Endpoint) -> None:
    """Refuse a run whose endpoint the server may not call (annotation/outbound.py), checked again before each run
    (a host's address can change after the endpoint was saved)."""
    try:
        check_endpoint(endpoint.base_url)
    except EndpointRefused as exc:
        raise EndpointError(str(exc)) from None


def make_client(endpoint: Endpoint) -> openai.OpenAI:
    """The official client, never following redirects (an allowed host must not bounce a request, and its key,
    somewhere else), through ``outbound.EndpointTransport``: pinned, checked addresses, the operator's key only to its
    hosts, replies read up to ``SEPLAB_ENDPOINT_REPLY_BYTES``; no proxy from the environment."""
    key = api_key(endpoint)
    transport = outbound.EndpointTransport(key_variable="" if endpoint.api_key else endpoint.api_key_env)
    return openai.OpenAI(
        base_url=endpoint.base_url,
        api_key=key,
        timeout=endpoint.timeout_seconds,
        max_retries=endpoint.max_retries,
        http_client=openai.DefaultHttpxClient(
            follow_redirects=False, timeout=endpoint.timeout_seconds, transport=transport, trust_env=False
        ),
    )


def token_count(value, name: str, notes: list[str], keys: Sequence[str]) -> int:
    """A token count the endpoint reported, believed only when it is a whole number from 0 to 2^31 - 1; otherwise
    0, with a note. (A negative count once failed the database's check and dropped a paid reply.)"""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS_COUNTED:
        return value
    if value is not None:
        notes.append(f"the endpoint reported {name} = {cut(str(value), 40, keys)}, not a token count; counted as 0")
    return 0


def tokens_used(completion, notes: list[str], keys: Sequence[str]) -> tuple[int, int]:
    """The prompt and completion tokens a chat completion reports (``token_count``: 0, with a note, when not
    believed)."""
    used = completion.usage
    return (
        token_count(used.prompt_tokens if used else None, "prompt_tokens", notes, keys),
        token_count(used.completion_tokens if used else None, "completion_tokens", notes, keys),
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


def _short(value: object, keys: Sequence[str], limit: int = 200) -> object:
    """A scalar of a reply as kept: a string cut to ``limit`` (``cut``), a number, else nothing."""
    if isinstance(value, str):
        return cut(value, limit, keys)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _field(data: object, name: str, kind: type[T]) -> T | None:
    """``data[name]`` when ``data`` is a dict and the value is a ``kind``: an unvalidated reply has any shape."""
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, kind) else None


def _logprobs(value: object, keys: Sequence[str]) -> dict | None:
    """Each token's log-probability and its top alternatives (what P(A) is read from), nothing else; nothing when
    the tokens spell a key (each alone holds none of it: taking keys out token by token would miss it)."""
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, list):
        return None
    tokens = [token for token in content if isinstance(token, dict)]
    if spells_a_key([t["token"] for t in tokens if isinstance(t.get("token"), str)], keys):
        return None
    kept = []
    for token in tokens:
        alternatives = [
            {"token": _short(a.get("token"), keys), "logprob": _short(a.get("logprob"), keys)}
            for a in token.get("top_logprobs") or []
            if isinstance(a, dict)
        ]
        kept.append(
            {
                "token": _short(token.get("token"), keys),
                "logprob": _short(token.get("logprob"), keys),
                "top_logprobs": alternatives,
            }
        )
    return {"content": kept}


def kept_response(completion, content: str | None, keys: Sequence[str], logprobs: bool = True) -> dict:
    """What a run keeps of a chat completion: its id, model, fingerprint, the first choice's finish reason, role,
    refusal, log-probabilities (``logprobs``) and ``content`` (the reply's text as the run stores it, or None when it
    is stored elsewhere), and the usage's token counts -- never an endpoint's further fields (a reply may carry
    megabytes of them). Every string cut with ``keys`` taken out first (``cut``) and made storable."""
    data = completion.model_dump(mode="json", warnings=False)
    choices = []
    for choice in (_field(data, "choices", list) or [])[:1]:
        if not isinstance(choice, dict):
            continue
        message = _field(choice, "message", dict) or {}
        choices.append(
            {
                "index": _short(choice.get("index"), keys),
                "finish_reason": _short(choice.get("finish_reason"), keys),
                "message": {
                    "role": _short(message.get("role"), keys),
                    "content": content,
                    "refusal": _short(message.get("refusal"), keys, 300),
                },
                "logprobs": _logprobs(choice.get("logprobs"), keys) if logprobs else None,
            }
        )
    usage = _field(data, "usage", dict) or {}
    data = data if isinstance(data, dict) else {}
    return storable(
        {
            "id": _short(data.get("id"), keys),
            "model": _short(data.get("model"), keys),
            "created": _short(data.get("created"), keys),
            "system_fingerprint": _short(data.get("system_fingerprint"), keys),
            "choices": choices,
            "usage": {
                k: _short(usage.get(k), keys, 40)
                for k in ("prompt_tokens", "completion_tokens", "total_tokens")
                if k in usage
            },
        }
    )


MALFORMED = (AttributeError, TypeError, ValueError, KeyError, IndexError)  # a reply the client did not validate


def malformed(exc: Exception, keys: Sequence[str]) -> str:
    """Why a reply's shape could not be read (the openai client builds responses without validating them: a
    ``usage`` that is a string, a ``message`` that is null)."""
    return storable(f"The endpoint's response is malformed ({type(exc).__name__}: {cut(str(exc), 300, keys)}).")


def cost(endpoint: Endpoint, prompt_tokens: int, completion_tokens: int) -> Decimal:
    """US$ at the endpoint's prices per million tokens."""
    return (
        (Decimal(prompt_tokens) * endpoint.price_input + Decimal(completion_tokens) * endpoint.price_output) / 10**6
    ).quantize(Decimal("0.0001"))


def request_limit(endpoint: Endpoint) -> float:
    """The most time one request may take with all its attempts, however its endpoint trickles bytes: the
    timeout (which the client applies per read) times the attempts, at most ``SEPLAB_ENDPOINT_REQUEST_SECONDS``
    (which the endpoint's form holds it to: ``models.Endpoint.clean``)."""
    return min(endpoint.timeout_seconds * (endpoint.max_retries + 1), settings.SEPLAB_ENDPOINT_REQUEST_SECONDS)


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
    as it arrives. ``should_stop`` is checked after each reply and every ``STOP_TICK`` seconds; once it says so -- or
    the run has used its ``slice_seconds`` (default SEPLAB_JUDGE_SLICE_SECONDS), so that one endpoint never holds the
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
    submitted: list[concurrent.futures.Future] = []
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
            future = pool.submit(talk.ask, client, request)
            submitted.append(future)
            in_flight[future] = (request, time.monotonic() + limit, client)
            result.asked += 1

    def cut_off(future: concurrent.futures.Future, why: str) -> None:
        request, _, client = in_flight.pop(future)
        client.close()  # the request's connection closes: its thread gets an error and ends
        if talk.do_record(talk.failure(request, why)) is not None:
            result.recorded += 1
        result.abandoned += 1

    reported = time.monotonic()
    try:
        refill()
        while in_flight:
            # a look at Stop every STOP_TICK seconds while slow requests are out; sooner when a request's time limit
            # or the slice ends first
            now = time.monotonic()
            wake = min([STOP_TICK, ends - now, *(deadline - now for _, deadline, _ in in_flight.values())])
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
            if finished or now - reported >= TICK or not in_flight:  # the job's heartbeat, at least every TICK
                progress(result.recorded, total)
                reported = now
            refill()
    finally:
        for _, _, client in in_flight.values():  # an error on the way out: nothing keeps a connection open
            client.close()
        pool.shutdown(wait=False, cancel_futures=True)
        # the threads of requests cut off wake at once (their connections closed, a wait for a reading slot given
        # up: outbound.CutOff) and end; a brief wait for them, so that none outlives its run for long
        if not concurrent.futures.wait(submitted, timeout=CLOSE_WAIT).not_done:
            pool.shutdown(wait=True)  # every request is over: its threads end now, joined
    return result
