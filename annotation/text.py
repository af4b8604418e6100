"""Text that comes in, one rule for line endings: ``\\r\\n`` and a lone ``\\r`` become ``\\n``.

A browser's textarea submits ``\\r\\n`` (the HTML standard's form encoding), files written on Windows carry it, and
a prompt template or an instruction saved that way is a different text from the one typed: a judge's server that
looks for "\\n\\n[Answer A]" does not find it (issue 30: the README's local judge answered "A" 260 times out of 260).
Applied to every form of the site (``annotation/views/forms.py``), to judges however they are created, and to the
inputs, references and outputs of an imported study; everything else in a text (tabs, trailing spaces, blank
lines) is kept as written.
"""

from __future__ import annotations


def newlines(text: str) -> str:
    """``text`` with every line ending as ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
