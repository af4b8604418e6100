"""Streaming an arena battle's replies to the rater's page (docs/arena.md#streaming-replies): each side's reply of the
current turn is asked from its system's endpoint with ``stream=True`` and every word is passed on at once as a
server-sent event, while the reply's text is saved every ``SAVE_EVERY`` seconds and at the end, then the battle is
settled (``battles.do_settle``).

One request asks the endpoint; it holds a lease in the cache (``lease_key``) that it renews while it streams. Another
request for the same reply (the page reconnected, a second tab) follows it from the database; a reply whose lease
lapsed (no renewal for the endpoint's timeout: its request died with its worker) is asked again from the start. A
reply already done or failed is sent whole at once. The endpoint is read on a thread of its own (no database there,
as ``endpoints.do_run``'s threads): the request's thread passes each word on, saves, renews the lease and cuts the
request off (closing its client) when the endpoint fails (docs/arena.md#endpoints-that-fail): an error, no word for
the endpoint's timeout, or the whole reply over ``endpoints.request_limit``. A rater who closes the page does not stop
the reply: it is read to its end and stored.

Endpoint replies are untrusted: each word is made storable and has every key this server holds taken out before it
leaves (``Shown``: a key split across words is held back until it can be told apart, never sent in pieces).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import httpx2
import openai
from django.core.cache import cache
from django.db import connection, connections, transaction
from django.utils import timezone

from annotation import endpoints
from annotation.arena import battles
from annotation.errors import ServiceError
from annotation.models import Battle, BattleReply, SystemEndpoint
from annotation.models.arena import NOT_ASKED

SAVE_EVERY = 0.5  # seconds between saves of a streaming reply's text (and renewals of its lease)
FOLLOW_EVERY = 0.2  # seconds between a follower's looks at the reply in the database
PING_EVERY = 15.0  # seconds between SSE comments on a quiet stream (proxies close idle connections)
# seconds the request's thread waits for the endpoint's next word before its other duties (a word wakes it at once;
# a longer wait is fewer wake-ups of a hundred streams' threads competing for one interpreter lock)
TICK = SAVE_EVERY / 2
LEASE_FLOOR = 5.0  # seconds: the shortest lease, whatever the endpoint's timeout
SIDES_SHOWN = ("left", "right")
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    """One server-sent event: ``text`` (the whole reply so far: a page starts, or starts over, from it), ``delta``
    (words to add), ``done``, ``failed`` (the reason), ``ping`` (a comment that keeps the connection open)."""

    kind: str
    data: str = ""

    def encoded(self) -> bytes:
        if self.kind == "ping":
            return b": ping\n\n"
        return f"event: {self.kind}\ndata: {json.dumps(self.data)}\n\n".encode()


def model_side(battle: Battle, shown: str) -> str:
    """The model coordinate ("a" / "b") of a side as shown ("left" / "right")."""
    if shown not in SIDES_SHOWN:
        raise ServiceError("A side is left or right.")
    return "a" if (shown == "left") == battle.a_shown_first else "b"


def current_reply(battle: Battle, side: str) -> BattleReply | None:
    """The side's reply of the battle's latest turn."""
    return BattleReply.objects.filter(battle=battle, side=side).order_by("-turn").first()


def endpoint_of(battle: Battle, side: str) -> SystemEndpoint:
    """``battles.endpoint_of``, refused for an attention check (its replies are not asked from an endpoint)."""
    endpoint = battles.endpoint_of(battle, side)
    if endpoint is None:
        raise ServiceError("This battle's replies are not asked from an endpoint.")
    return endpoint


def lease_key(reply: BattleReply) -> str:
    """The cache key of the lease of the request asking for ``reply`` (the database's name in it: test databases
    share the cache)."""
    return f"arena-stream:{connection.settings_dict['NAME']}:{reply.pk}"


def lease_seconds(endpoint: SystemEndpoint) -> float:
    return max(endpoint.timeout_seconds, LEASE_FLOOR)


def _release_connection() -> None:
    """Give the database connection back between saves: a stream lasts seconds, and a PostgreSQL server has room for
    fewer connections than there are streams (SQLite connections are free to keep)."""
    if connection.vendor != "sqlite" and not connection.in_atomic_block:
        connection.close()


def do_stream(battle: Battle, side: str) -> Iterator[Event]:
    """The events of the side's (model coordinates) reply of the current turn, from wherever it is: whole when
    final, asked from the endpoint when no request holds it, followed from the database when one does."""
    reply = current_reply(battle, side)
    if reply is None:
        raise ServiceError("This battle has no reply on that side.")
    sent: str | None = None
    while True:
        reply.refresh_from_db()
        if reply.status != BattleReply.Status.STREAMING:
            if Battle.objects.filter(pk=battle.pk, status=Battle.Status.ANSWERING).exists():
                battles.do_settle(battle)  # a settle its request did not live to make (idempotent)
            if sent != reply.text:
                yield Event("text", reply.text)
            yield _final(reply)
            return
        endpoint = endpoint_of(battle, side)
        token = uuid.uuid4().hex
        if Battle.objects.filter(pk=battle.pk, status=Battle.Status.FAILED).exists() and not reply.text:
            # the other model failed first: nothing to vote on, nothing to pay for -- unless a request is asking
            # already (its words not in yet), whose reply is then followed to its end, never failed under it
            if cache.add(lease_key(reply), token, timeout=lease_seconds(endpoint)):
                event = _do_not_asked(reply)
                cache.delete(lease_key(reply))
                yield event
                return
        elif cache.add(lease_key(reply), token, timeout=lease_seconds(endpoint)):
            yield Event("text", "")
            streamer = Streamer(battle, reply, endpoint, token)
            try:
                yield from streamer.do_events()
            finally:  # the page went away: the reply is read to its end and stored all the same
                streamer.do_run_to_end()
            return
        if sent != reply.text:
            yield Event("text", reply.text)
            sent = reply.text
        yield from _follow(reply, sent)
        sent = reply.text  # the lease lapsed: the reply is asked again (or another request took it first)


def _follow(reply: BattleReply, sent: str) -> Iterator[Event]:
    """Another request is asking: the reply's text as it is saved, until it is final or its lease lapses."""
    pinged = time.monotonic()
    while cache.get(lease_key(reply)) is not None:
        time.sleep(FOLLOW_EVERY)
        row = BattleReply.objects.filter(pk=reply.pk).values("text", "status").first()
        _release_connection()
        if row is None:
            return
        if row["text"] != sent:
            grown = row["text"].startswith(sent)
            yield Event("delta", row["text"][len(sent) :]) if grown else Event("text", row["text"])
            sent = reply.text = row["text"]
            pinged = time.monotonic()
        if row["status"] != BattleReply.Status.STREAMING:
            return
        if time.monotonic() - pinged > PING_EVERY:
            yield Event("ping")
            pinged = time.monotonic()


# What a failed reply's event tells the rater's page. The reason (the endpoint's error, which may name the model,
# its host or its URL) is the researcher's: kept in ``BattleReply.problem``, shown on the board and exported.
FAILED_WORDS = "This model could not answer."


def _do_not_asked(reply: BattleReply) -> Event:
    BattleReply.objects.filter(pk=reply.pk, status=BattleReply.Status.STREAMING).update(
        status=BattleReply.Status.FAILED, problem=NOT_ASKED, finished=timezone.now()
    )
    return Event("failed", FAILED_WORDS)


def _final(reply: BattleReply) -> Event:
    return Event("done") if reply.status == BattleReply.Status.DONE else Event("failed", FAILED_WORDS)


class Shown:
    """A reply's text as the page may see it: storable, every key taken out, and the end held back while it could
    be the beginning of a key (the next words tell). When a key completes after a piece too short to hold back
    (under ``endpoints.KEY_PIECE`` characters, as ``endpoints.cut`` allows) the page is sent the whole text again."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.raw = ""
        self.sent = ""

    def add(self, piece: str) -> Event | None:
        """The event that brings the page up to date after ``piece`` arrived, or None."""
        self.raw += endpoints.storable(piece)
        return self._send(self._safe())

    def flush(self) -> Event | None:
        """At the end: everything, keys taken out."""
        return self._send(self.text)

    @property
    def text(self) -> str:
        return endpoints.redact(self.raw, self.keys)

    def _safe(self) -> str:
        text = self.text
        # as endpoints.cut: a piece shorter than KEY_PIECE tells nothing; a longer one waits for the next words
        hold = max(
            (n for key in self.keys for n in range(endpoints.KEY_PIECE, len(key)) if text.endswith(key[:n])),
            default=0,
        )
        return text[: len(text) - hold]

    def _send(self, safe: str) -> Event | None:
        if self.sent.startswith(safe):  # nothing new, or only what is held back for now
            return None
        event = Event("delta", safe[len(self.sent) :]) if safe.startswith(self.sent) else Event("text", safe)
        self.sent = safe
        return event


class Streamer:
    """One request asking the endpoint for one reply: a reading thread (network only) and the request's own thread
    (``do_events``: the page's events, the saves, the lease, the cut-offs)."""

    def __init__(self, battle: Battle, reply: BattleReply, endpoint: SystemEndpoint, token: str) -> None:
        self.battle, self.reply, self.endpoint, self.token = battle, reply, endpoint, token
        self.keys = endpoints.secrets(endpoint)
        self.shown = Shown(self.keys)
        self.words: queue.SimpleQueue[tuple[str, object]] = queue.SimpleQueue()
        self.limit = endpoints.request_limit(endpoint)
        self.quiet = endpoint.timeout_seconds
        self.over = False
        self.started = time.monotonic()
        self.last_word = self.started
        self.saved_at = self.started
        self.saved_text = ""
        self.chunks = 0
        self.finish_reason = ""
        self.usage: object = None
        self.notes: list[str] = []
        self.client: openai.OpenAI | None = None
        self.first_token: dt.datetime | None = None
        self.ending: str | None = None  # the reading thread's last word: "" (the end) or why it failed
        self.pending: list[Event] = []  # what the page is told before the first word (a refused target)
        self.messages = battles.conversation(battle, reply.side, reply.turn)
        self._do_begin()

    # the reading thread: no database

    def _read(self, client) -> None:
        endpoint = self.endpoint
        try:
            stream = client.chat.completions.create(
                model=endpoint.model,
                messages=self.messages,
                temperature=endpoint.temperature,
                max_tokens=endpoint.max_tokens,
                n=1,
                stream=True,
                stream_options={"include_usage": True},
                **({} if endpoint.seed is None else {"seed": endpoint.seed}),
            )
            for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    self.words.put(("usage", chunk.usage))
                for choice in (chunk.choices or [])[:1]:
                    content = getattr(choice.delta, "content", None) if choice.delta is not None else None
                    if isinstance(content, str) and content:
                        self.words.put(("word", content))
                    if choice.finish_reason:
                        self.words.put(("finish", str(choice.finish_reason)))
            self.words.put(("end", None))
        except (openai.APITimeoutError, httpx2.TimeoutException):  # the client's own wait for a word ran out
            self.words.put(("error", self.silent()))
        except Exception as exc:  # noqa: BLE001 -- any failure of an untrusted endpoint is this reply's failure
            self.words.put(("error", endpoints.described(exc, self.keys)))

    def silent(self) -> str:
        return f"The endpoint sent no word for {self.quiet:g} s; the reply was cut off."

    # the request's thread

    def _do_begin(self) -> None:
        """The reply starts over (asked again after a lapsed lease: what was saved of it is replaced)."""
        if self.reply.text or self.reply.first_token is not None:
            BattleReply.objects.filter(pk=self.reply.pk, status=BattleReply.Status.STREAMING).update(
                text="", problem="", started=timezone.now(), first_token=None
            )
            _release_connection()
        try:
            endpoints.check_target(self.endpoint)
            self.client = endpoints.make_client(self.endpoint)
        except endpoints.EndpointError as exc:
            self._do_end(failed=str(exc))
            return
        threading.Thread(target=self._read, args=(self.client,), daemon=True, name=f"arena-{self.reply.pk}").start()
        _release_connection()  # nothing is read or written again until the end (the saver writes the texts)

    def do_events(self) -> Iterator[Event]:
        """The page's events as the words come; after each batch is passed on, the chores (``_do_chores``)."""
        yield from self.pending
        pinged = time.monotonic()
        while not self.over:
            events = self._take()
            yield from events  # the page first: a save or the end's writes never hold a word back
            chores = self._do_chores()
            yield from chores
            if events or chores:
                pinged = time.monotonic()
            elif time.monotonic() - pinged > PING_EVERY:
                yield Event("ping")
                pinged = time.monotonic()

    def do_run_to_end(self) -> None:
        while not self.over:
            self._take()
            self._do_chores()

    def _take(self) -> list[Event]:
        """What arrived from the reading thread (waiting up to ``TICK`` for the first of it), as the page's events."""
        events: list[Event] = []
        try:
            kind, value = self.words.get(timeout=TICK)
            while True:
                if kind == "word":
                    self.chunks += 1
                    if self.first_token is None:
                        self.first_token = timezone.now()
                    self.last_word = time.monotonic()
                    event = self.shown.add(str(value))
                    if event is not None:
                        events.append(event)
                elif kind == "usage":
                    self.usage = value
                elif kind == "finish":
                    self.finish_reason = endpoints.cut(str(value), 40, self.keys)
                else:  # "end", or "error" with the reason
                    self.ending = str(value or "")
                    return events
                kind, value = self.words.get_nowait()
        except queue.Empty:
            return events

    def _do_chores(self) -> list[Event]:
        """The end once it came, the cut-offs (no word for the timeout, the whole reply over its limit), the save
        of the text and the lease every ``SAVE_EVERY`` seconds."""
        events: list[Event] = []
        now = time.monotonic()
        if self.ending is not None:
            self._do_end(failed=self.ending, events=events)
        elif now - self.last_word > self.quiet:
            self._do_end(failed=self.silent(), events=events)
        elif now - self.started > self.limit:
            self._do_end(failed=f"The reply took longer than {self.limit:g} s; it was cut off.", events=events)
        elif now - self.saved_at >= SAVE_EVERY:
            self._do_save()
        return events

    def _do_save(self) -> None:
        """The text so far (``SAVER``: with the other streams' of this process), and the lease renewed."""
        self.saved_at = time.monotonic()
        cache.set(lease_key(self.reply), self.token, timeout=lease_seconds(self.endpoint))
        if self.shown.sent != self.saved_text:
            self.saved_text = self.shown.sent
            SAVER.do_put(self.reply.pk, self.saved_text)

    def _do_end(self, failed: str = "", events: list[Event] | None = None) -> None:
        """The reply is final: done with its text, tokens and cost, or failed with the reason; the battle settled.
        The page's last events go to ``events`` (before the first step: ``pending``)."""
        self.over = True
        if self.client is not None:
            self.client.close()  # a request cut off: its reading thread wakes with an error and ends
        if not failed and self.finish_reason == "content_filter":
            failed = "The endpoint withheld the reply (its content filter)."
        if not failed and not self.shown.raw:
            failed = "The endpoint sent an empty reply."
        events = self.pending if events is None else events
        last = self.shown.flush()
        if last is not None and not failed:
            events.append(last)
        prompt_tokens, completion_tokens = self._tokens()
        problem = endpoints.shortened(failed, self.keys)
        fields = {
            "status": BattleReply.Status.FAILED if failed else BattleReply.Status.DONE,
            "text": self.shown.text,
            "problem": problem,
            "finish_reason": self.finish_reason,
            "first_token": self.first_token,
            "finished": timezone.now(),
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cost": endpoints.cost(self.endpoint, prompt_tokens, completion_tokens)
            if prompt_tokens or completion_tokens
            else Decimal(0),
        }
        SAVER.discard(self.reply.pk)
        BattleReply.objects.filter(pk=self.reply.pk, status=BattleReply.Status.STREAMING).update(**fields)
        battles.do_settle(Battle.objects.get(pk=self.battle.pk))
        if cache.get(lease_key(self.reply)) == self.token:
            cache.delete(lease_key(self.reply))
        _release_connection()
        events.append(Event("failed", FAILED_WORDS) if failed else Event("done"))

    def _tokens(self) -> tuple[int, int]:
        """The usage the endpoint reported (``endpoints.token_count``), else the words streamed as the completion's
        tokens."""
        used = self.usage
        if used is None:
            return 0, self.chunks
        return (
            endpoints.token_count(getattr(used, "prompt_tokens", None), "prompt_tokens", self.notes, self.keys),
            endpoints.token_count(getattr(used, "completion_tokens", None), "completion_tokens", self.notes, self.keys),
        )


class Saver:
    """The streaming replies' texts of this process, saved together every ``SAVE_EVERY`` seconds on one thread: one
    transaction and one database connection for all of them, so a hundred streams cost a few writes a second, not
    two hundred (SQLite takes one writer at a time; a PostgreSQL server has fewer connections than there are
    streams). Inside a transaction (a caller's atomic block, a test) a text is saved at once on the calling thread:
    another connection would not see its row. A final reply is written by its request, never by the saver."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.texts: dict[int, str] = {}
        self.pid = 0  # the process whose thread saves (a forked worker starts its own)

    def do_put(self, reply_id: int, text: str) -> None:
        if connection.in_atomic_block:
            _do_save_texts({reply_id: text})
            return
        with self.lock:
            self.texts[reply_id] = text
            if self.pid != os.getpid():
                self.pid = os.getpid()
                threading.Thread(target=self._do_run, daemon=True, name="arena-saver").start()

    def discard(self, reply_id: int) -> None:
        with self.lock:
            self.texts.pop(reply_id, None)

    def _do_run(self) -> None:
        while True:
            time.sleep(SAVE_EVERY)
            with self.lock:
                texts, self.texts = self.texts, {}
            if texts:
                try:
                    _do_save_texts(texts)
                except Exception:  # noqa: BLE001 -- a lost save is a later one's; the thread must live on
                    logger.exception("arena: saving %d streaming replies failed", len(texts))
                finally:
                    connections.close_all()


def _do_save_texts(texts: dict[int, str]) -> None:
    with transaction.atomic():
        for reply_id, text in texts.items():
            BattleReply.objects.filter(pk=reply_id, status=BattleReply.Status.STREAMING).update(text=text)


SAVER = Saver()


def do_complete(battle: Battle) -> None:
    """Both replies of the current turn to their end, asked (or followed) at the same time: the page without
    JavaScript waits for them whole."""

    def run(side: str) -> None:
        try:
            for _ in do_stream(battle, side):
                pass
        finally:
            connections.close_all()  # this thread's own connections

    threads = [threading.Thread(target=run, args=(side,), daemon=True) for side in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
