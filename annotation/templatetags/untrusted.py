"""Showing untrusted text in templates: ``{{ text|shown_as:study.output_format }}`` (annotation/rendering.py)."""

from __future__ import annotations

from django import template
from django.utils.safestring import mark_safe

from annotation import rendering

register = template.Library()


@register.filter
def shown_as(text: str, fmt: str = rendering.MARKDOWN) -> str:
    """Sanitised HTML of ``text`` in the format ``fmt`` (markdown | plain)."""
    return mark_safe(rendering.as_html(text or "", fmt))  # noqa: S308 -- rendering.as_html escapes / sanitises
