"""A system's outputs generated from an OpenAI-compatible endpoint (``SystemEndpoint``): ``samples`` outputs per
item of the study, asked by ``GenerationRun``, an endpoint run (``annotation/endpoint_runs.py``: the ledger, the
budget, stop and resume, the job, shared with LLM judges), and stored as the system's ``Generation`` rows with their
provenance (endpoint, model, parameters, time).

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
import datetime as dt
from collections.abc import Iterator
from typing import Any, cast

from django.db import transaction
from django.db.models import Q, Sum
from openai.types.chat import ChatCompletionMessageParam

from annotation import endpoint_runs, endpoints, jobs
from annotation.endpoint_runs import Reply
from annotation.endpoints import EndpointError
from annotation.errors import ServiceError
from annotation.models import (
    Battle,
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
from annotation.models.arena import in_play, replies_off_ledger
from annotation.plan import planning
from annotation.text import UNSTORABLE, newlines

MAX_OUTPUT_CHARS = 200_000  # a longer reply is unusable (kept out: a rater cannot read it; asked again on resume)
# where a system's outputs come from: fixed once some exist (``check_same_source``, the system's form), and what each
# output's provenance records of its endpoint (never the key)
SOURCE = ("base_url", "model", "system_prompt", "temperature", "max_tokens", "seed")
# an arena's battles whose prompt is sampled in the background; a job param: the run ended its asking, and a battle
# settling from now on starts a run of its own (``generating/samples.py``)
ARENA_SAMPLED = (Battle.Status.READY, Battle.Status.VOTED)
CLOSING = "closing"


# ----------------------------------------------------------------------------------------------------------
# Adding a system


def do_add_endpoint_system(study: Study, name: str, **fields: Any) -> SystemEndpoint:
    """A new system of the study whose outputs come from an endpoint (none yet: start its run). Refused once raters
    have started (the plan is frozen: the system could never be compared)."""
    name = name.strip()
    if not name:
        raise EndpointError("Give the system a name.")
    if len(name) > 200:
        raise EndpointError("A system name has at most 200 characters.")
    if study.systems.filter(name=name).exists():
        raise EndpointError(f"The study already has a system named {name!r}.")
    if study.has_started():
        raise EndpointError(
            "Raters have already started on this study, so its comparison plan is frozen: a new "
            "system could not be compared. Duplicate the study to add one."
        )
    if not study.is_arena and not study.items.exists():  # an arena's items are its battles' prompts, later
        raise EndpointError("The study has no items to generate outputs for.")
    if "system_prompt" in fields:
        fields["system_prompt"] = newlines(fields["system_prompt"] or "")
    with transaction.atomic():
        system = System.objects.create(study=study, name=name)
        endpoint = SystemEndpoint(system=system, **fields)
        endpoints.check_configuration(endpoint)
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
# Generating


@dataclasses.dataclass(frozen=True)
class Request:
    item_id: int
    sample_index: int
    input: str
    conversation: tuple[tuple[str, str], ...] = ()  # a conversation item's turns (role, content); () for a plain input


def provenance(endpoint: SystemEndpoint, reply: Reply[Request], at: dt.datetime) -> dict[str, Any]:
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


class GenerationRun(endpoint_runs.EndpointRun[SystemEndpoint, Request]):
    """A system's ``samples`` outputs for every item of its study; the system joins the plan once all are in."""

    kind = "generate"
    param = "endpoint"
    model = SystemEndpoint
    related = ("system__study",)
    words = endpoint_runs.Words(
        title="Generating {name}'s outputs",
        running="{title}",
        busy="This system's outputs are already being generated; stop the run first.",
        nothing_left="Every item has all its outputs.",
        queued="{title}: queued",
        foreground="{title}: python manage.py generate",
        stopped_before="Stopped before it started: {summary} Resume to go on.",
    )
    DONE, UNUSABLE, PRODUCT = GenerationCall.Status.GENERATED, GenerationCall.Status.UNUSABLE, "generation"
    SETTLED = (GenerationCall.Status.GENERATED,)  # an unusable reply is asked again
    REPLIES = Sum("replies", default=0)  # every reply received, over every attempt
    CARRIED = ("replies", "prompt_tokens", "completion_tokens")

    def __init__(self, endpoint: SystemEndpoint, n_items: int | None = None) -> None:
        super().__init__(endpoint)
        self.n_items = n_items  # the study's items, when the page has counted them already

    @property
    def study(self) -> Study:
        return self.endpoint.system.study

    # What is asked

    def usage(self) -> endpoint_runs.Usage:
        """The ledger's usage; in an arena its replies also count the battle replies off the ledger
        (``models.arena.replies_off_ledger``: follow-up turns, failed battles), as the budget does."""
        used = super().usage()
        if not self.study.is_arena:
            return used
        extra = replies_off_ledger(self.endpoint.system.study_id).get(self.endpoint.system_id, 0)
        return dataclasses.replace(used, replies=used.replies + extra)

    def wanted(self) -> list[tuple[int, int]]:
        """(item, sample index) of every output the system should have, items in the file's order. In an arena:
        the prompts of the battles this system is in, once READY (or voted) and while in play (``arena.in_play``:
        not a ready battle its rater left for a newer one), samples 1..K -- sample 0 is the reply the rater saw
        (docs/arena.md#live-separability-and-sep-elo)."""
        if self.study.is_arena:
            system = self.endpoint.system_id
            battle_items = (
                Battle.objects.filter(
                    Q(comparison__system_a=system) | Q(comparison__system_b=system),
                    in_play(),
                    study_id=self.endpoint.system.study_id,
                    gold__isnull=True,
                )
                .order_by("pk")
                .values_list("item_id", flat=True)
            )
            return [(item, k) for item in battle_items for k in range(1, self.endpoint.samples)]
        items = Item.objects.filter(study_id=self.endpoint.system.study_id).order_by("position")
        return [(item, k) for item in items.values_list("pk", flat=True) for k in range(self.endpoint.samples)]

    def missing(self) -> list[tuple[int, int]]:
        """(item, sample index) of the outputs still missing: the system's outputs are never asked for again."""
        stored = set(Generation.objects.filter(system=self.endpoint.system).values_list("item_id", "sample_index"))
        return [key for key in self.wanted() if key not in stored]

    def do_prepare_pending(self) -> list[tuple[int, int]]:
        return self.missing()  # asking needs nothing created

    def remaining(self) -> int:
        return len(self.missing())

    def requests(self, todo: list[tuple[int, int]]) -> Iterator[Request]:
        inputs = {
            pk: (text, tuple((t["role"], t["content"]) for t in messages or ()))
            for pk, text, messages in Item.objects.filter(pk__in={item for item, _ in todo}).values_list(
                "pk", "input", "messages"
            )
        }
        for item, k in todo:
            yield Request(item, k, *inputs[item])

    @property
    def outputs_wanted(self) -> int:
        if self.study.is_arena:
            return len(self.wanted())
        if self.n_items is None:
            self.n_items = Item.objects.filter(study_id=self.endpoint.system.study_id).count()
        return self.n_items * self.endpoint.samples

    @property
    def done_words(self) -> str:
        wanted, samples = self.outputs_wanted, self.endpoint.samples
        if self.study.is_arena:
            return f"of {wanted} background sample{'s' if wanted != 1 else ''} ({samples - 1} per battle prompt)"
        return f"of {wanted} output{'s' if wanted != 1 else ''} ({samples} per input)"

    @property
    def complete_words(self) -> str:
        samples = self.endpoint.samples
        return f"Every item has its {samples} output{'s' if samples != 1 else ''}."

    # Asking (worker threads: no database)

    def messages(self, request: Request) -> list[ChatCompletionMessageParam]:
        """The system prompt (when there is one), then the item's input as the user's message; for a conversation item,
        its turns (the reply asked for is the judged turn), its leading system or developer turns merged with the
        endpoint's system prompt into one system message and a developer turn sent as a system one (servers and chat
        templates that take one leading system message, and no developer role, are the common case)."""
        if not request.conversation:
            system: list[ChatCompletionMessageParam] = (
                [{"role": "system", "content": self.endpoint.system_prompt}] if self.endpoint.system_prompt else []
            )
            return [*system, {"role": "user", "content": request.input}]
        turns = list(request.conversation)
        leading = [self.endpoint.system_prompt] if self.endpoint.system_prompt else []
        while turns and turns[0][0] in ("system", "developer"):
            leading.append(turns.pop(0)[1])
        merged: list[ChatCompletionMessageParam] = (
            [{"role": "system", "content": "\n\n".join(leading)}] if leading else []
        )
        return merged + [
            cast(ChatCompletionMessageParam, {"role": "system" if role == "developer" else role, "content": content})
            for role, content in turns
        ]

    def options(self, request: Request) -> dict[str, Any]:
        seed = self.endpoint.seed
        return {} if seed is None else {"seed": seed + request.sample_index}

    def read(self, request: Request, completion) -> Reply[Request]:
        response = endpoints.kept_response(completion, None, self.keys)  # the text is stored once, as the output
        if not completion.choices:  # a reply arrived (and counts against the budget) without an output in it
            return Reply(request, response=response, problem="The response has no choices.")
        choice = completion.choices[0]
        notes: list[str] = []
        prompt_tokens, completion_tokens = endpoints.tokens_used(completion, notes, self.keys)
        text, problem = choice.message.content or "", ""
        finish = endpoints.cut(str(choice.finish_reason or ""), 40, self.keys)  # unvalidated: any string
        if finish == "content_filter":
            problem = "The endpoint withheld the reply (its content filter)."
        elif not isinstance(choice.message.content, str):
            refusal = getattr(choice.message, "refusal", None)
            problem = (
                "The reply has no text"
                + (f" (a refusal: {endpoints.cut(refusal, 300, self.keys)})" if refusal else "")
                + "."
            )
        elif len(text) > MAX_OUTPUT_CHARS:
            problem = (
                f"The reply is {len(text):,} characters long; an output may have at most {MAX_OUTPUT_CHARS:,}. "
                f"It began: {endpoints.cut(text, 300, self.keys)!r}"
            )
        elif UNSTORABLE.search(text):
            problem = (
                "The reply holds a character no database can store (NUL or an unpaired surrogate); it is not "
                f"stored altered. It began: {endpoints.cut(text, 300, self.keys)!r}"
            )
        if finish == "length":
            notes.append(f"cut off at the token limit ({self.endpoint.max_tokens} tokens)")
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

    # Recording (the calling thread)

    def ledger_key(self, request: Request) -> dict[str, Any]:
        return {"item_id": request.item_id, "sample_index": request.sample_index}

    def call_fields(self, reply: Reply[Request]) -> dict[str, Any]:
        return {"replies": 0 if reply.error else 1}

    def answer(self, reply: Reply[Request]) -> tuple[str, str, str]:
        return GenerationCall.Status.GENERATED, "", reply.text

    def do_store(self, reply: Reply[Request], answer: str, at: dt.datetime) -> Generation:
        return Generation.objects.create(
            item_id=reply.request.item_id,
            system_id=self.endpoint.system_id,
            sample_index=reply.request.sample_index,
            text=answer,
            text_hash=text_hash(answer),
            n_words=word_count(answer),
            provenance=endpoints.storable(provenance(self.endpoint, reply, at)),
        )

    # The end of a run

    def do_finish(self, said: str) -> jobs.Outcome:
        """Once every output is in, the system joins the plan; otherwise what is still missing. An arena's run
        chains instead (``do_finish_arena``)."""
        if self.study.is_arena:
            return self.do_finish_arena(said)
        included = self.do_include_if_complete()
        left = self.remaining()
        if left:
            return jobs.Outcome(f"{said} {left} output{'s' if left != 1 else ''} still missing: resume to ask again.")
        return jobs.Outcome(f"{said} {included}".strip())

    def do_include_if_complete(self) -> str:
        """Once the system has every output, it joins the study's comparisons: the plan is rebuilt (by the worker
        when it needs embeddings first), unless raters have started or the system is in a system pair already.
        Returns what happened, in words."""
        endpoint = self.endpoint
        study = Study.objects.get(pk=endpoint.system.study_id)
        if study.is_arena or self.remaining():  # an arena's systems are compared from the start, all pairs
            return ""
        if study.comparisons.filter(Q(system_a=endpoint.system_id) | Q(system_b=endpoint.system_id)).exists():
            return "It is compared in the study's plan."
        if study.has_started():
            return "Raters have started, so the plan is frozen: the new outputs are not compared."
        if planning.plan_needs_worker(study):
            try:
                planning.do_queue_plan(study)
            except ServiceError as exc:  # JobLimit: the researcher's plan builds are at their cap
                return (
                    f"The outputs are in, but the plan could not be rebuilt now: {exc} Rebuild it on the settings page."
                )
            return "The plan is being rebuilt with the new system (the outputs are embedded first)."
        try:
            tasks = planning.do_rebuild_plan(study)
        except ServiceError as exc:  # e.g. too many system pairs, or raters started meanwhile: the settings page
            return f"The outputs are in, but the plan could not be rebuilt: {exc}"
        pairs = study.comparisons.filter(Q(system_a=endpoint.system_id) | Q(system_b=endpoint.system_id)).count()
        if not pairs:
            return (
                f"The plan was rebuilt ({tasks} rating tasks), but {endpoint} is in no system pair: it needs a "
                "second system, or (with an explicit list of pairs) its pairs ticked on the settings page."
            )
        return f"The plan was rebuilt with the new system: {tasks} rating tasks, {pairs} of its system pairs."

    def do_finish_arena(self, said: str) -> jobs.Outcome:
        """An arena's sampling run at its end: the separability of the prompts whose samples are now all in is
        computed (selection's "arena_separability" job, coalesced); prompts of battles that became ready while it
        ran, never asked, are asked by a next run started now; otherwise the job is marked ``CLOSING`` under the
        endpoint's row lock, so a battle settling from now on starts a run of its own
        (``generating.samples.do_sample``) rather than join this one. Failed requests are asked again by the next
        battle's run, not in a loop here."""
        endpoint = self.endpoint
        said_more = ""
        try:
            jobs.start(self.study, "arena_separability", message="Arena: repeated prompts and separability")
        except ServiceError as exc:  # JobLimit: computed by the next run's end
            said_more = f" Separability could not be queued now: {exc}"
        with transaction.atomic():
            SystemEndpoint.objects.select_for_update().filter(pk=endpoint.pk).first()
            current = self.current_job()
            asked = set(endpoint.calls.values_list("item_id", "sample_index"))
            never_asked = [key for key in self.missing() if key not in asked]
            if never_asked and current is not None:
                jobs.start(
                    self.study, self.kind, params={self.param: endpoint.pk}, message=self.said(self.words.going_on)
                )
                return jobs.Outcome(f"{said} {len(never_asked)} new battle samples go on in the next run.{said_more}")
            if current is not None:
                Job.objects.filter(pk=current.pk).update(params={**current.params, CLOSING: True})
        left = self.remaining()
        if left:
            said = f"{said} {left} sample{'s' if left != 1 else ''} failed: asked again with the next battle."
        return jobs.Outcome(f"{said}{said_more}")


generate_job = GenerationRun.job_body  # the body of "generate" jobs (annotation.jobs.KINDS)
