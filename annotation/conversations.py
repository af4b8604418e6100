"""Conversation items: an item's input as a multi-turn chat, OpenAI-style (``[{"role": "user", "content": "…"}, …]``),
whose outputs are the assistant's next reply -- the judged turn.

One home for what a conversation is: the checks a study file's ``messages`` goes through (``check_messages``), the
plain-text transcript stored as the item's ``input`` beside its turns (``Item.messages``: what every text reader --
judges' prompts, search, exports -- reads: ``transcript``), and the words the pages head each turn with
(``ROLE_WORDS``). Pure Python, no Django."""

from __future__ import annotations

from typing import Any

ROLES = ("system", "developer", "user", "assistant")  # the chat roles a study file's conversation may use
KEYS = frozenset({"role", "content", "name"})  # what a message may hold (a name is accepted and not kept)
MAX_TURNS = 200
ROLE_WORDS = {"system": "System", "developer": "Developer", "user": "User", "assistant": "Assistant"}


def _content(value: Any) -> str | None:
    """A message's text: a string, or OpenAI's list of content parts when every part is text (joined by blank
    lines); None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        texts = [p.get("text") for p in value if isinstance(p, dict) and p.get("type") == "text"]
        if len(texts) == len(value) and all(isinstance(t, str) for t in texts):
            return "\n\n".join(t for t in texts if isinstance(t, str))
    return None


def check_messages(value: Any, limit: int) -> tuple[list[dict[str, str]], list[tuple[str, str]]]:
    """A study file's ``messages``, checked: (the conversation as ``{"role", "content"}`` turns, the problems as
    (field, reason)). A conversation is a non-empty list of at most ``MAX_TURNS`` messages, each an object with a
    ``role`` of ``ROLES`` and a non-empty text ``content`` (a string, or text parts), ending with the user's turn
    (the outputs are the assistant's reply to it), its transcript at most ``limit`` characters."""
    problems: list[tuple[str, str]] = []
    if not isinstance(value, list) or not value:
        return [], [("messages", 'messages must be a non-empty list of {"role": …, "content": …} objects')]
    if len(value) > MAX_TURNS:
        return [], [("messages", f"a conversation has at most {MAX_TURNS} messages, not {len(value)}")]
    turns: list[dict[str, str]] = []
    for i, message in enumerate(value):
        field = f"messages[{i}]"
        if not isinstance(message, dict):
            problems.append((field, 'a message must be an object {"role": …, "content": …}'))
            continue
        unknown = sorted(set(message) - KEYS)
        if unknown:
            problems.append(
                (
                    field,
                    f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: a message holds "
                    "role, content and optionally name (tool calls are not supported: give the turns' text)",
                )
            )
        role = message.get("role")
        if role not in ROLES:
            problems.append((f"{field}.role", f"role must be one of {', '.join(ROLES)}, not {role!r}"))
        content = _content(message.get("content"))
        if content is None:
            problems.append((f"{field}.content", "content must be text (a string, or a list of text parts)"))
        elif not content.strip():
            problems.append((f"{field}.content", "empty content"))
        if not problems:
            turns.append({"role": str(role), "content": str(content)})
    if not problems and turns[-1]["role"] != "user":
        problems.append(
            (
                f"messages[{len(turns) - 1}].role",
                "the last message must be the user's: the outputs are the assistant's reply to it (the judged turn)",
            )
        )
    if not problems and len(transcript(turns)) > limit:
        problems.append(
            (
                "messages",
                f"the conversation is {len(transcript(turns)):,} characters long; the limit is {limit:,} "
                "(SEPLAB_MAX_TEXT_CHARS): shorten it or leave the item out",
            )
        )
    return (turns if not problems else []), problems


def transcript(turns: list[dict[str, str]]) -> str:
    """The conversation as plain text, each turn headed by its role: the item's ``input``."""
    return "\n\n".join(f"{ROLE_WORDS[t['role']]}: {t['content']}" for t in turns)
