"""Shared fixtures: a researcher who owns a study, another researcher, raters, and small study files."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from django.contrib.auth import get_user_model

from annotation.elicitation import Answer
from annotation.models import Rater
from annotation.rating import allocation, imports, recording
from annotation.studies import creation, enrolment, lifecycle


def found(pattern: str, text: str, flags: int = 0) -> re.Match[str]:
    """The first match of ``pattern`` in ``text`` (``re.search``); fails the test when there is none."""
    match = re.search(pattern, text, flags)
    assert match is not None, f"{pattern!r} is not in the text"
    return match


T = TypeVar("T")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """Every test run gets a database of its own, with a unique name (two runs on one machine, e.g. CI next
    to a developer's run, never share or drop each other's): test_seplab_<pid>_<random> on PostgreSQL,
    .test-db-<pid>_<random>.sqlite3 on SQLite. pytest-django drops it at the end of the run."""
    import os
    import secrets
    from pathlib import Path

    from django.conf import settings

    db = settings.DATABASES["default"]
    suffix = f"{os.getpid()}_{secrets.token_hex(3)}"
    test = db.setdefault("TEST", {})
    if db["ENGINE"].endswith("sqlite3"):
        test["NAME"] = str(Path(settings.BASE_DIR) / f".test-db-{suffix}.sqlite3")
    else:
        test["NAME"] = f"test_{db['NAME']}_{suffix}"


def pytest_collection_modifyitems(config, items):
    """The slow tests first, most seconds first, each followed by a quick one: make test's scheduler
    (``--dist load --maxschedchunk 2``) hands the tests out two at a time in this order to whichever worker is free,
    so the long ones start at once on different workers and no worker ends the run alone on one. The rest keep
    pytest's order. This runs after pytest-django's own ordering, so a few transactional tests (the browser's,
    the migrations') run before ordinary ones: safe here, as every test makes the rows it reads (the migrations'
    data steps only rewrite existing rows, and Django re-creates content types and permissions after a flush)."""
    slow = [item for item in items if item.get_closest_marker("slow")]
    if not slow:
        return
    slow.sort(key=lambda item: -item.get_closest_marker("slow").kwargs.get("seconds", 0))
    chosen = set(slow)
    quick = [item for item in items if item not in chosen]
    front = [item for pair in zip(slow, quick, strict=False) for item in pair]
    items[:] = front + slow[len(front) // 2 :] + quick[len(slow) :]


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def shared_rows(django_db_blocker, build: Callable[[], T]) -> Iterator[T]:
    """For a module-scoped fixture (``yield from shared_rows(django_db_blocker, build)``) whose rows -- a real-data
    study, say -- every test of the module reads: ``build`` writes them once, in a transaction that each test's own
    transaction nests in (a savepoint, rolled back after the test, so what a test changes does not reach the next),
    and the transaction is rolled back after the module's last test. The database is unblocked only to open and
    close it: a test without ``db`` still may not touch the database. Only for modules without transactional tests
    (they would flush the rows). Once per stretch of the module's tests on a worker: make test's scheduler may split
    a module between workers (each writes its own copy, in its own database), and pytest closes the transaction
    before a test of another module runs, so no other module ever sees the rows."""
    from django.db import transaction

    outer = transaction.atomic()
    with django_db_blocker.unblock():
        outer.__enter__()
        try:
            built = build()
        except BaseException:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
            raise
    try:
        yield built
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def study_jsonl(n_items: int = 4, systems: tuple[str, ...] = ("sys-a", "sys-b"), k: int = 5) -> bytes:
    lines = []
    for i in range(n_items):
        lines.append(
            json.dumps(
                {
                    "id": f"item-{i}",
                    "input": f"Input text number {i}.",
                    "outputs": {s: [f"{s} output {j} for item {i}." for j in range(k)] for s in systems},
                }
            )
        )
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def researcher(db):
    return get_user_model().objects.create_user("alice", password="pw-alice")


@pytest.fixture
def other_researcher(db):
    return get_user_model().objects.create_user("bob", password="pw-bob")


@pytest.fixture
def researcher_client(client, researcher):
    client.force_login(researcher)
    return client


@pytest.fixture
def study(researcher):
    """Two systems, four items, K = N = 5 (each sample shown once per rating set), three raters per item, and
    one item (its five pairs) per assignment."""
    study = creation.do_create_study(researcher, "small", study_jsonl(), "small.jsonl")
    return lifecycle.do_update_settings(study, {"judgments_per_assignment": 5}, None)


@pytest.fixture
def rater(study) -> Rater:
    return enrolment.do_create_rater_link(study, "rater-1")


def answer_all(assignment, choice: str = "first") -> None:
    """Judge every pair of an assignment through the service."""
    for index, pair in enumerate(assignment.pairs.all()):
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key=f"{assignment.pk}-{index}", answer=Answer(choice=choice))


@pytest.fixture(autouse=True)
def fresh_cache():
    """Rate-limit counters live in the cache: every test starts from zero."""
    from django.core.cache import cache

    cache.clear()
    yield


def refresh_reports() -> int:
    """Run the queued report refresh jobs in this test's transaction (``db_worker`` closes the connection,
    which only transactional tests survive; tests/analytics/test_stored_report.py runs the real worker)."""
    from annotation.jobs import run_job
    from annotation.models import Job

    jobs = list(Job.objects.filter(kind="report", status=Job.Status.QUEUED).values_list("pk", flat=True))
    for pk in jobs:
        run_job.call(pk)
    return len(jobs)


def import_judge_verdicts(study, judges: tuple[str, ...] = ("judge-x", "judge-y")) -> int:
    """Give every item of every system pair of ``study`` verdicts by LLM judges in both presentation orders (the
    study's first samples), varied by item so some items see the judges agree and others split or flip. Returns the
    number of verdicts imported."""
    items = list(study.items.order_by("position").values_list("external_id", flat=True))
    pairs = [(c.system_a.name, c.system_b.name) for c in study.comparisons.select_related("system_a", "system_b")]
    lines = []
    for i, item in enumerate(items):
        for a, b in pairs:
            for j, judge in enumerate(judges):
                for order, first in enumerate((a, b)):
                    # judge j says: the first system on most items; on every third item the answer shown first;
                    # on every fifth a tie
                    choice = "tie" if (i + j) % 5 == 0 else (first if (i + j) % 3 == 0 else a)
                    lines.append(
                        {
                            "id": f"{judge}-{item}-{a}-{b}-{order}",
                            "item": item,
                            "system_a": a,
                            "sample_a": 0,
                            "system_b": b,
                            "sample_b": 0,
                            "shown_first": first,
                            "rater": judge,
                            "rater_kind": "judge",
                            "choice": choice,
                        }
                    )
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return imports.do_import_judgments(study, data, "judges.jsonl").created
