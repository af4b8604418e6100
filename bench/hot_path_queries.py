"""The rating page's query three ways, in-process: compiled once per thread (annotation/compiled.py, what
the page runs: its pairs with every column of the assignment, rater and study), the same query through
the plain ORM, and a lean plain-ORM query selecting only the columns the page uses. Per call, median of
``--calls`` calls after a warm-up, on SQLite and (when it answers) PostgreSQL in a database of its own.

    python bench/hot_path_queries.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the rating page and its template read of the assignment, rater and study (besides the pair columns).
LEAN = (
    "assignment__id",
    "assignment__status",
    "assignment__completion_code",
    "assignment__rater_id",
    "assignment__rater__source",
    "assignment__rater__screened_out",
    "assignment__rater__token_nonce",
    "assignment__study__id",
    "assignment__study__name",
    "assignment__study__elicitation",
    "assignment__study__allow_tie",
    "assignment__study__tie_label",
    "assignment__study__question",
    "assignment__study__response_set_question",
    "assignment__study__also_acceptable_question",
)


def measure(calls: int) -> dict[str, float]:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from annotation import access
    from annotation.models import AssignmentPair
    from annotation.rating import allocation
    from annotation.studies import creation, enrolment
    from annotation.views.raters import _PAGE, PAIR_COLUMNS

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user(f"hot-{secrets.token_hex(4)}")
    lines = "".join(
        json.dumps(
            {"id": f"i{i}", "input": f"Input {i}", "outputs": {s: [f"{s}{i}-{k}" for k in range(5)] for s in "ab"}}
        )
        + "\n"
        for i in range(50)
    )
    study = creation.do_create_study(owner, f"hot-{secrets.token_hex(4)}", lines.encode(), "hot.jsonl")
    rater = enrolment.do_create_rater_link(study, "r")
    assignment = allocation.do_start_assignment(rater)
    if assignment is None:
        raise RuntimeError("a new rater of a new study got no assignment")

    def plain(columns):
        return lambda: list(
            AssignmentPair.objects.filter(assignment_id=assignment.pk, assignment__rater_id=rater.pk)
            .order_by("position")
            .values(*PAIR_COLUMNS, *columns)
        )

    variants = {
        "compiled (69 columns)": lambda: _PAGE.rows(assignment=assignment.pk, rater=rater.pk),
        "plain ORM, same columns": plain(access.assignment_columns()),
        f"plain ORM, lean ({len(PAIR_COLUMNS) + len(LEAN)} columns)": plain(LEAN),
    }
    out = {}
    for name, run in variants.items():
        for _ in range(200):
            run()
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            run()
            times.append((time.perf_counter() - started) * 1e6)
        out[name] = statistics.median(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--database", help=argparse.SUPPRESS)  # internal: run one database in this process
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    if args.database:
        os.environ.update({"DATABASE_URL": args.database, "DJANGO_SETTINGS_MODULE": "config.settings"})
        os.environ.setdefault("DEBUG", "1")  # a local measurement, in development mode
        sys.path.insert(0, str(ROOT))
        print(json.dumps(measure(args.calls)))
        return
    databases = {"SQLite": f"sqlite:///{Path(tempfile.mkdtemp(prefix='seplab-hot-')) / 'hot.sqlite3'}"}
    name = f"seplab_hot_{secrets.token_hex(4)}"
    pg = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"CREATE DATABASE {name}"], capture_output=True
    )
    if pg.returncode == 0:
        databases["PostgreSQL"] = f"postgres://postgres@127.0.0.1:5432/{name}"
    try:
        for label, url in databases.items():
            result = subprocess.run(
                [sys.executable, __file__, "--calls", str(args.calls), "--database", url],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            figures = json.loads(result.stdout.strip().splitlines()[-1])
            print(label + ": " + "; ".join(f"{k} {v:.0f} µs" for k, v in figures.items()))
    finally:
        if pg.returncode == 0:
            subprocess.run(
                ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"DROP DATABASE {name} WITH (FORCE)"],
                capture_output=True,
            )


if __name__ == "__main__":
    main()
