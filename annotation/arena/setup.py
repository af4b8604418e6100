"""A new arena study (docs/arena.md): the study with the settings an arena asks for, its ``Arena`` row, its systems
from their endpoints and every system pair as a comparison -- created whole or not at all
(``create_arena`` calls it)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction

from annotation import study_settings
from annotation.endpoints import EndpointError
from annotation.errors import ServiceError
from annotation.exchange.rules import FormatError
from annotation.generating import runner
from annotation.models import Arena, Study, SystemEndpoint
from annotation.plan import planning
from annotation.studies import creation
from annotation.text import UNSTORABLE, newlines

MAX_SAMPLES = 10  # K: the Arena row's own bound
MAX_PROMPT_CHARS = 8000  # a rater's message, a starter prompt
MAX_CATEGORY_CHARS = 100  # Battle.category
MAX_STARTERS = 50
MAX_CATEGORIES = 50
# what the Arena settings page and ``do_update_arena`` change (the rest of an arena is the study's own settings)
ARENA_FIELDS = (
    "samples",
    "max_turns",
    "votes_per_rater_hour",
    "votes_per_network_hour",
    "attention_every",
    "starters",
    "categories",
)

# LABEL=MODEL@BASE_URL: the model is everything up to the first "@" that starts an http(s) URL, so a model name may
# hold "@" (``org/model@v2``) and a URL may not hide a second one before its scheme
_SYSTEM = re.compile(r"(?P<label>[^=]*)=(?P<model>.*?)@(?P<url>https?://.*)", re.DOTALL)

INSTRUCTIONS = (
    "Write a prompt of your own (or take a starter). Two anonymous models answer it side by side; you may go on "
    "with the conversation for a few turns. Then vote for the better one -- or a tie, or both bad. The models' "
    "names are shown after your vote."
)


@dataclasses.dataclass(frozen=True)
class SystemSpec:
    """One system of a new arena: its name in the study (shown after a vote), the model its endpoint expects, and the
    endpoint's base URL."""

    label: str
    model: str
    base_url: str


def parse_system(text: str) -> SystemSpec:
    """``LABEL=MODEL@BASE_URL`` (the ``--system`` option of ``create_arena``); ``ServiceError`` saying what is
    wrong otherwise."""
    match = _SYSTEM.fullmatch(text.strip())
    if match is None:
        raise ServiceError(
            f"--system {text!r}: write LABEL=MODEL@BASE_URL, e.g. small=llama3.2:1b@http://127.0.0.1:11434/v1"
        )
    spec = SystemSpec(match["label"].strip(), match["model"].strip(), match["url"].strip())
    if not spec.label:
        raise ServiceError(f"--system {text!r}: the label before '=' is empty.")
    if not spec.model:
        raise ServiceError(f"--system {text!r}: the model between '=' and '@' is empty.")
    return spec


def do_create_arena(
    owner: User,
    name: str,
    systems: Sequence[SystemSpec],
    *,
    samples: int = 3,
    endpoint_fields: dict[str, Any] | None = None,
    starters: Iterable[str] = (),
    categories: Iterable[str] = (),
    base_url: str = "",
    description: str = "",
) -> Study:
    """A new arena study, open to raters through its open link: forced choice with a tie and "both are bad", one
    rater per prompt, one pair per battle; the ``Arena`` row (``samples`` = K background samples per system and
    prompt, starter prompts, the researcher's categories); each system from its endpoint
    (``runner.do_add_endpoint_system``, K + 1 samples: the reply shown is sample 0), with ``endpoint_fields`` (the
    budget, temperature, key variable ...) for every one; every system pair a comparison. ``base_url``: the address
    raters reach this server at (the study's public base URL), when given. All or nothing: ``ServiceError`` names
    the first problem and nothing is stored."""
    systems = list(systems)
    _check_systems(systems)
    if isinstance(samples, bool) or not isinstance(samples, int) or not 0 <= samples <= MAX_SAMPLES:
        raise ServiceError(f"--samples: K is a whole number from 0 to {MAX_SAMPLES}, not {samples!r}.")
    starter_list = _texts("starter prompt", starters, MAX_PROMPT_CHARS, MAX_STARTERS)
    category_list = _texts("category", categories, MAX_CATEGORY_CHARS, MAX_CATEGORIES)
    base_url = base_url.strip().rstrip("/")
    if base_url:
        try:
            URLValidator(schemes=["http", "https"])(base_url)
        except ValidationError:
            raise ServiceError(f"--base-url {base_url!r} is not an http(s) address of this server.") from None
    try:
        name = creation.check_study_name(owner, name)
    except FormatError as exc:
        raise ServiceError("; ".join(p.message for p in exc.problems)) from None
    fields = dict(endpoint_fields or {})
    for reserved in ("base_url", "model", "samples", "system", "system_id"):
        if reserved in fields:
            raise ServiceError(f"{reserved} is set per system, not for every system.")
    fields.setdefault("api_key_env", "")  # a local server needs no key (generate's default too)
    with transaction.atomic():
        study = Study.objects.create(
            owner=owner,
            name=name,
            description=newlines(description).strip(),
            kind=Study.Kind.ARENA,
            allow_tie=True,
            tie_label="Tie",
            neither_option=True,
            neither_label="Both are bad",
            allow_skip=False,
            question="Which reply is better?",
            instructions=INSTRUCTIONS,
            raters_per_item=1,
            pairs_per_assignment=1,
            judgments_per_assignment=1,
            pair_mode=Study.PairMode.ALL,
            scheduling=Study.Scheduling.RANDOM,
            open_link_enabled=True,
            public_base_url=base_url,
            status=Study.Status.ACTIVE,
        )
        study_settings.do_create_defaults(study)
        Arena.objects.create(study=study, samples=samples, starters=starter_list, categories=category_list)
        for spec in systems:
            try:
                runner.do_add_endpoint_system(
                    study, spec.label, base_url=spec.base_url, model=spec.model, samples=samples + 1, **fields
                )
            except EndpointError as exc:
                raise ServiceError(f"System {spec.label!r}: {exc}") from None
            except TypeError as exc:  # a field no endpoint has: the caller's mistake, named
                raise ServiceError(f"Not an endpoint setting: {exc}") from None
        planning.do_rebuild_plan(study)  # an arena's plan: every system pair a comparison, no tasks (battles)
    return study


def do_update_arena(study: Study, **fields: Any) -> Arena:
    """Change an arena's own settings (``ARENA_FIELDS``; the Arena settings page calls it): checked by the
    ``Arena`` row's validators, starter prompts and categories as ``do_create_arena`` takes them. K (``samples``)
    lives in two places, kept together here as at creation: the row, and every system's endpoint asking K + 1
    samples of a prompt (the reply shown is sample 0). All or nothing: ``ServiceError`` names every problem and
    nothing is stored."""
    unknown = sorted(set(fields) - set(ARENA_FIELDS))
    if unknown:
        raise ServiceError(f"Not an arena setting: {', '.join(unknown)}.")
    for name in ("starters", "categories"):
        if isinstance(fields.get(name, ()), str):  # a string is a list of its characters to ``_texts``
            raise ServiceError(f"{name}: a list of texts, not one text.")
    if "starters" in fields:
        fields["starters"] = _texts("starter prompt", fields["starters"], MAX_PROMPT_CHARS, MAX_STARTERS)
    if "categories" in fields:
        fields["categories"] = _texts("category", fields["categories"], MAX_CATEGORY_CHARS, MAX_CATEGORIES)
    for name, value in fields.items():
        if isinstance(value, bool):  # an int to Python, never a number of samples or votes
            raise ServiceError(f"{name}: a whole number, not {value!r}.")
    with transaction.atomic():
        arena = Arena.objects.select_for_update().filter(study=study).first()
        if arena is None:
            raise ServiceError(f"{study.name} is not an arena.")
        if "samples" in fields and fields["samples"] != arena.samples and study.battles.exists():
            # every prompt's separability rests on the same K: sep-ELO weighs battles by it, and a delta from 3
            # samples and one from 5 are not on one scale (docs/arena.md#arena-settings)
            raise ServiceError(
                f"samples: K is {arena.samples} and the arena has battles, whose separabilities rest on K "
                f"{arena.samples}; K is fixed once the first battle starts (create a new arena for another K)."
            )
        for name, value in fields.items():
            setattr(arena, name, value)
        try:
            arena.full_clean(exclude=["study"])
        except ValidationError as exc:
            raise ServiceError(
                "; ".join(f"{name}: {' '.join(problems)}" for name, problems in exc.message_dict.items())
            ) from None
        arena.save(update_fields=list(fields))
        if "samples" in fields:
            SystemEndpoint.objects.filter(system__study=study).update(samples=arena.samples + 1)
    return arena


def _check_systems(systems: list[SystemSpec]) -> None:
    if len(systems) < 2:
        raise ServiceError(
            f"An arena needs at least two systems (--system LABEL=MODEL@BASE_URL, repeated); {len(systems)} given."
        )
    seen: set[str] = set()
    for spec in systems:
        label = spec.label.strip()
        if not label or not spec.model.strip() or not spec.base_url.strip():
            raise ServiceError(f"System {spec.label!r}: a label, a model and a base URL are all needed.")
        if label.casefold() in seen:
            raise ServiceError(f"Two systems are labelled {label!r}: each system needs a label of its own.")
        seen.add(label.casefold())


def _texts(what: str, values: Iterable[str], most_chars: int, most: int) -> list[str]:
    """Starter prompts or category names as stored: stripped, one line ending, none empty, none twice, none longer
    than ``most_chars``, at most ``most`` of them."""
    out: list[str] = []
    for value in values:
        text = newlines(str(value)).strip()
        if not text:
            raise ServiceError(f"A {what} is empty.")
        if len(text) > most_chars:
            raise ServiceError(f"A {what} has {len(text):,} characters; at most {most_chars:,}.")
        if UNSTORABLE.search(text):
            raise ServiceError(f"A {what} holds a character no database can store (NUL or a lone surrogate).")
        if text not in out:
            out.append(text)
    if len(out) > most:
        raise ServiceError(f"{len(out)} {what}s; an arena has at most {most}.")
    return out
