"""OpenAI-compatible endpoints SepLab calls: their configuration (``Endpoint``), LLM judges and generated systems,
and the ledgers of their calls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from annotation.models.items import Generation, Item, System
from annotation.models.judgments import Judgment
from annotation.models.plan import Pair
from annotation.models.raters import Rater
from annotation.models.studies import Study
from annotation.outbound import EndpointRefused, check_endpoint, check_key_host, key_hosts
from annotation.secrets_at_rest import SealedTextField

if TYPE_CHECKING:
    from django.db.models.fields.related_descriptors import RelatedManager


class Endpoint(models.Model):
    """How SepLab talks to one OpenAI-compatible chat-completions endpoint (``annotation/endpoints.py``): where, with
    which key, how hard, and at what price. An LLM judge (``Judge``) and a system whose outputs are generated
    (``SystemEndpoint``) are both one."""

    base_url = models.URLField(
        max_length=500,
        help_text="The endpoint's base URL, e.g. https://api.openai.com/v1 "
        "or http://127.0.0.1:8080/v1 (vLLM, Ollama, llama.cpp).",
    )
    model = models.CharField(max_length=200, help_text="The model name the endpoint expects.")
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        default="OPENAI_API_KEY",
        help_text="Read the API key from this environment variable of the worker (preferred).",
    )
    api_key = SealedTextField(
        blank=True,
        default="",
        help_text="Or a key stored with the study (encrypted, never shown again, never logged); used when set.",
    )
    api_key_url = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="The base URL the stored key was entered for: the key is sent to no other (a changed URL asks for "
        "the key again).",
    )
    temperature = models.FloatField(default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)])
    max_tokens = models.PositiveIntegerField(default=400, validators=[MinValueValidator(1), MaxValueValidator(32_000)])
    max_concurrency = models.PositiveSmallIntegerField(
        default=4, validators=[MinValueValidator(1), MaxValueValidator(64)]
    )
    request_budget = models.PositiveIntegerField(
        default=1000,
        validators=[MinValueValidator(1)],
        help_text="Most replies to pay for: the run stops when this many have been received.",
    )
    timeout_seconds = models.FloatField(default=60.0, validators=[MinValueValidator(0.1), MaxValueValidator(3600)])
    max_retries = models.PositiveSmallIntegerField(
        default=4,
        validators=[MaxValueValidator(20)],
        help_text="Retries with backoff on 429, 5xx, timeouts and dropped connections (the openai client's).",
    )
    price_input = models.DecimalField(
        max_digits=10, decimal_places=4, default=0, help_text="US$ per million prompt tokens, for the cost shown."
    )
    price_output = models.DecimalField(
        max_digits=10, decimal_places=4, default=0, help_text="US$ per million completion tokens."
    )
    stop_requested = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    # The ledger of its calls: each concrete endpoint's reverse relation (``JudgeCall.judge``,
    # ``GenerationCall.endpoint``), which ``annotation/endpoint_runs.py`` reads through this base.
    calls: RelatedManager[Any]

    class Meta:
        abstract = True

    def clean(self) -> None:
        """The URL, the key's variable and the hosts it is for, the stored key's URL (set when the key is new, asked
        again when the URL changed), and the most time one request may take with all its attempts."""
        super().clean()
        errors: dict[str, str] = {}
        if self.base_url:
            try:
                check_endpoint(self.base_url, must_resolve=False)
            except EndpointRefused as exc:
                errors["base_url"] = str(exc)
        if self.api_key_env and self.api_key_env not in key_variables():
            errors["api_key_env"] = unknown_key_variable()
        elif self.api_key_env and not self.api_key:
            try:
                check_key_host(self.api_key_env, self.base_url or "")
            except EndpointRefused as exc:
                errors["api_key_env"] = str(exc)
        if not self.api_key:
            self.api_key_url = ""
        elif not self.api_key_url:  # a key typed now: for this URL only
            self.api_key_url = self.base_url
        elif self.api_key_url != self.base_url:
            errors["api_key"] = (
                f"The stored key was entered for {self.api_key_url}; a stored key is sent only to the URL it was "
                "entered for. Type the key again for the new base URL (or remove it)."
            )
        limit = settings.SEPLAB_ENDPOINT_REQUEST_SECONDS
        if isinstance(self.timeout_seconds, int | float) and isinstance(self.max_retries, int):
            total = self.timeout_seconds * (self.max_retries + 1)
            if total > limit:
                errors["timeout_seconds"] = (
                    f"A request may take at most {limit:,.0f} s with all its attempts on this server; the timeout "
                    f"({self.timeout_seconds:g} s) times the attempts (1 + {self.max_retries} retries) is "
                    f"{total:,.0f} s. Lower the timeout or the retries."
                )
        if errors:
            raise ValidationError(errors)


class Judge(Endpoint):
    """An LLM judge SepLab runs on a study's pairs through an OpenAI-compatible endpoint
    (``annotation/judges/runner.py``). Its verdicts are the judgments of ``rater`` (kind judge)."""

    class Scope(models.TextChoices):
        SHOWN = "shown", "The pairs released to human raters"
        ALL = "all", "Every item of every system pair (first samples)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="judges")
    rater = models.OneToOneField(Rater, on_delete=models.CASCADE, related_name="judge")
    prompt_template = models.TextField(
        help_text="The prompt; {input}, {first}, {second} and {answer_format} are filled in, {question} too if present."
    )
    logprobs = models.BooleanField(
        default=False,
        help_text="Ask for log-probabilities and keep P(A) from the option tokens (not every endpoint returns them).",
    )
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.SHOWN)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.rater.external_id


class SystemEndpoint(Endpoint):
    """A system whose outputs SepLab generates from an OpenAI-compatible endpoint (``annotation/generating/runner.py``):
    ``samples`` outputs per item, each stored as the system's ``Generation`` with its provenance."""

    system = models.OneToOneField(System, on_delete=models.CASCADE, related_name="endpoint")
    system_prompt = models.TextField(
        blank=True, help_text="Sent before each input as the system message (nothing is sent when empty)."
    )
    temperature = models.FloatField(
        default=1.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(2.0)],
        help_text="Above 0, so that the samples of one input differ (separability measures how much).",
    )
    max_tokens = models.PositiveIntegerField(default=1024, validators=[MinValueValidator(1), MaxValueValidator(32_000)])
    samples = models.PositiveSmallIntegerField(
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text="Outputs per input (K). Separability needs at least 2; its paper uses 5.",
    )
    seed = models.BigIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(2**31 - 1)],
        help_text="Sent as the request's seed (sample k asks with seed + k) to endpoints that take one; "
        "empty sends none.",
    )

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.system.name


def key_variables() -> list[str]:
    """The environment variables the operator lets endpoints read their API key from (SEPLAB_JUDGE_KEY_VARIABLES),
    each for its own hosts (``outbound.key_hosts``)."""
    return list(key_hosts())


def key_variable_words(name: str) -> str:
    """A key variable as the form offers it: with the hosts it is for."""
    hosts = key_hosts().get(name, ())
    return f"{name} (for {', '.join(hosts)})" if hosts else f"{name} (for no host: the operator named none)"


def unknown_key_variable() -> str:
    """Why a judge may not read a variable: the operator's list, never whether the variable exists."""
    allowed = key_variables()
    if not allowed:
        return "This server lets judges use stored keys only: store the key with the judge."
    return (
        "Judges may read their key only from the environment variables the server's operator allows: "
        + "; ".join(key_variable_words(name) for name in allowed)
        + ". Choose one of them, or store the key with the judge."
    )


class JudgeCall(models.Model):
    """One request of a judge on one pair in one display order: the ledger that makes a run resumable (at most
    one per pair and order) and keeps the raw reply."""

    class Status(models.TextChoices):
        JUDGED = "judged", "Judged"
        UNPARSEABLE = "unparseable", "Unparseable"
        FAILED = "failed", "Failed (retried on resume)"

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="calls")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="+")
    a_shown_first = models.BooleanField()
    status = models.CharField(max_length=12, choices=Status.choices)
    reply = models.TextField(blank=True, help_text="The reply's text.")
    problem = models.TextField(blank=True, help_text="Why it is unparseable, or the error after the retries.")
    response = models.JSONField(
        null=True, blank=True, help_text="What is kept of the endpoint's response (endpoints.kept_response)."
    )
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    judgment = models.OneToOneField(Judgment, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    # Not a column: what the reply was read as, set by the judge's page (annotation/views/judges.py) on the replies
    # it lists.
    verdict_words: str

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["judge", "pair", "a_shown_first"], name="judgecall_unique")]

    def __str__(self) -> str:
        return f"{self.judge} on pair {self.pair_id} ({'A' if self.a_shown_first else 'B'} first): {self.status}"


class GenerationCall(models.Model):
    """One request for one output (an item's sample k) of a system generated from an endpoint: the ledger that
    makes generation resumable (at most one per system, item and sample, a database constraint) and keeps what was
    received. A generated call owns the output it stored."""

    class Status(models.TextChoices):
        GENERATED = "generated", "Generated"
        UNUSABLE = "unusable", "Unusable (asked again on resume)"
        FAILED = "failed", "Failed (retried on resume)"

    endpoint = models.ForeignKey(SystemEndpoint, on_delete=models.CASCADE, related_name="calls")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    sample_index = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=12, choices=Status.choices)
    problem = models.TextField(blank=True, help_text="Why the reply is unusable, or the error after the retries.")
    response = models.JSONField(
        null=True,
        blank=True,
        help_text="What is kept of the endpoint's response (endpoints.kept_response; the text itself is the output's).",
    )
    replies = models.PositiveIntegerField(
        default=0, help_text="Replies received for this output, over every attempt (what the budget counts)."
    )
    prompt_tokens = models.PositiveIntegerField(default=0, help_text="Over every attempt.")
    completion_tokens = models.PositiveIntegerField(default=0, help_text="Over every attempt.")
    generation = models.OneToOneField(Generation, null=True, blank=True, on_delete=models.SET_NULL, related_name="call")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "item", "sample_index"], name="generationcall_unique")
        ]

    def __str__(self) -> str:
        return f"{self.endpoint} on item {self.item_id} sample {self.sample_index}: {self.status}"
