"""Untrusted text as HTML (annotation/rendering.py): Markdown that reads well, and nothing that runs."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.urls import reverse

from annotation import rendering
from annotation.studies import creation, lifecycle
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


# The slowest texts markdown-it-py was measured on (~10-25 microseconds a character on a loaded 2-core machine): one
# output of a million "[" once held a preview for 61.7 s, and 200,000 of them took 3.1 s a render.
HOSTILE = ["[", "![", "![[", "[a]("]


def test_a_million_brackets_are_shown_as_plain_text_at_once():
    text = "[" * 1_000_000
    started = time.perf_counter()
    out = rendering.markdown_html(text)
    assert time.perf_counter() - started < 0.5
    assert out.startswith("<p><em>Shown as plain text: it is longer than 20,000 characters")
    assert out.endswith("<pre>" + text + "</pre>")
    assert rendering.markdown_html("<b>" + "x" * 30_000).count("&lt;b&gt;") == 1  # escaped, never markup


@pytest.mark.parametrize("unit", HOSTILE)
def test_the_longest_text_rendered_as_markdown_takes_a_bounded_time(unit, settings):
    limit = settings.SEPLAB_MARKDOWN_MAX_CHARS
    text = (unit * limit)[:limit]
    rendering.clear_cache()
    started = time.thread_time()
    out = rendering.markdown_html(text)
    assert (
        time.thread_time() - started < 3.0
    )  # ~0.5 s measured on a loaded machine (CPU time: load does not stretch it)
    assert "Shown as plain text" not in out  # rendered: at the limit, not over it


def test_a_long_code_block_is_shown_without_highlighting():
    code = "import os\n" * (rendering.HIGHLIGHT_MAX_CHARS // 10 + 1)
    out = rendering.markdown_html(f"```python\n{code}```")
    assert "hl-kn" not in out and "<pre><code" in out and out.count("import os") == code.count("import os")
    assert "hl-kn" in rendering.markdown_html("```python\nimport os\n```")


def test_code_is_highlighted_in_measured_languages_within_a_budget_per_text():
    assert "hl-" not in rendering.markdown_html("```csharp\nclass A {}\n```")  # quadratic on hostile code: left out
    assert "hl-" not in rendering.markdown_html("```basemake\nall:\n```")  # over 5 s on 10,000 characters
    block = "```py\n" + "import os\n" * 200 + "```\n\n"  # 2,000 characters: the second is over the budget
    out = rendering.markdown_html(block + block)
    first, second = out.split("</pre>")[:2]
    assert "hl-kn" in first and "hl-kn" not in second and second.count("import os") == 200


@pytest.mark.slow(seconds=20)
@pytest.mark.parametrize("language", sorted(rendering.HIGHLIGHTED))
def test_each_highlighted_language_takes_a_bounded_time_on_hostile_code(language):
    """The worst inputs found for Pygments' lexers, as much of them as a text may have highlighted."""
    for unit in ("a\n", '"\\', "'\\", "(", "/*", "<!--", "{"):
        code = (unit * rendering.HIGHLIGHT_MAX_CHARS)[: rendering.HIGHLIGHT_MAX_CHARS - 1] + "\n"
        rendering.clear_cache()
        # the thread's own CPU time, not the wall clock: what a quadratic lexer would blow up, and what other
        # processes of a loaded machine (the suite's parallel workers, Chromium) do not stretch (3.8 s of wall clock
        # was once measured for 0.3 s of work while the suite ran at twice its usual time)
        started = time.thread_time()
        rendering.markdown_html(f"```{language}\n{code}```")
        assert time.thread_time() - started < 2.0, (language, unit)  # ~0.3 s at most measured


def test_many_requests_for_one_text_render_it_once(monkeypatch):
    """20 previews of one long output held all 16 of gunicorn's threads; now one renders, the others wait for it."""
    rendering.clear_cache()
    renders = []
    real = rendering._render

    def counted(text):
        renders.append(1)
        return real(text)

    monkeypatch.setattr(rendering, "_render", counted)
    text = "![" * 5_000
    barrier = threading.Barrier(20)

    def show():
        barrier.wait()
        return rendering.markdown_html(text)

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(lambda _: show(), range(20)))
    assert len(renders) == 1 and len(set(results)) == 1


def test_the_cache_holds_a_bounded_number_of_characters(monkeypatch):
    rendering.clear_cache()
    monkeypatch.setattr(rendering, "CACHE_MAX_CHARS", 50_000)
    for n in range(40):
        rendering.markdown_html(f"{n} " + "x" * 5_000)
    assert rendering._cache_chars <= 50_000 and 0 < len(rendering._cache) < 40
    assert "39 " + "x" * 10 in next(reversed(rendering._cache.values()))  # the latest kept


def test_a_preview_of_a_million_brackets_answers_at_once(researcher_client, researcher, settings):
    """The attack on the page itself: a study whose output is 1,000,000 "[" (accepted here by raising the import
    limit, as a generated output is not a study file's), previewed."""
    settings.SEPLAB_MAX_TEXT_CHARS = 2_000_000
    line = {"id": "q", "input": "Which?", "outputs": {"a": ["[" * 1_000_000], "b": ["fine"]}}
    study = creation.do_create_study(researcher, "brackets", (json.dumps(line) + "\n").encode(), "b.jsonl")
    started = time.perf_counter()
    page = researcher_client.get(reverse("study_preview", args=[study.pk]))
    assert time.perf_counter() - started < 5.0 and page.status_code == 200
    assert "Shown as plain text: it is longer than 20,000 characters" in page.content.decode()


@pytest.mark.slow(seconds=15)
@pytest.mark.django_db(transaction=True)
def test_twenty_previews_at_once_of_the_slowest_output_render_it_once(live_server, client, researcher, monkeypatch):
    """20 simultaneous previews of one 200,000-character output held all 16 of gunicorn's threads for ~50 s (and
    another researcher's study list waited 53.9 s). Over a real HTTP server's threads: the slowest text rendered as
    Markdown (the limit's length of "![") is rendered once, and every preview and the study list answer at once."""
    rendering.clear_cache()
    renders = []
    real = rendering._render

    def counted(text):
        renders.append(len(text))
        return real(text)

    monkeypatch.setattr(rendering, "_render", counted)
    hostile = ("![" * 20_000)[:20_000]
    line = {"id": "q", "input": "Which?", "outputs": {"a": [hostile], "b": ["fine"]}}
    study = creation.do_create_study(researcher, "slow", (json.dumps(line) + "\n").encode(), "s.jsonl")
    client.force_login(researcher)
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    def get(path: str) -> tuple[int, float, str]:
        started = time.perf_counter()
        request = urllib.request.Request(live_server.url + path, headers={"Cookie": cookie})
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 -- the test's own server
            return response.status, time.perf_counter() - started, response.read().decode()

    barrier = threading.Barrier(20)

    def preview(_):
        barrier.wait()
        return get(reverse("study_preview", args=[study.pk]))

    started = time.perf_counter()
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(preview, range(20)))
        listing = get(reverse("study_list"))
    assert all(status == 200 for status, _, _ in answers) and listing[0] == 200
    assert all("![" * 100 in page and "Shown as plain text" not in page for _, _, page in answers)  # as Markdown
    assert renders.count(20_000) == 1  # one render of the hostile output, however many asked for it
    assert time.perf_counter() - started < 15.0 and listing[1] < 10.0
