"""The code stands alone: the formulas and interfaces it cites are pages of ``docs/``, and every citation resolves.

1. Every ``docs/<page>.md`` and ``docs/<page>.md#<section>`` cited in the repository (code, templates, the Markdown
   files, and the pages' own links to each other) names a page that exists and a section heading it has, by
   GitHub's heading anchors.
2. No file cites a specification kept outside the repository: no ``SPEC`` in code or Markdown, and no path beside
   the checkout (``../shared/...``, an absolute ``/work/...``) in code or in ``docs/``. The one exception is the real
   data in ``../shared/data``, which cannot live in the repository: the tests, the benchmarks and the management
   commands that load it may name it.
3. Code (``.py``, ``.html``, ``.js``, ``.css``; test names and docstrings included) does not refer to this project's
   issue tracker ("issue 30", "(#30)"): it says why in words. Another project's issue named with its project
   ("FastChat issue 3605", "lm-sys/FastChat#3605") is fine.

Plain file reading: no database, no Django.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SKIPPED_DIRS = {".venv", ".git", "__pycache__", "node_modules", "staticfiles", "test-artifacts", ".hypothesis"}
CODE = {".py", ".html", ".js", ".css"}
TEXT = CODE | {".md", ".txt"}

# docs/<page>.md with an optional #anchor, however the path to docs/ is written (docs/x.md, ../docs/x.md)
CITATION = re.compile(r"(?<![\w.-])(?:\.\./)*docs/([\w-]+\.md)(?:#([\w-]+))?")
# a Markdown link inside docs/ to a sibling page or a section of the same page: (page.md#anchor), (#anchor)
SIBLING_LINK = re.compile(r"\]\((?!https?:|/|\.\./)([\w-]+\.md)?(?:#([\w-]+))?\)")
SPEC = re.compile(r"\bSPEC\b|SPEC\.md")
# a path beside the checkout: ../shared/<x>, shared/<x> and "shared" / "<x>" (pathlib), or an absolute /work/ path
SHARED = re.compile(r"""(?<![\w-])(?:\.\./)*shared/(\w+)|["']shared["']\s*/\s*["'](\w+)["']""")
ABSOLUTE = re.compile(r"(?<![\w.])/work/")
# this project's issues: "issue 30", "Issues 16 and 25", "issue #30", a test named test_issue_30_...; "(#30)"
OWN_ISSUE = re.compile(r"(?<![A-Za-z])[Ii]ssues?[\s_]*#?\d+")
PULL_REQUEST = re.compile(r"\(#\d+\)")
# ...unless its project is named right before it: a name with two capitals (FastChat, LMArena), or with a slash,
# hyphen or dot inside (lm-sys/FastChat, scikit-learn), optionally possessive
OTHER_PROJECT = re.compile(r"(?:\b[A-Z]\w*[A-Z][\w.-]*|[\w.-]*[/.-][\w-]*\w)(?:'s)?\s+$")


def files(suffixes: set[str]) -> list[Path]:
    """The repository's text files with these suffixes (this test's own file left out: it names what it forbids)."""
    out = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if path.suffix in suffixes and path.is_file() and not SKIPPED_DIRS.intersection(parts):
            if path != Path(__file__).resolve():
                out.append(path)
    return sorted(out)


def anchors(page: Path) -> set[str]:
    """The heading anchors GitHub gives a Markdown page: the heading's text lowercased, every character but letters,
    digits, spaces, hyphens and underscores removed, spaces turned into hyphens; a repeated anchor gets -1, -2, ...
    Headings inside fenced code blocks are not headings; explicit ``id="..."`` / ``name="..."`` anchors count."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        found.update(re.findall(r"""\b(?:id|name)=["']([\w-]+)["']""", line))
        heading = re.match(r" {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def where(path: Path, text: str, position: int) -> str:
    return f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, position) + 1}"


def line_before(text: str, position: int) -> str:
    return text[text.rfind("\n", 0, position) + 1 : position]


def broken(page_name: str, anchor: str | None, base: Path = DOCS) -> str | None:
    page = base / page_name
    if not page.is_file():
        return f"no page {page.relative_to(ROOT)}"
    if anchor and anchor not in anchors(page):
        return f"no section #{anchor} in {page.relative_to(ROOT)}"
    return None


def test_the_docs_have_an_index_that_lists_every_page():
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    assert pages, "docs/ has no pages"
    assert {p for p in pages if f"({p})" not in index} == set()


def test_every_cited_docs_page_and_section_exists():
    problems, cited = [], 0
    for path in files(TEXT):
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in CITATION.finditer(text):
            cited += 1
            problem = broken(match.group(1), match.group(2))
            if problem:
                problems.append(f"{where(path, text, match.start())}: {match.group(0)}: {problem}")
    for page in DOCS.glob("*.md"):
        text = page.read_text(encoding="utf-8")
        for match in SIBLING_LINK.finditer(text):
            cited += 1
            problem = broken(match.group(1) or page.name, match.group(2))
            if problem:
                problems.append(f"{where(page, text, match.start())}: {match.group(0)}: {problem}")
    assert cited > 50, "the code cites the docs: a citation pattern that finds almost none is broken"
    assert problems == []


def test_the_anchors_are_github_s():
    page = DOCS / "ratings.md"
    found = anchors(page)
    assert {"sep-elo", "online-elo", "bradley-terry", "conformance-with-fastchat"} <= found
    assert "leaderboards-elo-sep-elo-bradleyterry-style-and-length-control" in found  # the en dash goes, as on GitHub


def test_nothing_cites_a_specification_outside_the_repository():
    problems = []
    for path in files(CODE | {".md"}):
        text = path.read_text(encoding="utf-8", errors="replace")
        problems += [f"{where(path, text, m.start())}: {m.group(0)}" for m in SPEC.finditer(text)]
    assert problems == []


def test_code_and_docs_point_at_nothing_beside_the_checkout_but_the_real_data():
    problems = []
    for path in files(CODE) + sorted(DOCS.glob("*.md")):
        relative = path.relative_to(ROOT)
        reads_data = relative.parts[0] in ("tests", "bench") or "commands" in relative.parts[:-1]
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in SHARED.finditer(text):
            folder = match.group(1) or match.group(2)
            if folder != "data" or not reads_data:
                problems.append(f"{where(path, text, match.start())}: {match.group(0)}")
        problems += [f"{where(path, text, m.start())}: an absolute path" for m in ABSOLUTE.finditer(text)]
    assert problems == []


def test_code_does_not_refer_to_the_project_s_issue_tracker():
    problems = []
    for path in files(CODE):
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in OWN_ISSUE.finditer(text):
            if not OTHER_PROJECT.search(line_before(text, match.start())):
                problems.append(f"{where(path, text, match.start())}: {match.group(0)}")
        if path.suffix != ".css":  # a colour in parentheses, (#123), is no pull request
            problems += [f"{where(path, text, m.start())}: {m.group(0)}" for m in PULL_REQUEST.finditer(text)]
    assert problems == []


@pytest.mark.parametrize(
    ("line", "flagged"),
    [
        ('"""Issue 30: the preview said so."""', True),
        ("# see issue #12 for why", True),
        ("(issues 16 and 25)", True),
        ("def test_issue_30_is_fixed():", True),
        ("fixed in the last review (#41)", True),
        ("# FastChat issue 3605: their bootstrap resamples rows", False),
        ("# scikit-learn's issue 27002", False),
        ("# lm-sys/FastChat#3605", False),
        ("tissue 3 of the sample", False),
        ("the issue's figures", False),
        ("raised when the plan reissues 2 places", False),
    ],
)
def test_the_issue_rule_tells_the_project_s_issues_from_other_words(line, flagged):
    own = any(not OTHER_PROJECT.search(line[: m.start()]) for m in OWN_ISSUE.finditer(line))
    assert (own or bool(PULL_REQUEST.search(line))) is flagged
