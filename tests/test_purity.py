"""The pure modules (file formats, scheduling, selection strategies, battles files, leaderboards and the report's JSON
converter) import no Django, so they stay fast to test and reusable outside the web app (and ``manage.py leaderboard``
starts fast)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PURE = [
    "annotation/exchange/judgment_files.py",
    "annotation/exchange/rules.py",
    "annotation/exchange/study_files.py",
    "annotation/plan/scheduling.py",
    "selection/strategies.py",
    "analytics/battles.py",
    "analytics/leaderboards.py",
    "analytics/report/serial.py",
] + sorted(
    str(p.relative_to(ROOT)) for pattern in ("selection/core/*.py", "analytics/core/*.py") for p in ROOT.glob(pattern)
)


@pytest.mark.parametrize("path", PURE)
def test_pure_modules_do_not_import_django(path):
    tree = ast.parse((ROOT / path).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert not {name for name in imported if name.split(".")[0] in ("django", "rest_framework")}
    assert imported or path.endswith("__init__.py"), "the parser found no imports at all; is the path right?"
