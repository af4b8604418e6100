"""Running an LLM judge on a study's pairs through an OpenAI-compatible endpoint: ``JudgeRun``, an endpoint run
(``annotation/endpoint_runs.py``: the ledger, the budget, stop and resume, the job, shared with generated systems).

Each pair is judged **in both display orders**. The ``JudgeCall`` ledger holds at most one call per judge, pair
and order (a database constraint), written in the same transaction as the judgment, so a run stopped or
crashed anywhere resumes with exactly the calls that are missing: no pair is judged twice, nothing recorded is
lost; calls that failed after the client's retries are tried again on resume, an unparseable reply is not.

What a reply means is ``annotation/judges/prompts.py``'s business (strict verdict grammar, P(A) from log-probabilities);
how it is stored is the study's elicitation mode's (``elicitation.Mode.to_model``), as for a person's answer.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from functools import cached_property
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from openai.types.chat import ChatCompletionMessageParam

from annotation import endpoint_runs, endpoints, orientation
from annotation.endpoint_runs import Reply
from annotation.endpoints import EndpointError
from annotation.judges import prompts
from annotation.models import Generation, Judge, JudgeCall, Judgment, Pair, Rater, Study, TaskPair
from annotation.rating import recording
from annotation.text import UNSTORABLE, newlines

TOP_LOGPROBS = 5
MAX_REPLY_CHARS = 100_000  # a longer reply is kept cut to this and is unparseable (a verdict is a line)


def do_create_judge(study: Study, name: str, **fields: Any) -> Judge:
    """A judge with its rater (kind judge, source "run"); the name is the rater's, unique in the study."""
    name = name.strip()
    if not name:
        raise EndpointError("Give the judge a name.")
    if study.raters.filter(external_id=name).exists():
        raise EndpointError(f"The study already has a rater named {name!r}.")
    fields["prompt_template"] = newlines(fields.get("prompt_template") or prompts.DEFAULT_TEMPLATE)
    prompts.check_template(fields["prompt_template"])
    with transaction.atomic():
        rater = Rater.objects.create(study=study, external_id=name, kind=Rater.Kind.JUDGE, source=Rater.Source.RUN)
        judge = Judge(study=study, rater=rater, **fields)
        endpoints.check_configuration(judge)
        judge.save()
        return judge


@dataclasses.dataclass(frozen=True)
class Request:
    pair_id: int
    a_shown_first: bool
    prompt: str


def call_key(judge: Judge, pair_id: int, a_shown_first: bool) -> str:
    """The judgment's idempotency key: one per judge, pair and order."""
    return f"judge-{judge.pk}-{pair_id}-{'ab' if a_shown_first else 'ba'}"


class JudgeRun(endpoint_runs.EndpointRun[Judge, Request]):
    """A judge's verdicts on the pairs of its scope, each in both display orders."""

    kind = "judge"
    param = "judge"
    model = Judge
    related = ("study", "rater")
    words = endpoint_runs.Words(
        title="Judge {name}",
        running="{title} is judging",
        busy="This judge is already running; stop it first.",
        nothing_left="Every pair of the judge's scope is judged in both orders.",
    )
    DONE, UNUSABLE, PRODUCT = JudgeCall.Status.JUDGED, JudgeCall.Status.UNPARSEABLE, "judgment"
    SETTLED = (JudgeCall.Status.JUDGED, JudgeCall.Status.UNPARSEABLE)  # an unparseable reply is not asked again
    REPLIES = Count("id", filter=Q(status__in=SETTLED))

    @property
    def study(self) -> Study:
        return self.endpoint.study

    @cached_property
    def offer(self) -> prompts.Offer:
        return prompts.Offer.of(self.study)

    # What is judged

    def scope(self) -> list[tuple[int, int, int]]:
        """(item, generation a, generation b) of each pair in the judge's scope: those of the tasks released to
        people, or one pair (first samples) of every item for every system pair of the study. Reads only."""
        study = self.study
        if self.endpoint.scope == Judge.Scope.SHOWN:
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

    def settled(self) -> set[tuple[int, int, bool]]:
        """(generation a, generation b, a shown first) of the calls that need no new request."""
        return set(
            self.endpoint.calls.filter(status__in=self.SETTLED).values_list(
                "pair__generation_a_id", "pair__generation_b_id", "a_shown_first"
            )
        )

    def remaining(self) -> int:
        """Both orders of each pair in scope, less those settled; reads only, for the pages."""
        settled = self.settled()
        return sum((a, b, a_first) not in settled for _, a, b in self.scope() for a_first in (True, False))

    def do_prepare_pending(self) -> list[tuple[Pair, bool]]:
        """(pair, a shown first) still to ask, the pairs of an all-items scope created where missing."""
        wanted, settled = self.scope(), self.settled()
        if self.endpoint.scope == Judge.Scope.ALL:
            Pair.objects.bulk_create(
                [Pair(item_id=i, generation_a_id=a, generation_b_id=b) for i, a, b in wanted], ignore_conflicts=True
            )
        pairs = {
            (p.generation_a_id, p.generation_b_id): p
            for p in Pair.objects.filter(generation_a_id__in={a for _, a, _ in wanted})
        }
        return [
            (pairs[(a, b)], a_first)
            for _, a, b in wanted
            for a_first in (True, False)
            if (a, b, a_first) not in settled
        ]

    def requests(self, todo: list[tuple[Pair, bool]]) -> Iterator[Request]:
        pairs = Pair.objects.filter(pk__in={p.pk for p, _ in todo}).select_related(
            "item", "generation_a", "generation_b"
        )
        loaded = {p.pk: p for p in pairs}
        for pair, a_first in todo:
            p = loaded[pair.pk]
            first, second = orientation.in_display_order(p.generation_a.text, p.generation_b.text, a_first)
            prompt = prompts.render_prompt(self.endpoint.prompt_template, self.offer, p.item.input, first, second)
            yield Request(p.pk, a_first, prompt)

    # Asking (worker threads: no database)

    def messages(self, request: Request) -> list[ChatCompletionMessageParam]:
        return [{"role": "user", "content": request.prompt}]

    def options(self, request: Request) -> dict[str, Any]:
        return {"logprobs": True, "top_logprobs": TOP_LOGPROBS} if self.endpoint.logprobs else {}

    def read(self, request: Request, completion) -> Reply[Request]:
        if not completion.choices:
            return Reply(
                request,
                response=endpoints.kept_response(completion, None, self.keys),
                error="The response has no choices.",
            )
        choice = completion.choices[0]
        notes: list[str] = []
        # each token and its top log-probabilities, as a reply keeps them (``Reply.tokens``)
        tokens: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()
        if choice.logprobs is not None and choice.logprobs.content:
            tokens = tuple(
                (t.token, tuple((a.token, a.logprob) for a in t.top_logprobs)) for t in choice.logprobs.content
            )
        prompt_tokens, completion_tokens = endpoints.tokens_used(completion, notes, self.keys)
        text, problem = choice.message.content or "", ""
        if endpoints.spells_a_key([t for t, _ in tokens if isinstance(t, str)], self.keys):
            tokens = ()  # an echoed key spread over tokens: the probabilities are not kept (the text is, redacted)
        if choice.finish_reason == "length":
            problem = (
                f"The reply was cut off at the token limit ({self.endpoint.max_tokens} tokens): its last line is "
                "not the judge's verdict. Raise 'Most tokens per reply'."
            )
        elif choice.finish_reason == "content_filter":
            problem = "The endpoint withheld the reply (its content filter)."
        if len(text) > MAX_REPLY_CHARS:
            problem = f"The reply is {len(text):,} characters long; a verdict is one line (kept: the first 100,000)."
            text, tokens = endpoints.cut(text, MAX_REPLY_CHARS, self.keys), ()
        if UNSTORABLE.search(text):  # untrusted: kept readable, never read as a verdict
            problem = (
                "The reply holds a character no database can store (NUL or an unpaired surrogate); kept with "
                "each replaced by U+FFFD."
            )
            text, tokens = UNSTORABLE.sub("\ufffd", text), ()
        # the reply's text is kept once more in the response as the call stores it; its log-probabilities only
        # while whole
        response = endpoints.kept_response(completion, text, self.keys, logprobs=bool(tokens))
        if notes:
            response["seplab_notes"] = notes
        return Reply(
            request,
            text=text,
            response=endpoints.storable(response),  # untrusted: every string, notes quoting it included
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            tokens=tokens,
            problem=problem,
        )

    # Recording (the calling thread)

    def ledger_key(self, request: Request) -> dict[str, Any]:
        return {"pair_id": request.pair_id, "a_shown_first": request.a_shown_first}

    def call_fields(self, reply: Reply[Request]) -> dict[str, Any]:
        return {"reply": reply.text}

    def answer(self, reply: Reply[Request]) -> tuple[str, str, prompts.Verdict | None]:
        try:
            return JudgeCall.Status.JUDGED, "", prompts.parse(self.offer, reply.text)
        except prompts.Unparseable as exc:
            return JudgeCall.Status.UNPARSEABLE, str(exc), None

    def do_store(self, reply: Reply[Request], answer: prompts.Verdict, at: dt.datetime) -> Judgment:
        request, judge = reply.request, self.endpoint
        p_first = prompts.probability_first(reply.tokens, answer.label_offset)
        probability_a = None if p_first is None else orientation.probability_first(p_first, request.a_shown_first)
        return recording.do_record_verdict(
            judge.study,
            judge.rater,
            request.pair_id,
            request.a_shown_first,
            answer.answer,
            probability_a,
            call_key(judge, request.pair_id, request.a_shown_first),
        )


judge_job = JudgeRun.job_body  # the body of "judge" jobs (annotation.jobs.KINDS)
