"""Untrusted text -- model outputs, inputs, attention checks, instructions -- as HTML that is safe to show.

Markdown goes through markdown-it-py (CommonMark with tables and strikethrough) with raw HTML disabled, so
any tag in the text is shown as text; fenced code is highlighted on the server by Pygments (class names
only, styled by static/css/pygments.css, so the CSP needs no inline style); images are never loaded (they
become a labelled link, so no request leaves for another host); and the result passes nh3, a maintained
allow-list sanitizer (the tags Markdown produces, no style or event attributes, links only to http,
https and mailto, opened with rel="noopener noreferrer nofollow"). Plain text is escaped and keeps its
line breaks (the study setting "show outputs as").

Renders are cached per process by text: a rating page shows the same outputs to many raters.
"""

from __future__ import annotations

import functools
import html

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

MARKDOWN, PLAIN = "markdown", "plain"
FORMATS = [(MARKDOWN, "Rendered Markdown (code highlighted, tables, lists)"), (PLAIN, "Plain text")]

TAGS = {
    "p",
    "br",
    "hr",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "strong",
    "em",
    "s",
    "del",
    "code",
    "pre",
    "span",
    "blockquote",
    "ul",
    "ol",
    "li",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "a",
}
ATTRIBUTES = {"a": {"href", "title"}, "span": {"class"}, "code": {"class"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}
# "xcode": the Pygments style whose every colour keeps a 4.5:1 contrast on the code background (#f0f2f6), so
# highlighted code passes WCAG AA (axe-core in tests/browser/test_accessibility.py).
_FORMATTER = HtmlFormatter(nowrap=True, classprefix="hl-", style="xcode")


def _highlight(code: str, language: str, _attrs) -> str:
    """Pygments' spans for a fenced block in a known language; "" lets markdown-it escape it as it is."""
    try:
        lexer = get_lexer_by_name(language.strip().lower()) if language.strip() else None
    except ClassNotFound:
        lexer = None
    return highlight(code, lexer, _FORMATTER) if lexer is not None else ""


def _image_as_link(_renderer, tokens, index, _options, _env) -> str:
    """An image is not loaded: its description and address are shown as text."""
    token = tokens[index]
    alt = "".join(child.content for child in token.children or []) or "image"
    return f'<span class="md-image">[image: {html.escape(alt)}] {html.escape(token.attrGet("src") or "")}</span>'


_MD = MarkdownIt("commonmark", {"html": False, "highlight": _highlight}).enable(["table", "strikethrough"])
_MD.add_render_rule("image", _image_as_link)


@functools.lru_cache(maxsize=8192)
def markdown_html(text: str) -> str:
    """Sanitised HTML of Markdown ``text``."""
    return nh3.clean(
        _MD.render(text),
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def plain_html(text: str) -> str:
    """Escaped ``text``; CSS (white-space: pre-wrap) keeps its spaces and line breaks."""
    return html.escape(text)


def as_html(text: str, fmt: str) -> str:
    """``text`` in the study's format, as safe HTML (both outputs of a pair go through the same call)."""
    return markdown_html(text) if fmt == MARKDOWN else plain_html(text)


def pygments_css() -> str:
    """The highlighting stylesheet: static/css/pygments.css holds it (a test keeps the file equal to this)."""
    return _FORMATTER.get_style_defs(".md")
