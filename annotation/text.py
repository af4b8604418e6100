"""Text that comes in, one rule for line endings: ``\\r\\n`` and a lone ``\\r`` become ``\\n``.

A browser's textarea submits ``\\r\\n`` (the HTML standard's form encoding), files written on Windows carry it, and
a prompt template or an instruction saved that way is a different text from the one typed: a judge's server that
looks for "\\n\\n[Answer A]" does not find it (the README's local judge answered "A" 260 times out of 260).
Applied to every form of the site (``annotation/views/forms.py``), to judges however they are created, and to the
inputs, references and outputs of an imported study; everything else in a text (tabs, trailing spaces, blank
lines) is kept as written.
"""

from __future__ import annotations

import re

_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")
# characters no database stores: NUL (PostgreSQL refuses it in text and JSON) and lone surrogates (not UTF-8)
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def newlines(text: str) -> str:
    """``text`` with every line ending as ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def whole_number(value: str | None) -> int | None:
    """A whole number >= 0 written in ASCII digits (at most 18), or None. ``str.isdigit`` also takes "²" and "٣",
    which ``int`` then refuses with an exception (a 500 on a URL anyone can type)."""
    value = (value or "").strip()
    return int(value) if _WHOLE_NUMBER.fullmatch(value) else None
