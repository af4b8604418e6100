"""Untrusted text as HTML (annotation/rendering.py): Markdown that reads well, and nothing that runs."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.urls import reverse

from annotation import rendering
from annotation.studies import lifecycle
from tests.annotation.test_rate import rate_url, start

ROOT = Path(__file__).resolve().parents[2]

# Known ways to smuggle script or requests through Markdown, each line a separate document.
XSS = [
    "<script>alert('script')</script>",
    "[click](javascript:alert('link'))",
    "[click](JaVaScRiPt:alert('case'))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[click](vbscript:msgbox('vb'))",
    "![pixel](https://tracker.example.net/p.gif)",
    "![x](x\" onerror=\"alert('img'))",
    "<img src=x onerror=alert('img2')>",
    "<svg onload=alert('svg')></svg>",
    '<iframe src="https://evil.example.net"></iframe>',
    "&lt;script&gt;alert('entity')&lt;/script&gt;",
    "&#x3C;img src=x onerror=alert('hexentity')&#x3E;",
    '<a href="https://evil.example.net" onclick="alert(\'click\')">a</a>',
    "```html\n<script>alert('fence')</script>\n```",
    "````\n```\n<script>alert('nested')</script>\n```\n````",
    "[a](https://ok.example.org \"title\" onmouseover=alert('title'))",
    "<style>body{display:none}</style>",
    "<form action=https://evil.example.net><button>go</button></form>",
    "| a | b |\n|---|---|\n| <script>alert('cell')</script> | [x](javascript:alert('cell2')) |",
]


class _Elements(HTMLParser):
    """Every element and attribute of an HTML fragment, as a browser's parser would see them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, {name: value or "" for name, value in attrs}))


@pytest.mark.parametrize("text", XSS)
def test_no_markdown_document_yields_a_tag_or_attribute_that_runs_or_loads(text):
    parser = _Elements()
    parser.feed(rendering.markdown_html(text))
    for tag, attrs in parser.found:
        assert tag in rendering.TAGS, (text, tag)
        assert set(attrs) <= rendering.ATTRIBUTES.get(tag, set()) | ({"rel"} if tag == "a" else set()), (text, attrs)
        if "href" in attrs:
            assert attrs["href"].split(":", 1)[0].lower() in rendering.URL_SCHEMES, (text, attrs)


def test_markdown_renders_code_lists_tables_and_keeps_images_as_text():
    out = rendering.markdown_html(
        "Steps:\n\n1. one\n2. two\n\n```python\nimport os\n```\n\n| a | b |\n|---|---|\n"
        "| 1 | 2 |\n\n![chart](https://example.org/c.png) [docs](https://example.org/d)"
    )
    assert "<ol>" in out and "<li>one</li>" in out and "<table>" in out and "<td>1</td>" in out
    assert '<span class="hl-kn">import</span>' in out  # highlighted by Pygments, styled by class only
    assert "[image: chart] https://example.org/c.png" in out and "<img" not in out
    assert '<a href="https://example.org/d" rel="noopener noreferrer nofollow">docs</a>' in out
    assert "style=" not in rendering.markdown_html("| a | b |\n|--:|:-:|\n| 1 | 2 |")  # the CSP allows no inline style


def test_plain_text_is_escaped_and_keeps_its_shape():
    assert rendering.as_html("<b>x</b>\n  y", rendering.PLAIN) == "&lt;b&gt;x&lt;/b&gt;\n  y"


def test_the_highlighting_stylesheet_is_the_formatters():
    assert rendering.pygments_css() in (ROOT / "static/css/pygments.css").read_text()


def test_both_outputs_follow_the_study_format_and_the_source_is_one_toggle_away(client, study, rater):
    assignment = start(client, rater)
    page = client.get(rate_url(rater, assignment)).content.decode()
    assert page.count('class="text md rendered output markdown"') == 2 and 'id="show-source"' in page
    assert 'data-testid="source-1"' in page and 'data-testid="source-2"' in page
    lifecycle.do_update_settings(study, {"output_format": "plain"}, None)
    page = client.get(rate_url(rater, assignment)).content.decode()
    assert page.count('class="text md rendered output plain"') == 2 and 'id="show-source"' not in page


def test_instructions_are_markdown_sanitised_like_outputs(client, study, rater):
    lifecycle.do_update_settings(study, {"instructions": "Read **both**. <script>alert(1)</script>"}, None)
    page = client.get(reverse("rater_home", args=[rater.token()])).content.decode()
    assert "<strong>both</strong>" in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
