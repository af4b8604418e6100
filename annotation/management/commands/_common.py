from __future__ import annotations

import argparse
import os
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from annotation.models import Study


def get_study(name: str) -> Study:
    """The study a command's --study names: its name, or OWNER/NAME (study names are unique per researcher, so
    two researchers' studies may share a name; the owner then says which)."""
    matches = list(Study.objects.filter(name=name).select_related("owner").order_by("owner__username")[:10])
    if not matches and "/" in name:
        owner, _, bare = name.partition("/")
        matches = list(Study.objects.filter(owner__username=owner, name=bare).select_related("owner"))
    if len(matches) == 1:
        return matches[0]
    if matches:
        choices = ", ".join(f"{s.owner.username}/{s.name}" for s in matches)
        raise CommandError(
            f"{len(matches)} researchers have a study named '{name}': say whose, as --study OWNER/NAME ({choices})."
        )
    known = (
        ", ".join(
            f"{o}/{n}"
            for o, n in Study.objects.order_by("owner__username", "name").values_list("owner__username", "name")[:20]
        )
        or "none"
    )
    raise CommandError(f"No study named '{name}'. Studies: {known}.")


def get_owner(username: str | None):
    users = get_user_model().objects
    if username:
        try:
            return users.get(username=username)
        except users.model.DoesNotExist:
            raise CommandError(f"No user named '{username}'.") from None
    only = list(users.filter(is_active=True)[:2])
    if len(only) != 1:
        raise CommandError(
            "Say who owns the study with --owner USERNAME "
            "(create an account with `python manage.py create_researcher NAME`)."
        )
    return only[0]


def read_file(path: str) -> bytes:
    """The file's bytes; a file over SEPLAB_MAX_IMPORT_BYTES is refused before it is read."""
    try:
        if os.path.getsize(path) > settings.SEPLAB_MAX_IMPORT_BYTES:
            raise CommandError(
                f"{path} is {os.path.getsize(path) / 1e6:.1f} MB; the import limit is "
                f"{settings.SEPLAB_MAX_IMPORT_BYTES / 1e6:.1f} MB (SEPLAB_MAX_IMPORT_BYTES)"
            )
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise CommandError(f"Cannot read {path}: {exc.strerror}") from None


def price(value: str) -> Decimal:
    """A price option: refused by argparse with the option's name, like any other bad value."""
    try:
        number = Decimal(value)
    except InvalidOperation:
        number = Decimal("NaN")
    if not number.is_finite() or number < 0:
        raise argparse.ArgumentTypeError(f"a price is a number of US$ per million tokens, not {value!r}")
    return number


# An endpoint's options (generate's, and create_arena's for every system): option -> SystemEndpoint field
ENDPOINT_OPTIONS = (
    ("budget", "request_budget"),
    ("system_prompt", "system_prompt"),
    ("temperature", "temperature"),
    ("max_tokens", "max_tokens"),
    ("seed", "seed"),
    ("api_key_env", "api_key_env"),
    ("concurrency", "max_concurrency"),
    ("timeout", "timeout_seconds"),
    ("retries", "max_retries"),
    ("price_input", "price_input"),
    ("price_output", "price_output"),
)


def add_endpoint_options(parser, *, budget_help: str, reply: str = "output", prompt_before: str = "each input"):
    """The options of ``ENDPOINT_OPTIONS`` on ``parser`` (a parser or an argument group), each defaulting to None
    (the endpoint's own default, or what was set before); ``reply`` names what one request returns."""
    parser.add_argument("--budget", type=int, default=None, help=budget_help)
    parser.add_argument("--system-prompt", default=None, help=f"Sent before {prompt_before} as the system message.")
    parser.add_argument("--temperature", type=float, default=None, help="Sampling temperature (default 1.0).")
    parser.add_argument("--max-tokens", type=int, default=None, help=f"Most tokens per {reply} (default 1,024).")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="Sent as the request's seed (sample k asks with seed + k), for endpoints that take one.",
    )
    parser.add_argument(
        "--api-key-env",
        default=None,
        help="Read the API key from this environment variable (one the server's operator "
        "allows, for the hosts it names: SEPLAB_JUDGE_KEY_VARIABLES). Default: none, for a local server.",
    )
    parser.add_argument("--concurrency", type=int, default=None, help="Requests at once (default 4).")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="Seconds per request (default 60); the timeout times the attempts (1 + retries) may be at most "
        "SEPLAB_ENDPOINT_REQUEST_SECONDS (300).",
    )
    parser.add_argument(
        "--retries", type=int, default=None, help="Retries with backoff on 429, 5xx and timeouts (default 4)."
    )
    parser.add_argument("--price-input", type=price, default=None, help="US$ per million prompt tokens.")
    parser.add_argument("--price-output", type=price, default=None, help="US$ per million completion tokens.")


def endpoint_fields(options) -> dict:
    """The SystemEndpoint fields the command line's endpoint options set (those given)."""
    return {field: options[option] for option, field in ENDPOINT_OPTIONS if options[option] is not None}
