"""Untrusted text -- model outputs, inputs, attention checks, instructions -- as HTML that is safe to show.

Markdown goes through markdown-it-py (CommonMark with tables and strikethrough) with raw HTML disabled, so
any tag in the text is shown as text; fenced code is highlighted on the server by Pygments (class names
only, styled by static/css/pygments.css, so the CSP needs no inline style); images are never loaded (they
become a labelled link, so no request leaves for another host); and the result passes nh3, a maintained
allow-list sanitizer (the tags Markdown produces, no style or event attributes, links only to http,
https and mailto, opened with rel="noopener noreferrer nofollow"). Plain text is escaped and keeps its
line breaks (the study setting "show outputs as").

Rendering work is bounded per text: Markdown longer than ``SEPLAB_MARKDOWN_MAX_CHARS`` (20,000 characters by
default) is shown escaped, as plain text, with a note saying why -- markdown-it-py spends up to ~25 microseconds a
character on hostile text (a run of ``[`` or ``![``), and a million of them once held a request for a minute. Fenced
code is highlighted in the languages of ``HIGHLIGHTED`` only, and at most ``HIGHLIGHT_MAX_CHARS`` characters of it a
text (the rest is shown without colours): Pygments' lexers are regular expressions, and many are slow on hostile
code -- of those measured on 10,000 characters, several took over 5 s (``ng2``, ``basemake``, ``apacheconf``), C#
6.3 s on 5,000; the ones kept take at most ~0.3 s on 3,000 characters of the worst input found. Renders are cached
per process by text, within ``CACHE_MAX_CHARS`` characters (a rating page shows the same outputs to many raters), and
a text being rendered is rendered once: other requests for it wait for that render instead of starting their own.
"""

from __future__ import annotations

import html
import threading
from collections import OrderedDict

import nh3
from django.conf import settings
from django.utils.translation import gettext
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
HIGHLIGHT_MAX_CHARS = 3_000  # fenced code highlighted per text, in characters; the rest is shown without colours
# The languages highlighted (Pygments' first alias of each: "js", "py", "sh", "r", "latex" name them too), each
# measured on hostile code (a run of one character or pair, random punctuation); C# is left out (1.1 s on 3,000).
HIGHLIGHTED = frozenset(
    "python javascript typescript json bash console sql html xml css c cpp go rust ruby php yaml toml ini diff "
    "markdown splus tex jsx tsx scala haskell lua perl docker java kotlin swift".split()
)
_budget = threading.local()  # what is left of HIGHLIGHT_MAX_CHARS in the render running on this thread
CACHE_MAX_CHARS = 32_000_000  # texts and their HTML kept per process, in characters (some 100 MB at most)


def _highlight(code: str, language: str, _attrs) -> str:
    """Pygments' spans for a fenced block in a language of ``HIGHLIGHTED`` within the text's budget; "" lets
    markdown-it escape it as it is."""
    left = getattr(_budget, "left", HIGHLIGHT_MAX_CHARS)
    if len(code) > left or not language.strip():
        return ""
    try:
        lexer = get_lexer_by_name(language.strip().lower())
    except ClassNotFound:
        return ""
    if lexer.aliases[0] not in HIGHLIGHTED:
        return ""
    _budget.left = left - len(code)
    return highlight(code, lexer, _FORMATTER)


def _image_as_link(_renderer, tokens, index, _options, _env) -> str:
    """An image is not loaded: its description and address are shown as text."""
    token = tokens[index]
    alt = "".join(child.content for child in token.children or []) or "image"
    return f'<span class="md-image">[image: {html.escape(alt)}] {html.escape(token.attrGet("src") or "")}</span>'


_MD = MarkdownIt("commonmark", {"html": False, "highlight": _highlight}).enable(["table", "strikethrough"])
_MD.add_render_rule("image", _image_as_link)


_cache: OrderedDict[str, str] = OrderedDict()
_cache_chars = 0
_cache_lock = threading.Lock()
_rendering: dict[str, threading.Lock] = {}  # a lock per text being rendered now


def markdown_html(text: str) -> str:
    """Sanitised HTML of Markdown ``text``; a text longer than ``SEPLAB_MARKDOWN_MAX_CHARS`` escaped, as plain text,
    after a note saying why."""
    if len(text) > settings.SEPLAB_MARKDOWN_MAX_CHARS:
        return _too_long(text)
    with _cache_lock:
        done = _cache.get(text)
        if done is not None:
            _cache.move_to_end(text)
            return done
        one_render = _rendering.setdefault(text, threading.Lock())
    with one_render:  # the first request renders; the others for the same text wait and read its result
        with _cache_lock:
            done = _cache.get(text)
        if done is None:
            done = _render(text)
            _remember(text, done)
        with _cache_lock:
            _rendering.pop(text, None)
    return done


def _remember(text: str, rendered: str) -> None:
    global _cache_chars
    with _cache_lock:
        if text in _cache:
            return
        _cache[text] = rendered
        _cache_chars += len(text) + len(rendered)
        while _cache_chars > CACHE_MAX_CHARS and _cache:
            old, old_html = _cache.popitem(last=False)
            _cache_chars -= len(old) + len(old_html)


def clear_cache() -> None:
    """Forget every render (tests that time one)."""
    global _cache_chars
    with _cache_lock:
        _cache.clear()
        _cache_chars = 0


def _too_long(text: str) -> str:
    note = gettext(
        "Shown as plain text: it is longer than %(limit)s characters, the most that is shown as formatted Markdown."
    ) % {"limit": f"{settings.SEPLAB_MARKDOWN_MAX_CHARS:,}"}
    return f"<p><em>{html.escape(note)}</em></p><pre>{html.escape(text)}</pre>"


def _render(text: str) -> str:
    _budget.left = HIGHLIGHT_MAX_CHARS
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
