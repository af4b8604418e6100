"""One base for a run of requests to an OpenAI-compatible endpoint, as healthchecks has one ``Transport`` for every
integration: an LLM judge's run (``annotation/judges/runner.py``, ``JudgeRun``) and a generated system's
(``annotation/generating/runner.py``, ``GenerationRun``) are the same kind of thing and share everything but what
they ask and what a reply becomes.

Here, once: the ledger of calls (``endpoint.calls``: at most one per request, a database constraint, written in the
same transaction as what the reply produced, so a run stopped or crashed anywhere resumes with exactly what is
missing) and what it adds up to (``usage``: replies, what the budget counts, tokens, cost); asking (``ask``: the
chat completion and its errors); recording a reply (``do_record``); a run within the budget on ``endpoints.do_run``
(concurrency, stop, time slices, cut-offs); and the run as a job (``do_start``, ``do_stop``, ``job_body``), created
by ``jobs.start`` and ended by ``jobs.end``. A subclass says what is pending and how it is asked, how a reply is
read and what it stores, and the words of its job's messages and refusals (``Words``; the run card's are its page's:
``views/runs.py``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from decimal import Decimal
from functools import cached_property
from typing import Any, ClassVar, Generic, TypeVar, cast

import openai
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Aggregate, Count, Model, Q, Sum
from django.utils import timezone
from openai.types.chat import ChatCompletionMessageParam

from annotation import endpoints, jobs, outbound
from annotation.endpoints import FATAL, EndpointError, RunResult, redact, storable
from annotation.models import Endpoint, Job, Study
from annotation.outbound import EndpointRefused, ReplyTooLarge
from annotation.worker import stale_after

E = TypeVar("E", bound=Endpoint)  # the endpoint: a judge, a system's
R = TypeVar("R")  # one request

WORKER_DIED = "The worker stopped without finishing (a crash or a restart); the run was resumed."


@dataclasses.dataclass(frozen=True)
class Reply(Generic[R]):
    """What came back for one request, as its kind read the chat completion."""

    request: R
    text: str = ""
    response: dict | None = None  # as received, made storable
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = ""
    notes: tuple[str, ...] = ()  # what the endpoint reported wrong (a token count), or cut short
    tokens: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()  # each token and its top log-probabilities
    error: str = ""  # failed after the client's retries, or cut off: asked again on resume
    problem: str = ""  # why the reply arrived but cannot be used (cut off, too long, withheld)


@dataclasses.dataclass(frozen=True)
class Usage:
    """What a run's ledger adds up to, over every run of the endpoint."""

    replies: int  # what the budget counts
    done: int  # judged, generated
    unusable: int  # unparseable verdicts, unusable outputs
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal  # US$

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclasses.dataclass(frozen=True)
class Words:
    """What a kind of run says in its job's messages and when it refuses to start. ``{name}`` is the endpoint's,
    ``{title}`` the run's, ``{summary}`` what it has done so far."""

    title: str  # the run in job messages: "Judge {name}"
    running: str  # the job's message while it runs
    busy: str  # a start refused while a run is live
    nothing_left: str  # a start refused with nothing to ask
    queued: str = "{title} queued"
    foreground: str = "{title}: run in the foreground"
    going_on: str = "{title} goes on after the jobs queued before it"
    stopped_before: str = "Stopped before it started. Resume to go on."


def is_live(job: Job | None) -> bool:
    """Queued, or running with a recent heartbeat (a running job whose worker died can be resumed)."""
    if job is None or not job.active:
        return False
    if job.status == Job.Status.QUEUED:
        return True
    return job.heartbeat is not None and timezone.now() - job.heartbeat < stale_after()


class EndpointRun(ABC, Generic[E, R]):
    """A run of an endpoint's requests, resumable through its ledger; a subclass per kind of run."""

    kind: ClassVar[str]  # the job kind (``annotation.jobs.KINDS``)
    param: ClassVar[str]  # the key of the job's params naming the endpoint
    model: ClassVar[type[Endpoint]]
    related: ClassVar[tuple[str, ...]] = ()  # read with the endpoint when its job runs
    words: ClassVar[Words]
    # the ledger (``endpoint.calls``): a call's statuses (their values are the words for them), the ones never asked
    # again, the replies the budget counts, the fields that add up when a call is asked again, and its link to what a
    # reply produced
    DONE: ClassVar[str]  # it brought what was asked for: "judged"
    UNUSABLE: ClassVar[str]  # it arrived but is no use: "unparseable"
    FAILED: ClassVar[str] = "failed"
    SETTLED: ClassVar[tuple[str, ...]]
    REPLIES: ClassVar[Aggregate]
    CARRIED: ClassVar[tuple[str, ...]] = ()
    PRODUCT: ClassVar[str]

    def __init__(self, endpoint: E) -> None:
        self.endpoint = endpoint

    @cached_property
    def keys(self) -> list[str]:
        """Every key an endpoint could echo (``endpoints.secrets``), taken out of everything kept of a reply before
        any of it is cut (``endpoints.cut``)."""
        return endpoints.secrets(self.endpoint)

    # ------------------------------------------------------------------------------------------------------
    # What a kind of run defines

    @property
    @abstractmethod
    def study(self) -> Study:
        """The study the endpoint belongs to."""

    @abstractmethod
    def do_prepare_pending(self) -> list:
        """What is still to ask, in order, with what asking it needs created (an all-items judge's pairs)."""

    @abstractmethod
    def remaining(self) -> int:
        """How many requests are still to go; reads only, for the pages."""

    @abstractmethod
    def requests(self, todo: list) -> Iterator[R]:
        """Each request of ``todo`` (what ``do_prepare_pending`` returned) with what asking it needs."""

    @abstractmethod
    def messages(self, request: R) -> list[ChatCompletionMessageParam]:
        """The chat messages of one request."""

    def options(self, request: R) -> dict[str, Any]:
        """What else the request sends (log-probabilities, a seed)."""
        return {}

    @abstractmethod
    def read(self, request: R, completion) -> Reply[R]:
        """A chat completion as this kind keeps it (on a worker thread: no database)."""

    @abstractmethod
    def ledger_key(self, request: R) -> dict[str, Any]:
        """The fields of the request's one call in the ledger."""

    @abstractmethod
    def answer(self, reply: Reply[R]) -> tuple[str, str, Any]:
        """A reply that arrived whole: its call's status, the problem, and what ``do_store`` keeps (None: nothing)."""

    @abstractmethod
    def do_store(self, reply: Reply[R], answer: Any, at: dt.datetime) -> Model:
        """What the reply produced (a judgment, an output), in the transaction that records its call."""

    def call_fields(self, reply: Reply[R]) -> dict[str, Any]:
        """The call's fields of this kind only."""
        return {}

    def do_finish(self, said: str) -> jobs.Outcome:
        """A job's outcome when the run asked for everything it could."""
        return jobs.Outcome(said)

    # ------------------------------------------------------------------------------------------------------
    # Words

    def said(self, words: str, **more: Any) -> str:
        name = str(self.endpoint)
        return words.format(title=self.words.title.format(name=name), name=name, **more)

    @property
    def done_words(self) -> str:
        """What the run card says after the number done."""
        return self.DONE

    @property
    def complete_words(self) -> str:
        """What the run card says when nothing is left to ask."""
        return self.words.nothing_left

    # ------------------------------------------------------------------------------------------------------
    # Asking (worker threads: no database) and recording (the calling thread)

    def ask(self, client: openai.OpenAI, request: R) -> Reply[R]:
        """One chat completion; errors that survive the client's retries become the reply's ``error``, except the
        ones no retry mends (``FATAL``) and a target refused on connecting (``EndpointRefused``: its address changed
        to an internal one), which end the run; a body that cannot be read at all (too long, not JSON, nested too
        deep, empty) is a failed call too, asked again on resume; a response the client did not validate and whose
        shape cannot be read arrived all the same (paid for): an unusable reply."""
        with outbound.reading_replies():  # a large reply is read and parsed in one of a few slots
            return self._ask(client, request)

    def _ask(self, client: openai.OpenAI, request: R) -> Reply[R]:
        endpoint = self.endpoint
        try:
            completion = client.chat.completions.create(
                model=endpoint.model,
                messages=self.messages(request),
                temperature=endpoint.temperature,
                max_tokens=endpoint.max_tokens,
                n=1,
                **self.options(request),
            )
        except FATAL:
            raise
        except EndpointRefused as exc:
            raise EndpointError(str(exc)) from None
        except ReplyTooLarge as exc:
            return Reply(request, error=str(exc))
        except openai.OpenAIError as exc:
            return Reply(request, error=endpoints.described(exc, self.keys))
        except endpoints.UNREADABLE as exc:
            why = endpoints.described(exc, self.keys)
            return Reply(request, error=f"The endpoint's reply could not be read: {why}")
        try:
            return self.read(request, completion)
        except endpoints.MALFORMED as exc:
            return Reply(request, problem=endpoints.malformed(exc, self.keys))

    def failure(self, request: R, why: str) -> Reply[R]:
        return Reply(request, error=why)

    def do_record(self, reply: Reply[R]) -> Model | None:
        """Store one reply: what it produced and its call in one transaction, an unusable reply or a failure as a
        call. None when the request was settled already (another run got there first)."""
        at = timezone.now()
        reply = self.redacted(reply)
        if reply.error:
            status, problem, answer = self.FAILED, reply.error, None
        elif reply.problem:
            status, problem, answer = self.UNUSABLE, reply.problem, None
        else:
            status, problem, answer = self.answer(reply)
        fields: dict[str, Any] = {
            "status": status,
            "problem": storable(problem),  # it may quote the endpoint's words
            "response": reply.response,
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "created": at,
            self.PRODUCT: None,
            **self.call_fields(reply),
        }
        key = self.ledger_key(reply.request)
        try:
            with transaction.atomic():
                previous = self.endpoint.calls.select_for_update().filter(**key).first()
                if previous is not None and previous.status in self.SETTLED:
                    return None
                if answer is not None:
                    fields[self.PRODUCT] = self.do_store(reply, answer, at)
                if previous is None:
                    return self.endpoint.calls.create(**key, **fields)
                for name in self.CARRIED:  # asked again: what every attempt was paid for adds up
                    fields[name] += getattr(previous, name)
                for name, value in fields.items():
                    setattr(previous, name, value)
                previous.save()
                return previous
        except IntegrityError:  # a concurrent run recorded this request in between
            return None

    def redacted(self, reply: Reply[R]) -> Reply[R]:
        """A reply with every key taken out of everything kept or shown from it (``endpoints.redact``: an endpoint
        that repeats the request's headers would otherwise put the key on the page), its error shortened
        (``endpoints.shortened``: the keys out first). What ``read`` cut it took the keys out of before cutting."""
        keys = self.keys
        return dataclasses.replace(
            reply,
            text=redact(reply.text, keys),
            response=redact(reply.response, keys),
            notes=redact(reply.notes, keys),
            error=endpoints.shortened(reply.error, keys),
            problem=endpoints.shortened(reply.problem, keys),
            tokens=tuple((redact(t, keys), alts) for t, alts in reply.tokens),
        )

    def usage(self) -> Usage:
        row = self.endpoint.calls.aggregate(
            done=Count("id", filter=Q(status=self.DONE)),
            unusable=Count("id", filter=Q(status=self.UNUSABLE)),
            failed=Count("id", filter=Q(status=self.FAILED)),
            replies=self.REPLIES,
            prompt=Sum("prompt_tokens", default=0),
            completion=Sum("completion_tokens", default=0),
        )
        return Usage(
            row["replies"],
            row["done"],
            row["unusable"],
            row["failed"],
            row["prompt"],
            row["completion"],
            endpoints.cost(self.endpoint, row["prompt"], row["completion"]),
        )

    def summary(self) -> str:
        used = self.usage()
        return (
            f"{used.done} {self.DONE}, {used.unusable} {self.UNUSABLE}, {used.failed} failed after retries; "
            f"{used.tokens:,} tokens, ${used.cost}."
        )

    # ------------------------------------------------------------------------------------------------------
    # A run

    def do_run(
        self,
        *,
        progress: Callable[[int, int], None] = lambda done, total: None,
        should_stop: Callable[[], bool] = lambda: False,
        slice_seconds: float | None = None,
    ) -> RunResult:
        """Ask for every pending request the budget has room for after the replies already received
        (``endpoints.do_run``: ``max_concurrency`` at a time, each reply recorded as it arrives; stop, time slices and
        cut-offs recorded as failed, asked again on resume)."""
        result = RunResult()
        todo = self.do_prepare_pending()
        room = max(self.endpoint.request_budget - self.usage().replies, 0)
        if len(todo) > room:
            todo, result.budget_reached = todo[:room], True
        return endpoints.do_run(
            self.endpoint,
            self.requests(todo),
            len(todo),
            self,
            progress=progress,
            should_stop=should_stop,
            slice_seconds=slice_seconds,
            result=result,
        )

    # ------------------------------------------------------------------------------------------------------
    # The run as a job: start, stop, resume

    def current_job(self) -> Job | None:
        return (
            Job.objects.filter(study=self.study, kind=self.kind, **{f"params__{self.param}": self.endpoint.pk})
            .order_by("-pk")
            .first()
        )

    def stop_requested(self) -> bool:
        return type(self.endpoint)._default_manager.filter(pk=self.endpoint.pk, stop_requested=True).exists()

    def do_start(self, foreground: bool = False) -> Job:
        """Start a run (a first run or a resume) under the endpoint's row lock: refused while one is live -- a
        worker's, or one run in the foreground (``foreground``: not queued, no time slices; ``manage.py generate``)
        -- so two runs never pay for the same requests; a running job whose worker stopped answering is failed first;
        the key and the target are checked now, not by a failed job; refused with nothing to ask or the budget used
        up."""
        endpoint = self.endpoint
        with transaction.atomic():
            type(endpoint)._default_manager.select_for_update().filter(pk=endpoint.pk).first()
            current = self.current_job()
            if is_live(current):
                raise EndpointError(self.words.busy)
            if current is not None and current.active:
                jobs.end(Job.objects.filter(pk=current.pk), Job.Status.FAILED, WORKER_DIED)
            endpoints.api_key(endpoint)
            endpoints.check_target(endpoint)
            if not self.do_prepare_pending():
                raise EndpointError(self.words.nothing_left)
            if self.usage().replies >= endpoint.request_budget:
                raise EndpointError(f"The request budget ({endpoint.request_budget}) is used up; raise it to go on.")
            type(endpoint)._default_manager.filter(pk=endpoint.pk).update(stop_requested=False)
            return jobs.start(
                self.study,
                self.kind,
                params={self.param: endpoint.pk, **({"foreground": True} if foreground else {})},
                message=self.said(self.words.foreground if foreground else self.words.queued),
                queue=not foreground,
            )

    def do_stop(self) -> None:
        """Ask the running job to stop: it hears it within ``endpoints.STOP_TICK`` and cuts off the requests still out
        (recorded as failed, asked again on resume); a job no worker has taken yet never starts (it
        is stopped now, so nothing waits for a worker that may not be there)."""
        type(self.endpoint)._default_manager.filter(pk=self.endpoint.pk).update(stop_requested=True)
        job = self.current_job()
        if job is not None and job.status == Job.Status.QUEUED:
            words = self.said(self.words.stopped_before, summary=self.summary())
            jobs.end(Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED), Job.Status.STOPPED, words)

    @classmethod
    def job_body(cls, job: Job, progress: jobs.Progress) -> jobs.Outcome:
        """The body of the kind's jobs (``annotation.jobs.KINDS``): one run, its progress, tokens and cost on the
        endpoint's page."""
        endpoint = cls.model._default_manager.select_related(*cls.related).get(pk=job.params[cls.param])
        # ``model`` is the subclass's own E (Judge, SystemEndpoint): a ClassVar cannot name a type variable
        return cls(cast(E, endpoint)).run_as_job(progress, foreground=bool(job.params.get("foreground")))

    def run_as_job(self, progress: jobs.Progress, foreground: bool = False) -> jobs.Outcome:
        """One run as a job: stopped when the endpoint's Stop is pressed; a database outage waits (the job resumes
        what is missing); any other error fails the job with the redacted words only (never the traceback, which may
        quote an endpoint echoing the key); a run that used its time slice goes on in a new job behind the others."""
        progress.say(self.said(self.words.running))
        try:
            result = self.do_run(
                progress=progress,
                should_stop=self.stop_requested,
                slice_seconds=float("inf") if foreground else None,
            )
        except Exception as exc:  # the page shows what went wrong; resuming retries what is missing
            if jobs.is_outage(exc):
                raise  # the database was unreachable: the job waits and resumes what is missing
            raise jobs.JobFailed(storable(endpoints.described(exc, self.keys))) from None
        said = self.summary()
        if result.stopped:
            return jobs.Outcome(f"Stopped: {said} Resume to go on.", status=Job.Status.STOPPED)
        if result.sliced:
            jobs.start(
                self.study, self.kind, params={self.param: self.endpoint.pk}, message=self.said(self.words.going_on)
            )
            return jobs.Outcome(
                f"Paused after {settings.SEPLAB_JUDGE_SLICE_SECONDS:.0f} s so that other jobs "
                f"can run: {said} It goes on by itself in the next job."
            )
        if result.budget_reached:
            return jobs.Outcome(f"Request budget reached: {said}")
        return self.do_finish(said)
