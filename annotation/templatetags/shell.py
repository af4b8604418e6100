"""Commands shown on a page, safe to paste: ``{{ study.name|shell_quoted }}`` (a study name with a space or a quote
stays one word of the shell's)."""

from __future__ import annotations

import shlex

from django import template

register = template.Library()


@register.filter
def shell_quoted(text) -> str:
    """``text`` as one shell word (``shlex.quote``: single-quoted when it holds anything but letters, digits and
    ``@%+=:,./-``); the template escapes it for HTML as any text."""
    return shlex.quote(str(text))
