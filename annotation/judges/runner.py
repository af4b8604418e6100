"""Running an LLM judge on a study's pairs through an OpenAI-compatible endpoint (``annotation/endpoints.py``: the
official ``openai`` client, its retries, the key, and the run loop generated systems share).

Each pair is judged **in both display orders**. The ``JudgeCall`` ledger holds at most one call per judge, pair
and order (a database constraint), written in the same transaction as the judgment, so a run stopped or
crashed anywhere resumes with exactly the calls that are missing: no pair is judged twice, nothing recorded is
lost; calls that failed after the client's retries are tried again on resume. The requests run on worker
threads; every database write happens on the calling thread.

What a reply means is ``annotation/judges/prompts.py``'s business (strict verdict grammar, P(A) from log-probabilities);
how it is stored is the study's elicitation mode's (``elicitation.Mode.to_model``), as for a person's answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import openai
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from annotation import endpoints, jobs, orientation
from annotation.endpoints import FATAL, EndpointError, RunResult, redact
from annotation.judges import prompts
from annotation.models import (
    Generation,
    Job,
    Judge,
    JudgeCall,
    Judgment,
    Pair,
    Rater,
    Study,
    TaskPair,
)
from annotation.rating import recording
from annotation.text import UNSTORABLE, newlines

JOB_KIND = "judge"
TOP_LOGPROBS = 5
JudgeError = EndpointError  # a judge that cannot run as configured; the message is for the researcher


# ----------------------------------------------------------------------------------------------------------
# Creating and configuring


def do_create_judge(study: Study, name: str, **fields: Any) -> Judge:
    """A judge with its rater (kind judge, source "run"); the name is the rater's, unique in the study."""
    name = name.strip()
    if not name:
        raise JudgeError("Give the judge a name.")
    if study.raters.filter(external_id=name).exists():
        raise JudgeError(f"The study already has a rater named {name!r}.")
    fields["prompt_template"] = newlines(fields.get("prompt_template") or prompts.DEFAULT_TEMPLATE)
    prompts.check_template(fields["prompt_template"])
    with transaction.atomic():
        rater = Rater.objects.create(study=study, external_id=name, kind=Rater.Kind.JUDGE, source=Rater.Source.RUN)
        judge = Judge(study=study, rater=rater, **fields)
        try:
            judge.full_clean()  # every caller, not only the form: ranges, URL, and prices as decimals
        except ValidationError as exc:
            raise JudgeError(
                "; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items())
            ) from exc
        judge.save()
        return judge


# ----------------------------------------------------------------------------------------------------------
# What is judged


def _scope(judge: Judge) -> list[tuple[int, int, int]]:
    """(item, generation a, generation b) of each pair in the judge's scope: those of the tasks released to
    people, or one pair (first samples) of every item for every system pair of the study. Reads only."""
    study = judge.study
    if judge.scope == Judge.Scope.SHOWN:
        return list(
            Pair.objects.filter(pk__in=TaskPair.objects.filter(task__study=study).values("pair_id"))
            .order_by("pk")
            .values_list("item_id", "generation_a_id", "generation_b_id")
        )
    first = {
        (g.item_id, g.system_id): g.pk
        for g in Generation.objects.filter(item__study=study, sample_index=0).only("pk", "item_id", "system_id")
    }
    items = list(study.items.values_list("pk", flat=True))
    wanted = []
    for comparison in study.comparisons.all():
        for item_id in items:
            a, b = first.get((item_id, comparison.system_a_id)), first.get((item_id, comparison.system_b_id))
            if a and b:
                wanted.append((item_id, a, b))
    return wanted


def _settled(judge: Judge) -> set[tuple[int, int, bool]]:
    """(generation a, generation b, a shown first) of the calls that need no new request."""
    return set(
        JudgeCall.objects.filter(judge=judge)
        .exclude(status=JudgeCall.Status.FAILED)
        .values_list("pair__generation_a_id", "pair__generation_b_id", "a_shown_first")
    )


def remaining(judge: Judge) -> int:
    """How many requests are still to go (both orders of each pair in scope, less those settled); reads only,
    for the pages."""
    settled = _settled(judge)
    return sum((a, b, a_first) not in settled for _, a, b in _scope(judge) for a_first in (True, False))


def pending(judge: Judge) -> list[tuple[Pair, bool]]:
    """(pair, a shown first) still to ask, the pairs of an all-items scope created where missing."""
    wanted, settled = _scope(judge), _settled(judge)
    if judge.scope == Judge.Scope.ALL:
        Pair.objects.bulk_create(
            [Pair(item_id=i, generation_a_id=a, generation_b_id=b) for i, a, b in wanted], ignore_conflicts=True
        )
    pairs = {
        (p.generation_a_id, p.generation_b_id): p
        for p in Pair.objects.filter(generation_a_id__in={a for _, a, _ in wanted})
    }
    return [
        (pairs[(a, b)], a_first) for _, a, b in wanted for a_first in (True, False) if (a, b, a_first) not in settled
    ]


@dataclasses.dataclass(frozen=True)
class Usage:
    replies: int  # judged + unparseable: what the budget counts
    judged: int
    unparseable: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal  # US$

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def usage(judge: Judge) -> Usage:
    S = JudgeCall.Status
    row = JudgeCall.objects.filter(judge=judge).aggregate(
        judged=Count("id", filter=Q(status=S.JUDGED)),
        unparseable=Count("id", filter=Q(status=S.UNPARSEABLE)),
        failed=Count("id", filter=Q(status=S.FAILED)),
        prompt=Sum("prompt_tokens", default=0),
        completion=Sum("completion_tokens", default=0),
    )
    return Usage(
        row["judged"] + row["unparseable"],
        row["judged"],
        row["unparseable"],
        row["failed"],
        row["prompt"],
        row["completion"],
        endpoints.cost(judge, row["prompt"], row["completion"]),
    )


# ----------------------------------------------------------------------------------------------------------
# Asking (worker threads: no database)


@dataclasses.dataclass(frozen=True)
class Request:
    pair_id: int
    a_shown_first: bool
    prompt: str


@dataclasses.dataclass(frozen=True)
class Reply:
    request: Request
    text: str = ""
    response: dict | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: tuple[prompts.Token, ...] = ()
    error: str = ""
    problem: str = ""  # why the reply cannot be read though it arrived (cut off, too long): unparseable


MAX_REPLY_CHARS = 100_000  # a longer reply is kept cut to this and is unparseable (a verdict is a line)


def _trimmed(response: dict, text: str) -> dict:
    """The response as kept: the reply's text is stored once, in ``JudgeCall.reply``, so the copy inside the
    response is cut to the same length."""
    for choice in response.get("choices") or []:
        message = choice.get("message") or {}
        if isinstance(message.get("content"), str) and len(message["content"]) > len(text):
            message["content"] = text
            choice["logprobs"] = None  # as long as the reply: dropped with it
    return response


def ask(client: openai.OpenAI, judge: Judge, request: Request) -> Reply:
    """One chat completion; errors that survive the client's retries become the reply's ``error``, except the
    ones no retry mends (``FATAL``), which are raised."""
    extra = {"logprobs": True, "top_logprobs": TOP_LOGPROBS} if judge.logprobs else {}
    try:
        completion = client.chat.completions.create(
            model=judge.model,
            messages=[{"role": "user", "content": request.prompt}],
            temperature=judge.temperature,
            max_tokens=judge.max_tokens,
            n=1,
            **extra,
        )
    except FATAL:
        raise
    except openai.OpenAIError as exc:
        return Reply(request, error=f"{type(exc).__name__}: {exc}")
    try:
        return _read(judge, request, completion)
    except endpoints.MALFORMED as exc:  # paid for, but not readable: unparseable, as any reply that says nothing
        return Reply(request, problem=endpoints.malformed(exc))


def _read(judge: Judge, request: Request, completion) -> Reply:
    if not completion.choices:
        return Reply(
            request,
            response=endpoints.storable(completion.model_dump(mode="json", warnings=False)),
            error="The response has no choices.",
        )
    choice = completion.choices[0]
    tokens: tuple[prompts.Token, ...] = ()
    if choice.logprobs is not None and choice.logprobs.content:
        tokens = tuple((t.token, tuple((a.token, a.logprob) for a in t.top_logprobs)) for t in choice.logprobs.content)
    used, notes = completion.usage, []
    prompt_tokens = endpoints.token_count(used.prompt_tokens if used else None, "prompt_tokens", notes)
    completion_tokens = endpoints.token_count(used.completion_tokens if used else None, "completion_tokens", notes)
    text, problem = choice.message.content or "", ""
    if choice.finish_reason == "length":
        problem = (
            f"The reply was cut off at the token limit ({judge.max_tokens} tokens): its last line is not "
            "the judge's verdict. Raise 'Most tokens per reply'."
        )
    elif choice.finish_reason == "content_filter":
        problem = "The endpoint withheld the reply (its content filter)."
    if len(text) > MAX_REPLY_CHARS:
        problem = f"The reply is {len(text):,} characters long; a verdict is one line (kept: the first 100,000)."
        text, tokens = text[:MAX_REPLY_CHARS], ()
    if UNSTORABLE.search(text):  # untrusted: kept readable, never read as a verdict
        problem = (
            "The reply holds a character no database can store (NUL or an unpaired surrogate); kept with "
            "each replaced by U+FFFD."
        )
        text, tokens = UNSTORABLE.sub("\ufffd", text), ()
    response = _trimmed(completion.model_dump(mode="json", warnings=False), text)
    if notes:
        response["seplab_notes"] = notes
    response = endpoints.storable(response)  # untrusted: every string, notes quoting it included
    return Reply(
        request,
        text=text,
        response=response,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        tokens=tokens,
        problem=problem,
    )


# ----------------------------------------------------------------------------------------------------------
# Recording (the calling thread)


def call_key(judge: Judge, pair_id: int, a_shown_first: bool) -> str:
    """The judgment's idempotency key: one per judge, pair and order."""
    return f"judge-{judge.pk}-{pair_id}-{'ab' if a_shown_first else 'ba'}"


def record(judge: Judge, reply: Reply) -> JudgeCall | None:
    """Store one reply: a judgment and its call in one transaction, an unparseable reply or a failure as a call.
    None when the pair and order were already settled (another run got there first)."""
    request, offer = reply.request, prompts.Offer.of(judge.study)
    fields: dict[str, Any] = {
        "reply": reply.text,
        "response": reply.response,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "created": timezone.now(),
        "problem": "",
        "judgment": None,
    }
    verdict = None
    if reply.error:
        fields.update(status=JudgeCall.Status.FAILED, problem=endpoints.storable(redact(reply.error, judge)))
    elif reply.problem:
        fields.update(status=JudgeCall.Status.UNPARSEABLE, problem=endpoints.storable(reply.problem))
    else:
        try:
            verdict = prompts.parse(offer, reply.text)
            fields["status"] = JudgeCall.Status.JUDGED
        except prompts.Unparseable as exc:
            fields.update(status=JudgeCall.Status.UNPARSEABLE, problem=str(exc))
    try:
        with transaction.atomic():
            previous = (
                JudgeCall.objects.select_for_update()
                .filter(judge=judge, pair_id=request.pair_id, a_shown_first=request.a_shown_first)
                .first()
            )
            if previous is not None and previous.status != JudgeCall.Status.FAILED:
                return None
            if verdict is not None:
                fields["judgment"] = _judgment(judge, request, verdict, reply)
            if previous is not None:
                for name, value in fields.items():
                    setattr(previous, name, value)
                previous.save()
                return previous
            return JudgeCall.objects.create(
                judge=judge, pair_id=request.pair_id, a_shown_first=request.a_shown_first, **fields
            )
    except IntegrityError:  # a concurrent run recorded this pair and order in between
        return None


def _judgment(judge: Judge, request: Request, verdict: prompts.Verdict, reply: Reply) -> Judgment:
    p_first = prompts.probability_first(reply.tokens, verdict.label_offset)
    probability_a = None if p_first is None else orientation.probability_first(p_first, request.a_shown_first)
    return recording.do_record_verdict(
        judge.study,
        judge.rater,
        request.pair_id,
        request.a_shown_first,
        verdict.answer,
        probability_a,
        call_key(judge, request.pair_id, request.a_shown_first),
    )


# ----------------------------------------------------------------------------------------------------------
# A run


def requests(judge: Judge, todo: list[tuple[Pair, bool]]) -> Iterator[Request]:
    offer = prompts.Offer.of(judge.study)
    pairs = {
        p.pk: p
        for p in Pair.objects.filter(pk__in={p.pk for p, _ in todo}).select_related(
            "item", "generation_a", "generation_b"
        )
    }
    for pair, a_first in todo:
        p = pairs[pair.pk]
        first, second = orientation.in_display_order(p.generation_a.text, p.generation_b.text, a_first)
        yield Request(p.pk, a_first, prompts.render_prompt(judge.prompt_template, offer, p.item.input, first, second))


def run(
    judge: Judge,
    *,
    progress: Callable[[int, int], None] = lambda done, total: None,
    should_stop: Callable[[], bool] = lambda: False,
    slice_seconds: float | None = None,
) -> RunResult:
    """Ask for every pending call within the budget (``endpoints.run``: ``max_concurrency`` at a time, each reply
    recorded as it arrives, stop, time slices and cut-offs recorded as failed, asked again on resume)."""
    result = RunResult()
    todo = endpoints.within_budget(judge, pending(judge), usage(judge).replies, result)
    talk = endpoints.Conversation(
        ask=lambda client, request: ask(client, judge, request),
        record=lambda reply: record(judge, reply) is not None,
        failure=lambda request, why: Reply(request, error=why),
    )
    return endpoints.run(
        judge,
        requests(judge, todo),
        len(todo),
        talk,
        progress=progress,
        should_stop=should_stop,
        slice_seconds=slice_seconds,
        result=result,
    )


# ----------------------------------------------------------------------------------------------------------
# Jobs: start, stop, resume


def current_job(judge: Judge) -> Job | None:
    return Job.objects.filter(study=judge.study, kind=JOB_KIND, params__judge=judge.pk).order_by("-pk").first()


def do_start_judge(judge: Judge) -> Job:
    """Queue a run (a first run or a resume): refused while one is live; a running job whose worker stopped
    answering is marked failed first."""
    with transaction.atomic():
        Judge.objects.select_for_update().filter(pk=judge.pk).first()
        return endpoints.do_start(
            judge,
            JOB_KIND,
            judge.study_id,
            {"judge": judge.pk},
            current_job(judge),
            busy="This judge is already running; stop it first.",
            nothing_left=None if pending(judge) else "Every pair of the judge's scope is judged in both orders.",
            replies=usage(judge).replies,
            message=f"Judge {judge} queued",
        )


def continue_later(judge: Judge) -> Job:
    """Queue the rest of a run that used its time slice: a new job behind the others already waiting."""
    job = Job.objects.create(
        study=judge.study,
        kind=JOB_KIND,
        params={"judge": judge.pk},
        message=f"Judge {judge} goes on after the jobs queued before it",
    )
    return jobs.enqueue(job)


def do_stop_judge(judge: Judge) -> None:
    """Ask the running job to stop after the replies in flight; a job no worker has taken yet never starts."""
    Judge.objects.filter(pk=judge.pk).update(stop_requested=True)
    endpoints.stop_queued(current_job(judge), "Stopped before it started. Resume to go on.")


def judge_job(job: Job, progress: jobs.Progress) -> jobs.Outcome:
    """One run of an LLM judge (``start``): progress, tokens and cost on the judges page."""
    judge = Judge.objects.select_related("study", "rater").get(pk=job.params["judge"])
    progress.say(f"Judge {judge} is judging")
    _, outcome = endpoints.run_as_job(
        judge,
        lambda should_stop: run(judge, progress=progress, should_stop=should_stop),
        lambda: summary(judge),
        lambda: continue_later(judge),
    )
    return outcome or jobs.Outcome(summary(judge))


def summary(judge: Judge) -> str:
    used = usage(judge)
    return (
        f"{used.judged} judged, {used.unparseable} unparseable, {used.failed} failed after retries; "
        f"{used.tokens:,} tokens, ${used.cost}."
    )
