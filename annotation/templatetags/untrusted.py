"""Showing untrusted text in templates: ``{{ text|shown_as:study.output_format }}`` (annotation/rendering.py)."""

from __future__ import annotations

from django import template
from django.utils.safestring import mark_safe

from annotation import rater_words, rendering

register = template.Library()


@register.filter
def shown_as(text: str, fmt: str = rendering.MARKDOWN) -> str:
    """Sanitised HTML of ``text`` in the format ``fmt`` (markdown | plain)."""
    return mark_safe(rendering.as_html(text or "", fmt))  # noqa: S308 -- rendering.as_html escapes / sanitises


@register.filter
def in_raters_words(text: str) -> str:
    """``rater_words.shown``: a study's text in the raters' language when it is SepLab's default, else as written."""
    return rater_words.shown(text or "")


@register.filter
def shown_output(text: str, fmt: str = rendering.MARKDOWN) -> str:
    """A model output as ``shown_as`` renders it; an empty one as a visible placeholder, so a rater sees that
    the system answered nothing (and is not left wondering whether the page failed)."""
    if not (text or "").strip():
        return mark_safe('<p class="empty-output" data-testid="empty-output">(empty output)</p>')
    return shown_as(text, fmt)


@register.filter
def metadata_rows(metadata) -> list[tuple[str, str]]:
    """An item's metadata as (key, value) rows a person reads: strings as they are, everything else as JSON
    (true / null / [1, 2], never Python's True / None / ['a']). Escaped by the template like any text."""
    import json

    if not isinstance(metadata, dict):
        return [("", json.dumps(metadata, ensure_ascii=False))]
    return [(str(k), v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)) for k, v in metadata.items()]
