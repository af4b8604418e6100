"""A system's outputs generated from an OpenAI-compatible endpoint (``SystemEndpoint``): ``samples`` outputs per
item of the study, asked through ``annotation/endpoints.py`` (the official client, its retries, the run loop judges
share) and stored as the system's ``Generation`` rows with their provenance (endpoint, model, parameters, time).

The ``GenerationCall`` ledger holds at most one call per system, item and sample (a database constraint), written
in the same transaction as the output, and no output is stored twice (``generation_unique_sample``): a run stopped or
crashed anywhere resumes with exactly the outputs that are missing; failed and unusable calls are asked again on
resume. A system joins the study's comparisons once every item has all its samples (``planning.comparison_systems``):
the plan is then rebuilt, if raters have not started.

Model outputs are untrusted text: they are stored as received (one line ending, ``annotation/text.py``) and shown
escaped; a character no database can store (NUL, a lone surrogate) makes the reply unusable rather than altered.
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

from annotation import endpoints, jobs
from annotation.endpoints import FATAL, EndpointError, RunResult, redact
from annotation.errors import ServiceError
from annotation.models import (
    Generation,
    GenerationCall,
    Item,
    Job,
    Study,
    System,
    SystemEndpoint,
    text_hash,
    word_count,
)
from annotation.plan import planning
from annotation.text import UNSTORABLE, newlines

JOB_KIND = "generate"
MAX_OUTPUT_CHARS = 200_000  # a longer reply is unusable (kept out: a rater cannot read it; asked again on resume)
# where a system's outputs come from: fixed once some exist (``check_same_source``, the system's form), and what each
# output's provenance records of its endpoint (never the key)
SOURCE = ("base_url", "model", "system_prompt", "temperature", "max_tokens", "seed")

GenerationError = EndpointError  # an endpoint system that cannot run as configured; the message is for the researcher


# ----------------------------------------------------------------------------------------------------------
# Adding a system


def do_add_endpoint_system(study: Study, name: str, **fields: Any) -> SystemEndpoint:
    """A new system of the study whose outputs come from an endpoint (none yet: start its run). Refused once raters
    have started (the plan is frozen: the system could never be compared)."""
    name = name.strip()
    if not name:
        raise GenerationError("Give the system a name.")
    if len(name) > 200:
        raise GenerationError("A system name has at most 200 characters.")
    if study.systems.filter(name=name).exists():
        raise GenerationError(f"The study already has a system named {name!r}.")
    if study.has_started():
        raise GenerationError(
            "Raters have already started on this study, so its comparison plan is frozen: a new "
            "system could not be compared. Duplicate the study to add one."
        )
    if not study.items.exists():
        raise GenerationError("The study has no items to generate outputs for.")
    if "system_prompt" in fields:
        fields["system_prompt"] = newlines(fields["system_prompt"] or "")
    with transaction.atomic():
        system = System.objects.create(study=study, name=name)
        endpoint = SystemEndpoint(system=system, **fields)
        try:
            endpoint.full_clean()  # every caller, not only the form: ranges, URL, key variable, prices
        except ValidationError as exc:
            raise GenerationError(
                "; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items())
            ) from exc
        endpoint.save()
        return endpoint


def check_same_source(endpoint: SystemEndpoint, **fields: Any) -> list[str]:
    """What would change where a system's outputs come from (endpoint, model, how it is asked) once some are stored:
    the outputs of one system must all come from one configuration (their provenance says which)."""
    if not Generation.objects.filter(system=endpoint.system).exists():
        return []
    return [
        f"{name}: {getattr(endpoint, name)!r} -> {value!r}"
        for name, value in fields.items()
        if name in SOURCE and getattr(endpoint, name) != value
    ]


# ----------------------------------------------------------------------------------------------------------
# What is asked


@dataclasses.dataclass(frozen=True)
class Request:
    item_id: int
    sample_index: int
    input: str


@dataclasses.dataclass(frozen=True)
class Reply:
    request: Request
    text: str = ""
    response: dict | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = ""
    notes: tuple[str, ...] = ()
    error: str = ""
    problem: str = ""  # why the reply arrived but cannot be an output: unusable, asked again on resume


def wanted(endpoint: SystemEndpoint) -> list[tuple[int, int]]:
    """(item, sample index) of every output the system should have, items in the file's order."""
    items = Item.objects.filter(study_id=endpoint.system.study_id).order_by("position").values_list("pk", flat=True)
    return [(item, k) for item in items for k in range(endpoint.samples)]


def stored(endpoint: SystemEndpoint) -> set[tuple[int, int]]:
    """(item, sample index) of the outputs the system has: never asked for again."""
    return set(Generation.objects.filter(system=endpoint.system).values_list("item_id", "sample_index"))


def remaining(endpoint: SystemEndpoint) -> int:
    have = stored(endpoint)
    return sum(key not in have for key in wanted(endpoint))


def pending(endpoint: SystemEndpoint) -> list[tuple[int, int]]:
    have = stored(endpoint)
    return [key for key in wanted(endpoint) if key not in have]


def requests(todo: list[tuple[int, int]]) -> Iterator[Request]:
    inputs = dict(Item.objects.filter(pk__in={item for item, _ in todo}).values_list("pk", "input"))
    for item, k in todo:
        yield Request(item, k, inputs[item])


def messages(endpoint: SystemEndpoint, request: Request) -> list[dict[str, str]]:
    """The chat messages of one request: the system prompt (when there is one), then the item's input."""
    system = [{"role": "system", "content": endpoint.system_prompt}] if endpoint.system_prompt else []
    return [*system, {"role": "user", "content": request.input}]


def ask(client: openai.OpenAI, endpoint: SystemEndpoint, request: Request) -> Reply:
    """One chat completion; errors that survive the client's retries become the reply's ``error``, except the ones no
    retry mends (``FATAL``), which are raised."""
    extra = {} if endpoint.seed is None else {"seed": endpoint.seed + request.sample_index}
    try:
        completion = client.chat.completions.create(
            model=endpoint.model,
            messages=messages(endpoint, request),
            temperature=endpoint.temperature,
            max_tokens=endpoint.max_tokens,
            n=1,
            **extra,
        )
    except FATAL:
        raise
    except openai.OpenAIError as exc:
        return Reply(request, error=f"{type(exc).__name__}: {exc}")
    try:
        return _read(endpoint, request, completion)
    except endpoints.MALFORMED as exc:  # paid for, but not readable: unusable, asked again on resume
        return Reply(request, problem=endpoints.malformed(exc))


def _read(endpoint: SystemEndpoint, request: Request, completion) -> Reply:
    response = endpoints.storable(completion.model_dump(mode="json", warnings=False))
    if not completion.choices:  # a reply arrived (and counts against the budget) without an output in it
        return Reply(request, response=response, problem="The response has no choices.")
    choice = completion.choices[0]
    used, notes = completion.usage, []
    prompt_tokens = endpoints.token_count(used.prompt_tokens if used else None, "prompt_tokens", notes)
    completion_tokens = endpoints.token_count(used.completion_tokens if used else None, "completion_tokens", notes)
    text, problem = choice.message.content or "", ""
    finish = choice.finish_reason or ""
    if finish == "content_filter":
        problem = "The endpoint withheld the reply (its content filter)."
    elif not isinstance(choice.message.content, str):
        problem = (
            "The reply has no text"
            + (f" (a refusal: {choice.message.refusal[:300]})" if getattr(choice.message, "refusal", None) else "")
            + "."
        )
    elif len(text) > MAX_OUTPUT_CHARS:
        problem = (
            f"The reply is {len(text):,} characters long; an output may have at most {MAX_OUTPUT_CHARS:,}. "
            f"It began: {text[:300]!r}"
        )
    elif UNSTORABLE.search(text):
        problem = (
            "The reply holds a character no database can store (NUL or an unpaired surrogate); it is not "
            f"stored altered. It began: {text[:300]!r}"
        )
    if finish == "length":
        notes.append(f"cut off at the token limit ({endpoint.max_tokens} tokens)")
    for choice_body in response.get("choices") or []:  # the text is stored once, as the output
        if isinstance((choice_body.get("message") or {}).get("content"), str):
            choice_body["message"]["content"] = None
    return Reply(
        request,
        text="" if problem else newlines(text),
        response=response,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        finish_reason=str(finish),
        notes=tuple(notes),
        problem=problem,
    )


# ----------------------------------------------------------------------------------------------------------
# Recording (the calling thread)


def provenance(endpoint: SystemEndpoint, reply: Reply, at) -> dict[str, Any]:
    """Where one output came from: the endpoint, the model asked and the one that answered, the parameters, the seed,
    the time, why it ended and the endpoint's notes."""
    response = reply.response or {}
    return {
        "endpoint": endpoint.base_url,
        "model": endpoint.model,
        "served_by": response.get("model"),
        "response_id": response.get("id"),
        "parameters": {
            "temperature": endpoint.temperature,
            "max_tokens": endpoint.max_tokens,
            "system_prompt": endpoint.system_prompt,
            "seed": None if endpoint.seed is None else endpoint.seed + reply.request.sample_index,
        },
        "time": at.isoformat(),
        "finish_reason": reply.finish_reason,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        **({"notes": list(reply.notes)} if reply.notes else {}),
    }


def record(endpoint: SystemEndpoint, reply: Reply) -> GenerationCall | None:
    """Store one reply: the output and its call in one transaction, an unusable reply or a failure as a call. None
    when the output was already stored (another run got there first)."""
    request, at = reply.request, timezone.now()
    fields: dict[str, Any] = {
        "response": reply.response,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "created": at,
        "problem": "",
        "generation": None,
        "replies": 0 if reply.error else 1,
    }
    if reply.error:
        fields.update(status=GenerationCall.Status.FAILED, problem=redact(reply.error, endpoint))
    elif reply.problem:
        fields.update(status=GenerationCall.Status.UNUSABLE, problem=reply.problem)
    else:
        fields["status"] = GenerationCall.Status.GENERATED
    fields["problem"] = endpoints.storable(fields["problem"])  # it may quote the endpoint's words
    try:
        with transaction.atomic():
            previous = (
                GenerationCall.objects.select_for_update()
                .filter(endpoint=endpoint, item_id=request.item_id, sample_index=request.sample_index)
                .first()
            )
            if previous is not None and previous.status == GenerationCall.Status.GENERATED:
                return None
            if fields["status"] == GenerationCall.Status.GENERATED:
                fields["generation"] = Generation.objects.create(
                    item_id=request.item_id,
                    system_id=endpoint.system_id,
                    sample_index=request.sample_index,
                    text=reply.text,
                    text_hash=text_hash(reply.text),
                    n_words=word_count(reply.text),
                    provenance=endpoints.storable(provenance(endpoint, reply, at)),
                )
            if previous is not None:  # asked again: what every attempt was paid for adds up
                for name in ("replies", "prompt_tokens", "completion_tokens"):
                    fields[name] += getattr(previous, name)
                for name, value in fields.items():
                    setattr(previous, name, value)
                previous.save()
                return previous
            return GenerationCall.objects.create(
                endpoint=endpoint, item_id=request.item_id, sample_index=request.sample_index, **fields
            )
    except IntegrityError:  # a concurrent run stored this output in between
        return None


@dataclasses.dataclass(frozen=True)
class Usage:
    replies: int  # every reply received, over every attempt: what the budget counts
    generated: int
    unusable: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal  # US$

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def usage(endpoint: SystemEndpoint) -> Usage:
    S = GenerationCall.Status
    row = GenerationCall.objects.filter(endpoint=endpoint).aggregate(
        generated=Count("id", filter=Q(status=S.GENERATED)),
        unusable=Count("id", filter=Q(status=S.UNUSABLE)),
        failed=Count("id", filter=Q(status=S.FAILED)),
        replies=Sum("replies", default=0),
        prompt=Sum("prompt_tokens", default=0),
        completion=Sum("completion_tokens", default=0),
    )
    return Usage(
        row["replies"],
        row["generated"],
        row["unusable"],
        row["failed"],
        row["prompt"],
        row["completion"],
        endpoints.cost(endpoint, row["prompt"], row["completion"]),
    )


# ----------------------------------------------------------------------------------------------------------
# A run


def run(
    endpoint: SystemEndpoint,
    *,
    progress: Callable[[int, int], None] = lambda done, total: None,
    should_stop: Callable[[], bool] = lambda: False,
    slice_seconds: float | None = None,
) -> RunResult:
    """Ask for every missing output within the budget (``endpoints.run``: ``max_concurrency`` at a time, each reply
    recorded as it arrives; stop, time slices and cut-offs recorded as failed and asked again on resume)."""
    result = RunResult()
    todo = endpoints.within_budget(endpoint, pending(endpoint), usage(endpoint).replies, result)
    talk = endpoints.Conversation(
        ask=lambda client, request: ask(client, endpoint, request),
        record=lambda reply: record(endpoint, reply) is not None,
        failure=lambda request, why: Reply(request, error=why),
    )
    return endpoints.run(
        endpoint,
        requests(todo),
        len(todo),
        talk,
        progress=progress,
        should_stop=should_stop,
        slice_seconds=slice_seconds,
        result=result,
    )


def do_include_if_complete(endpoint: SystemEndpoint) -> str:
    """Once the system has every output, it joins the study's comparisons: the plan is rebuilt (by the worker when
    it needs embeddings first), unless raters have started or the system is in a system pair already. Returns what
    happened, in words."""
    study = Study.objects.get(pk=endpoint.system.study_id)
    if remaining(endpoint):
        return ""
    if study.comparisons.filter(Q(system_a=endpoint.system_id) | Q(system_b=endpoint.system_id)).exists():
        return "It is compared in the study's plan."
    if study.has_started():
        return "Raters have started, so the plan is frozen: the new outputs are not compared."
    if planning.plan_needs_worker(study):
        planning.do_queue_plan(study)
        return "The plan is being rebuilt with the new system (the outputs are embedded first)."
    try:
        tasks = planning.do_rebuild_plan(study)
    except ServiceError as exc:  # e.g. too many system pairs, or raters started meanwhile: the settings page mends it
        return f"The outputs are in, but the plan could not be rebuilt: {exc}"
    pairs = study.comparisons.filter(Q(system_a=endpoint.system_id) | Q(system_b=endpoint.system_id)).count()
    if not pairs:
        return (
            f"The plan was rebuilt ({tasks} rating tasks), but {endpoint} is in no system pair: it needs a "
            "second system, or (with an explicit list of pairs) its pairs ticked on the settings page."
        )
    return f"The plan was rebuilt with the new system: {tasks} rating tasks, {pairs} of its system pairs."


# ----------------------------------------------------------------------------------------------------------
# Jobs: start, stop, resume


def current_job(endpoint: SystemEndpoint) -> Job | None:
    return (
        Job.objects.filter(study_id=endpoint.system.study_id, kind=JOB_KIND, params__endpoint=endpoint.pk)
        .order_by("-pk")
        .first()
    )


def do_start_generation(endpoint: SystemEndpoint, foreground: bool = False) -> Job:
    """Queue a run (a first run or a resume): refused while one is live -- a worker's, or ``manage.py generate``'s,
    which runs its job in the foreground (``foreground``: not queued for a worker, no time slices) -- so two runs
    never pay for the same outputs; a running job whose worker stopped answering is marked failed first."""
    with transaction.atomic():
        SystemEndpoint.objects.select_for_update().filter(pk=endpoint.pk).first()
        return endpoints.do_start(
            endpoint,
            JOB_KIND,
            endpoint.system.study_id,
            {"endpoint": endpoint.pk, "foreground": foreground},
            current_job(endpoint),
            busy="This system's outputs are already being generated; stop the run first.",
            nothing_left=None if pending(endpoint) else "Every item has all its outputs.",
            replies=usage(endpoint).replies,
            enqueue=not foreground,
            message=f"Generating {endpoint}'s outputs: " + ("python manage.py generate" if foreground else "queued"),
        )


def do_stop_generation(endpoint: SystemEndpoint) -> None:
    """Ask the running job to stop after the replies in flight; a job no worker has taken yet never starts."""
    SystemEndpoint.objects.filter(pk=endpoint.pk).update(stop_requested=True)
    endpoints.stop_queued(current_job(endpoint), f"Stopped before it started: {summary(endpoint)} Resume to go on.")


def summary(endpoint: SystemEndpoint) -> str:
    used = usage(endpoint)
    return (
        f"{used.generated} generated, {used.unusable} unusable, {used.failed} failed after retries; "
        f"{used.tokens:,} tokens, ${used.cost}."
    )


def generate_job(job: Job, progress: jobs.Progress) -> jobs.Outcome:
    """One run of a system's generation (``do_start_generation``): progress, tokens and cost on the systems page;
    the system joins the plan once every output is in."""
    endpoint = SystemEndpoint.objects.select_related("system").get(pk=job.params["endpoint"])
    progress.say(f"Generating {endpoint}'s outputs")
    slice_seconds = float("inf") if job.params.get("foreground") else None
    _, outcome = endpoints.run_as_job(
        endpoint,
        lambda should_stop: run(endpoint, progress=progress, should_stop=should_stop, slice_seconds=slice_seconds),
        lambda: summary(endpoint),
        lambda: jobs.enqueue(
            Job.objects.create(
                study_id=endpoint.system.study_id,
                kind=JOB_KIND,
                params={"endpoint": endpoint.pk},
                message=f"Generating {endpoint}'s outputs goes on after the jobs queued before it",
            )
        ),
    )
    if outcome is not None:
        return outcome
    said = summary(endpoint)
    included = do_include_if_complete(endpoint)
    left = remaining(endpoint)
    if left:
        return jobs.Outcome(f"{said} {left} output{'s' if left != 1 else ''} still missing: resume to ask again.")
    return jobs.Outcome(f"{said} {included}".strip())
