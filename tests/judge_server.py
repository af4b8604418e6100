"""A local OpenAI-compatible chat-completions server for the judge tests (and for trying a judge by hand:
``python -m tests.judge_server --port 8765``, then a judge with base URL http://127.0.0.1:8765/v1).

Every request is validated against the ``openai`` client's own request types
(``CompletionCreateParamsNonStreaming`` and ``ChatCompletionMessageParam``, with pydantic, unknown fields
refused); an invalid one is answered 400 and kept in ``server.invalid`` for the test to assert on. Replies are
built from the client's response types (``ChatCompletion``) and are deterministic:

- the judge prefers the longer output, with a pull towards the first-shown one:
  P(first) = sigmoid((len(first) − len(second)) / 20 + 0.4) (``p_first``); the verdict is A when P(first) > 0.5;
- the reply follows the answer format the prompt asks for (forced choice, response set, paired, 5-point);
- markers in an item's input trigger faults: ``[[rate-limit]]`` (two 429s, then an answer), ``[[server-error]]``
  (one 500), ``[[always-429]]``, ``[[slow]]`` (the first reply after ``slow_seconds``), ``[[malformed]]`` (a reply
  without a verdict line), ``[[cut]]`` (a reply cut off at the token limit, ``finish_reason: length``, that happens
  to end in a quoted verdict line), ``[[two-verdicts]]`` (two verdict lines), ``[[line-separator]]`` (the verdict
  after a U+2028 instead of a new line), ``[[huge]]`` (a 2 MB reply ending in a verdict), ``[[bad-usage]]``
  (``completion_tokens: -5``), ``[[huge-usage]]`` (2^40 + 5 prompt tokens), ``[[nul]]`` (a NUL in the reply),
  ``[[nul-error]]`` (always a 500 whose message holds a NUL), ``[[malformed-shape]]`` (a 200 that is no chat
  completion), ``[[trickle]]`` (200 at once, then the body a byte every ``trickle_seconds``: a per-read timeout
  never fires), ``[[hang]]`` (never answers, until the client hangs up or the server closes), ``[[invalid-json]]``,
  ``[[empty-body]]`` and ``[[deep-json]]`` (a 200 whose body is not JSON, empty, or JSON nested ``deep`` levels),
  ``[[many-objects]]`` (a 200 of ``many_bytes`` bytes of ``{},`` in a field of a completion without choices),
  ``[[giant]]`` (a 200 of ``giant_bytes`` bytes, its length announced or, with ``[[giant-chunked]]``, not),
  ``[[huge-error]]`` (a 400 whose message is ``huge_error_chars`` long), ``[[extra-fields]]`` (a verdict with
  ``extra_bytes`` of extra JSON beside it), ``[[echo-headers]]`` (a verdict that first repeats the request's headers,
  the key among them), ``[[echo-key:STATUS:N]]`` (``N`` characters of ``x``, then the request's ``Authorization``
  header, the key in it: as the reply's text with STATUS 200, else as the message of an error of that status; for a
  ``gen-`` model with ``[[nul]]`` too, a NUL after it);
- with ``logprobs`` requested, each token carries its log-probability and the label token its alternatives
  A / B / Tie with P(A) = P(first).

A model whose name starts with ``gen-`` is a system to generate outputs from (``annotation/generating``) rather than a
judge: it answers the last message with ``generated_text`` -- deterministic given the model, the input and the
request's ``seed`` (without one, each request differs), terse or verbose as the model's name says
(``gen-terse-…`` about 8 words, ``gen-verbose-…`` about 40) -- under the same fault markers, plus ``[[empty]]`` (an
empty reply), ``[[nul]]`` (a NUL character in the reply), ``[[filtered]]`` (``finish_reason: content_filter``) and
``[[long]]`` (cut off at ``max_tokens``: ``finish_reason: length``).

Streaming (``stream: true``, an arena's replies): the request is validated with the client's
``CompletionCreateParamsStreaming`` instead, and the reply -- the ``gen-`` text above, for any model, but without the
model's name ("On 'prompt': ..."; an arena refuses a vote on a reply that names its own model) unless the prompt holds
``[[say-name]]`` -- is sent as server-sent events, each chunk built from ``ChatCompletionChunk``: the role first, then
one word a chunk (with the spaces before it) at ``stream_rate`` words a second after ``first_token_seconds``, the
finish reason, the usage when ``stream_options.include_usage`` asks, and ``data: [DONE]``. The send time of each
reply's first word is kept in ``server.first_sent`` (``GET /v1/stream-log`` returns them) for the arena bench. Fault
markers: ``[[stream-error]]`` (three words, then an error event: the client raises ``APIError``), ``[[stream-stall]]``
(three words, then nothing until the client hangs up), ``[[stream-trickle]]`` (a word every ``trickle_seconds``,
without end), ``[[stream-key]]`` (the request's ``Authorization`` header spelled out a few characters a chunk).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import random
import re
import threading
import time
import typing
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)
from pydantic import TypeAdapter, ValidationError

ECHO_KEY = re.compile(r"\[\[echo-key:(\d+):(\d+)\]\]")

PARAMS = TypeAdapter(CompletionCreateParamsNonStreaming)
STREAM_PARAMS = TypeAdapter(CompletionCreateParamsStreaming)
MESSAGE = TypeAdapter(ChatCompletionMessageParam)
KNOWN = set(typing.get_type_hints(CompletionCreateParamsNonStreaming))
# Output B runs to the default template's closing instruction (or the end of the prompt): real outputs have blank
# lines of their own, and stopping at the first one compared A with B's first paragraph (a newcomer found
# the judge then "preferred" the output shown first almost every time on AlpacaEval answers)
OUTPUTS = re.compile(
    r"\[Output A\]\n(?P<first>.*?)\n\n\[Output B\]\n(?P<second>.*?)"
    r"(?:\n\nJudge the two outputs|\n*\Z)",
    re.S,
)


def p_first(first: str, second: str) -> float:
    return 1 / (1 + math.exp(-((len(first) - len(second)) / 20 + 0.4)))


VOCABULARY = tuple(
    "the answer is because clearly we note that first then result "
    "model input consider example shows so and which means each step follows".split()
)


def generated_text(model: str, prompt: str, seed: int | None, attempt: int) -> str:
    """What a ``gen-`` model answers: words drawn from the model, the input and the seed (or the request's attempt
    number, when no seed is sent), about 8 of them for a terse model, 40 for a verbose one, 20 otherwise."""
    rng = random.Random(f"{model}|{prompt}|{seed if seed is not None else f'attempt {attempt}'}")
    length = 8 if "terse" in model else 40 if "verbose" in model else 20
    words = [rng.choice(VOCABULARY) for _ in range(length + rng.randint(0, length // 2))]
    return f"{model} on {prompt[:30]!r}: " + " ".join(words) + "."


def streamed_text(model: str, prompt: str, seed: int | None, attempt: int) -> str:
    """What a streamed reply says: ``generated_text`` without the model's name ("On 'prompt': ..."; an arena refuses a
    vote on a reply that names its own model), unless the prompt holds ``[[say-name]]``."""
    text = generated_text(model, prompt, seed, attempt)
    return text if "[[say-name]]" in prompt else "On" + text.removeprefix(f"{model} on")


def verdict_lines(prompt: str, first_wins: bool) -> str:
    winner = "A" if first_wins else "B"
    if "Also acceptable:" in prompt:
        return f"Verdict: {winner}\nAlso acceptable: {winner}"
    if "Acceptable: A, B" in prompt:
        return f"Acceptable: {winner}"
    if "A much better" in prompt:
        return f"Verdict: {winner} better"
    return f"Verdict: {winner}"


class JudgeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, port: int = 0, api_key: str | None = None, slow_seconds: float = 2.0, host: str = "127.0.0.1"
    ) -> None:
        super().__init__((host, port), Handler)
        self.api_key = api_key
        self.slow_seconds = slow_seconds
        self.lock = threading.Lock()
        self.seen: collections.Counter[str] = collections.Counter()  # requests per prompt
        self.requests: list[dict] = []  # every valid request body
        self.invalid: list[str] = []  # why requests were refused
        self.statuses: collections.Counter[int] = collections.Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = 0.0  # seconds before every reply (to hold requests in flight)
        self.trickle_seconds = 0.3  # between the bytes of a [[trickle]] reply
        self.hung_up = 0  # [[trickle]] replies the client cut off
        self.hanging = 0  # [[hang]] requests still held open
        self.released = threading.Event()  # set: every [[hang]] request ends (the test is over)
        self.deep = 1000
        self.many_bytes = 2_000_000
        self.giant_bytes = 50_000_000
        self.huge_error_chars = 5_000_000
        self.extra_bytes = 30_000_000
        self.headers_seen: list[dict[str, str]] = []  # every valid request's headers
        self.stream_rate = 50.0  # words a second of a streamed reply
        self.first_token_seconds = 0.0  # before a streamed reply's first word
        self.first_sent: list[dict] = []  # each streamed reply: model, last message, first word's send time (epoch)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host if isinstance(host, str) else host.decode()}:{port}/v1"

    def shutdown(self) -> None:
        self.released.set()
        super().shutdown()

    def start(self) -> JudgeServer:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


@contextlib.contextmanager
def running(**options: typing.Any) -> Iterator[JudgeServer]:
    """A server started for the block (``JudgeServer``'s options), shut down and its socket closed after it."""
    server = JudgeServer(**options).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def server_fixture(**options: typing.Any):
    """The ``server`` fixture of a test module: ``server = server_fixture()`` (or ``server_fixture(api_key=KEY)``), a
    server on a free port of its own for each test."""
    import pytest  # only the tests need it: ``python -m tests.judge_server`` runs without

    @pytest.fixture(name="server")
    def fixture() -> Iterator[JudgeServer]:
        with running(**options) as server:
            yield server

    return fixture


class Handler(BaseHTTPRequestHandler):
    server: JudgeServer

    def log_message(self, format: str, *args) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        with self.server.lock:
            self.server.statuses[status] += 1

    def _error(self, status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": None}}, headers)

    def _validate(self, body: object) -> str:
        if not isinstance(body, dict):
            return "the body is not a JSON object"
        unknown = set(body) - KNOWN
        if unknown:
            return f"unknown parameters: {sorted(unknown)}"
        try:
            (STREAM_PARAMS if body.get("stream") else PARAMS).validate_python(body)
            if not isinstance(body.get("messages"), list) or not body["messages"]:
                return "messages must be a non-empty list"
            for message in body["messages"]:
                MESSAGE.validate_python(message)
                if not isinstance(message.get("content"), str):
                    return "message content must be text"
        except ValidationError as exc:
            return str(exc)
        return ""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        if not self.path.endswith("/chat/completions"):
            self._error(404, f"no route {self.path}", "invalid_request_error")
            return
        if self.server.api_key is not None and self.headers.get("Authorization") != f"Bearer {self.server.api_key}":
            self._error(401, "Incorrect API key provided.", "invalid_request_error")
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        except ValueError:
            body = None
        problem = self._validate(body)
        if problem:
            with self.server.lock:
                self.server.invalid.append(problem)
            self._error(400, problem, "invalid_request_error")
            return
        prompt = body["messages"][-1]["content"]
        with self.server.lock:
            self.server.requests.append(body)
            self.server.headers_seen.append(dict(self.headers))
            self.server.seen[prompt] += 1
            attempt = self.server.seen[prompt]
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
        try:
            self._answer(body, prompt, attempt)
        finally:
            with self.server.lock:
                self.server.in_flight -= 1

    def _echo_key(self, prompt: str) -> tuple[int, str] | None:
        """``[[echo-key:STATUS:N]]``: the status and the text that repeats the key after ``N`` characters."""
        found = ECHO_KEY.search(prompt)
        if found is None:
            return None
        return int(found[1]), "x" * int(found[2]) + str(self.headers.get("Authorization"))

    def _answer(self, body: dict, prompt: str, attempt: int) -> None:
        if self.server.delay:
            time.sleep(self.server.delay)
        echo = self._echo_key(prompt)
        if echo is not None and echo[0] != 200:
            self._error(echo[0], echo[1], "invalid_request_error" if echo[0] < 500 else "server_error")
            return
        if "[[always-429]]" in prompt or ("[[rate-limit]]" in prompt and attempt <= 2):
            self._error(429, "Rate limit reached.", "rate_limit_error", {"retry-after-ms": "5"})
            return
        if "[[nul-error]]" in prompt:  # an error whose words hold a NUL (an endpoint's reply is untrusted)
            self._error(500, "bad\x00gateway", "server_error", {"retry-after-ms": "5"})
            return
        if "[[malformed-shape]]" in prompt:  # 200, but not a chat completion's shape (sent as is, unvalidated)
            self._send(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 1,
                    "model": body["model"],
                    "choices": [1],
                    "usage": "many",
                },
            )
            return
        if self._fault(body, prompt):
            return
        if "[[server-error]]" in prompt and attempt == 1:
            self._error(500, "The server had an error.", "server_error", {"retry-after-ms": "5"})
            return
        if "[[slow]]" in prompt and attempt == 1:
            time.sleep(self.server.slow_seconds)
        if "[[trickle]]" in prompt:  # 200 at once, then the body a byte at a time: no read ever times out
            body_bytes = json.dumps({"never": "finished"}).encode() * 100
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body_bytes)))
            self.end_headers()
            try:
                for byte in body_bytes:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(self.server.trickle_seconds)
            except OSError:  # the client hung up: what a cut-off request looks like from here
                with self.server.lock:
                    self.server.hung_up += 1
            return
        if body.get("stream"):
            self._stream(body, prompt, attempt)
            return
        if body["model"].startswith("gen-"):
            self._generate(body, prompt, attempt)
            return
        found = OUTPUTS.search(prompt)
        first, second = (found["first"], found["second"]) if found else ("", "")
        p = p_first(first, second)
        finish = "stop"
        if "[[malformed]]" in prompt:
            text = "Both outputs have merits, so it is hard to say."
        elif "[[cut]]" in prompt:
            text, finish = "Output A ends with the line\nVerdict: A", "length"
        elif "[[two-verdicts]]" in prompt:
            text = "Verdict: A\n" + verdict_lines(prompt, False)
        elif "[[line-separator]]" in prompt:
            text = "The chosen output is more complete.\u2028" + verdict_lines(prompt, p > 0.5)
        elif "[[nul]]" in prompt:
            text = "A is better.\x00\n" + verdict_lines(prompt, True)
        elif "[[huge]]" in prompt:
            text = "x" * 2_000_000 + "\n" + verdict_lines(prompt, p > 0.5)
        elif "[[echo-headers]]" in prompt:
            text = json.dumps(dict(self.headers)) + "\n" + verdict_lines(prompt, p > 0.5)
        elif echo is not None:
            text = echo[1] + "\n" + verdict_lines(prompt, p > 0.5)
        else:
            text = "The chosen output is more complete.\n" + verdict_lines(prompt, p > 0.5)
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        if "[[bad-usage]]" in prompt:
            usage["completion_tokens"] = -5
        if "[[huge-usage]]" in prompt:
            usage["prompt_tokens"] = 2**40 + 5
        completion = {
            "id": f"chatcmpl-{abs(hash(prompt)) % 10**8}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": self._logprobs(text, p) if body.get("logprobs") else None,
                }
            ],
            "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]},
        }
        reply = ChatCompletion.model_validate(completion).model_dump(mode="json", exclude_none=True)
        if "[[extra-fields]]" in prompt:
            reply["debug"] = {"trace": "t" * self.server.extra_bytes, "headers": dict(self.headers)}
        self._send(200, reply)

    def _raw(self, status: int, data: bytes, length: bool = True) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if length:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            for start in range(0, len(data), 1 << 20):
                self.wfile.write(data[start : start + (1 << 20)])
        except OSError:  # the client stopped reading
            with self.server.lock:
                self.server.hung_up += 1
        with self.server.lock:
            self.server.statuses[status] += 1
        if not length:
            self.close_connection = True

    def _giant(self, size: int, length: bool) -> None:
        """Whitespace then ``{}``: valid JSON of ``size`` bytes, written a megabyte at a time (the server itself never
        holds it), its length announced or not."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if length:
            self.send_header("Content-Length", str(size + 2))
        self.end_headers()
        block = b" " * (1 << 20)
        try:
            for start in range(0, size, len(block)):
                self.wfile.write(block[: min(len(block), size - start)])
            self.wfile.write(b"{}")
        except OSError:  # the client stopped reading
            with self.server.lock:
                self.server.hung_up += 1
        self.close_connection = True

    def _fault(self, body: dict, prompt: str) -> bool:
        """The faults of a reply's body and size; True when one answered."""
        server = self.server
        if "[[hang]]" in prompt:  # holds the request until the client hangs up (or the test ends)
            with server.lock:
                server.hanging += 1
            try:
                self._hold()
            finally:
                with server.lock:
                    server.hanging -= 1
            self.close_connection = True
            return True
        if "[[invalid-json]]" in prompt:
            self._raw(200, b'{"id": "x", "choices": [')
        elif "[[many-objects]]" in prompt:  # small on the wire, large once parsed (a completion without choices)
            count = server.many_bytes // 3
            self._raw(200, b'{"id": "x", "choices": [], "padding": [' + b"{}," * (count - 1) + b"{}]}")
        elif "[[empty-body]]" in prompt:
            self._raw(200, b"")
        elif "[[deep-json]]" in prompt:
            self._raw(200, b"[" * server.deep + b"]" * server.deep)
        elif "[[giant]]" in prompt or "[[giant-chunked]]" in prompt:
            self._giant(server.giant_bytes, length="[[giant]]" in prompt)
        elif "[[huge-error]]" in prompt:
            self._error(400, "E" * server.huge_error_chars, "invalid_request_error")
        else:
            return False
        return True

    def _generate(self, body: dict, prompt: str, attempt: int) -> None:
        text, finish = generated_text(body["model"], prompt, body.get("seed"), attempt), "stop"
        if "[[empty]]" in prompt:
            text = ""
        elif "[[nul]]" in prompt:
            text = "before\x00after"
        elif "[[filtered]]" in prompt:
            text, finish = "", "content_filter"
        elif "[[long]]" in prompt:
            text, finish = " ".join(text.split()[: body.get("max_tokens") or 16]), "length"
        echo = self._echo_key(prompt)
        if echo is not None:
            text = echo[1] + ("\x00" if "[[nul]]" in prompt else "")
        usage = {
            "prompt_tokens": sum(len(m["content"].split()) for m in body["messages"]),
            "completion_tokens": len(text.split()),
        }
        completion = {
            "id": f"chatcmpl-{abs(hash((prompt, attempt))) % 10**8}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "system_fingerprint": "fp_local",
            "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text}}],
            "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]},
        }
        self._send(200, ChatCompletion.model_validate(completion).model_dump(mode="json", exclude_none=True))

    def _stream(self, body: dict, prompt: str, attempt: int) -> None:
        """A streamed reply (see the module's docstring): chunks built from ``ChatCompletionChunk``, one word each at
        the server's rate, under the stream fault markers."""
        server, model = self.server, body["model"]
        text = streamed_text(model, prompt, body.get("seed"), attempt)
        words = re.findall(r"\s*\S+", text)
        if "[[stream-key]]" in prompt:
            secret = str(self.headers.get("Authorization"))
            words = ["Here: "] + [secret[i : i + 3] for i in range(0, len(secret), 3)]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
            data = {
                "id": f"chatcmpl-{abs(hash((prompt, attempt))) % 10**8}",
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": model,
                "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
                **({"usage": usage} if usage else {}),
            }
            valid = ChatCompletionChunk.model_validate(data).model_dump(mode="json", exclude_none=True)
            return f"data: {json.dumps(valid)}\n\n".encode()

        def send(data: bytes) -> None:
            self.wfile.write(data)
            self.wfile.flush()

        try:
            send(chunk({"role": "assistant", "content": ""}))
            time.sleep(server.first_token_seconds)
            fault = next((m for m in ("stream-error", "stream-stall", "stream-trickle") if f"[[{m}]]" in prompt), "")
            for n, word in enumerate(words if fault != "stream-trickle" else iter(lambda: " more", None)):
                if n == 3 and fault == "stream-error":
                    send(b'data: {"error": {"message": "The model crashed mid-reply.", "type": "server_error"}}\n\n')
                    return
                if n == 3 and fault == "stream-stall":
                    self._hold()
                    return
                if n:
                    time.sleep(server.trickle_seconds if fault == "stream-trickle" else 1 / server.stream_rate)
                send(chunk({"content": word}))
                if n == 0:
                    with server.lock:
                        server.first_sent.append({"model": model, "prompt": prompt, "sent": time.time()})
            send(chunk({}, "stop"))
            if (body.get("stream_options") or {}).get("include_usage"):
                tokens = sum(len(m["content"].split()) for m in body["messages"])
                used = {"prompt_tokens": tokens, "completion_tokens": len(words)}
                send(chunk({}, usage={**used, "total_tokens": tokens + len(words)}))
            send(b"data: [DONE]\n\n")
        except OSError:  # the client hung up
            with server.lock:
                server.hung_up += 1

    def _hold(self) -> None:
        """Keep the connection open, sending nothing, until the client hangs up or the server closes."""
        self.connection.settimeout(0.1)
        while not self.server.released.is_set():
            try:
                if self.connection.recv(1) == b"":
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        with self.server.lock:
            self.server.hung_up += 1

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.endswith("/stream-log"):
            with self.server.lock:
                sent = list(self.server.first_sent)
            self._send(200, {"first_sent": sent})
            return
        self._error(404, f"no route {self.path}", "invalid_request_error")

    @staticmethod
    def _logprobs(text: str, p: float) -> dict:
        """Tokens: runs of word characters, each with the spaces before it; the verdict's label (the token after
        the first colon) has A / B / Tie alternatives."""
        pieces = re.findall(r"\s*\w+|\s*[^\w\s]|\s+", text)
        colons = [i for i, t in enumerate(pieces) if t.strip() == ":"]
        label_at = colons[0] + 1 if colons else -1  # a malformed reply has no label token
        content = []
        for i, token in enumerate(pieces):
            if i == label_at:
                alts = [("A", p * 0.98), ("B", (1 - p) * 0.98), ("Tie", 0.02)]
                alts = [(" " + a if token.startswith(" ") else a, q) for a, q in alts]
                chosen = dict(alts).get(token, 0.02)
                top = [{"token": a, "logprob": math.log(q), "bytes": list(a.encode())} for a, q in alts]
            else:
                chosen = 0.99
                top = [{"token": token, "logprob": math.log(chosen), "bytes": list(token.encode())}]
            content.append(
                {"token": token, "logprob": math.log(chosen), "bytes": list(token.encode()), "top_logprobs": top}
            )
        return {"content": content, "refusal": None}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--api-key", default=None, help="Require this key (Authorization: Bearer …).")
    parser.add_argument("--stream-rate", type=float, default=50.0, help="Words a second of a streamed reply.")
    args = parser.parse_args()
    server = JudgeServer(args.port, args.api_key)
    server.stream_rate = args.stream_rate
    print(f"OpenAI-compatible judge server on {server.base_url} (Ctrl-C stops it)")
    server.serve_forever()


if __name__ == "__main__":
    main()
