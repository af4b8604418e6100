"""Researcher pages and the API on a large study: the study list, the study page, its items and one item, the API's
study list, study, items and judgments (first and last page), and the judgment exports (JSONL and CSV, page and
API), each timed through the Django test client against the same page of a tiny study in the same run (the
baseline: its owner has only that study).

The large study (``--items`` items, ``--systems`` systems, every system pair of every item, ``--raters`` raters of
whom a tenth are judges, ``--judgments`` judgments) is built through the product's own study import, then its
pairs, raters and judgments are written straight into the tables through the models' columns: PostgreSQL's COPY,
SQLite's bulk insert (not the rating path: building 10⁶ judgments through it would take hours). The database is
a throw-away one of the run's own (bench/scratch.py), dropped at the end.

    python bench/large_study.py [--judgments 1000000] [--items 210] [--database postgresql|sqlite]

Each line: the page, its median time over ``--repeat`` requests (an export: one request, read to its end), the tiny
study's, the ratio, the SQL queries the page ran (on the large study / on the tiny one) and the bytes it sent. On
PostgreSQL the tables are analysed once built (as autovacuum would).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scratch import setup_scratch_database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judgments", type=int, default=1_000_000, help="judgments in the large study")
    parser.add_argument("--items", type=int, default=210, help="items in the large study")
    parser.add_argument("--systems", type=int, default=4, help="systems (every pair of them is compared)")
    parser.add_argument("--raters", type=int, default=500, help="raters in the large study (a tenth are judges)")
    parser.add_argument("--repeat", type=int, default=3, help="requests per page (the median is shown)")
    parser.add_argument(
        "--database",
        choices=["sqlite", "postgresql"],
        default="postgresql",
        help="a SQLite file, or a PostgreSQL database of the run's own on 127.0.0.1:5432 (dropped after)",
    )
    parser.add_argument("--skip-exports", action="store_true", help="leave the four full exports out")
    args = parser.parse_args()
    if args.judgments < 1 or args.items < 2 or args.systems < 2 or args.raters < 10 or args.repeat < 1:
        parser.error("need --judgments >= 1, --items >= 2, --systems >= 2, --raters >= 10 and --repeat >= 1")
    setup_scratch_database("large", args.database)
    measure(args)


def build(owner_name: str, name: str, n_items: int, n_systems: int, n_raters: int, n_judgments: int):
    """A study of the given size, owned by a new researcher; returns (owner, study, seconds to build)."""
    import json
    import random

    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from annotation.models import Generation, Judgment, Pair, Rater
    from annotation.studies import creation

    started = time.perf_counter()
    systems = [f"s{k}" for k in range(n_systems)]
    lines = "".join(
        json.dumps({"id": f"i{i}", "input": f"Question {i}?", "outputs": {s: [f"{s} answers {i}."] for s in systems}})
        + "\n"
        for i in range(n_items)
    ).encode()
    owner = get_user_model().objects.create_user(owner_name)
    study = creation.do_create_study(owner, name, lines, f"{name}.jsonl")
    generations: dict[int, list[Generation]] = {}
    for g in Generation.objects.filter(item__study=study).order_by("item_id", "system_id"):
        generations.setdefault(g.item_id, []).append(g)
    Pair.objects.bulk_create(
        [
            Pair(item_id=item_id, generation_a=a, generation_b=b)
            for item_id, gens in generations.items()
            for a, b in itertools.combinations(gens, 2)
        ],
        ignore_conflicts=True,
    )
    pairs = list(Pair.objects.filter(item__study=study).values_list("id", flat=True))
    Rater.objects.bulk_create(
        [
            Rater(
                study=study,
                external_id=f"r{k}",
                kind=Rater.Kind.JUDGE if k % 10 == 0 else Rater.Kind.HUMAN,
                source=Rater.Source.IMPORT,
            )
            for k in range(n_raters)
        ]
    )
    raters = list(study.raters.values_list("id", flat=True))
    rng = random.Random(1)
    now = timezone.now()
    # the columns set here; every other column gets its field's default (a field added later stays valid)
    fields = [f for f in Judgment._meta.concrete_fields if not f.primary_key]

    def values(k: int) -> dict:
        created = now - timedelta(seconds=n_judgments - k)
        return {
            "study_id": study.pk,
            "rater_id": raters[k % len(raters)],
            "pair_id": pairs[rng.randrange(len(pairs))],
            "a_shown_first": bool(k % 2),
            "choice": ("a", "b", "tie")[rng.randrange(3)],
            "created": created,
            "recorded": created,
            "time_on_task_ms": rng.randrange(2_000, 60_000),
            "idempotency_key": f"{name}-{k}",
            "revised": k % 50 == 0,
        }

    defaults = {f.attname: f.get_default() for f in fields}
    with transaction.atomic():
        if connection.vendor == "postgresql":
            prepared = {f.attname: f.get_db_prep_save(defaults[f.attname], connection) for f in fields}
            columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
            with connection.cursor() as cursor:
                raw = cursor.cursor  # psycopg's own cursor: COPY
                with raw.copy(f"COPY {Judgment._meta.db_table} ({columns}) FROM STDIN") as copy:
                    for k in range(n_judgments):
                        row = {**prepared, **values(k)}
                        copy.write_row([row[f.attname] for f in fields])
        else:
            for start in range(0, n_judgments, 10_000):
                Judgment.objects.bulk_create(
                    [Judgment(**{**defaults, **values(k)}) for k in range(start, min(n_judgments, start + 10_000))]
                )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return owner, study, time.perf_counter() - started


def measure(args) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    owner, study, seconds = build("large", "large", args.items, args.systems, args.raters, args.judgments)
    print(
        f"built on {connection.vendor}: {study.items.count()} items, {study.judgments.count():,} judgments, "
        f"{study.raters.count()} raters in {seconds:.1f} s",
        flush=True,
    )
    tiny_owner, tiny, _ = build("tiny", "tiny", 10, args.systems, 10, 100)

    def pages(s) -> list[tuple[str, str]]:
        item = s.items.order_by("position").first()
        n_pages = max(1, -(-s.judgments.count() // 100))
        out = [
            ("study list", reverse("study_list")),
            ("study page", reverse("study_detail", args=[s.pk])),
            ("items page", reverse("study_items", args=[s.pk])),
            ("item page", reverse("item_detail", args=[s.pk, item.pk])),
            ("API studies", "/api/studies/"),
            ("API study", f"/api/studies/{s.pk}/"),
            ("API items", f"/api/studies/{s.pk}/items/"),
            ("API judgments, page 1", f"/api/studies/{s.pk}/judgments/"),
            ("API judgments, last page", f"/api/studies/{s.pk}/judgments/?page={n_pages}"),
        ]
        if not args.skip_exports:
            out += [
                ("export JSONL (page)", reverse("judgments_export", args=[s.pk, "jsonl"])),
                ("export CSV (page)", reverse("judgments_export", args=[s.pk, "csv"])),
                ("export JSONL (API)", f"/api/studies/{s.pk}/judgments/export/?as=jsonl"),
                ("export CSV (API)", f"/api/studies/{s.pk}/judgments/export/?as=csv"),
            ]
        return out

    def timed(client: Client, url: str, repeat: int) -> tuple[float, int, int]:
        times = []
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(url)
                size = len(response.getvalue())  # a streamed response read to its end
                times.append(time.perf_counter() - started)
            assert response.status_code == 200, (url, response.status_code)
        return statistics.median(times), len(queries), size

    large_client, tiny_client = Client(), Client()
    large_client.force_login(owner)
    tiny_client.force_login(tiny_owner)
    print(f"{'page':<28} {'large':>10} {'tiny':>9} {'ratio':>8}   queries large / tiny   bytes")
    for (label, url), (_, tiny_url) in zip(pages(study), pages(tiny), strict=True):
        repeat = 1 if label.startswith("export") else args.repeat  # an export reads every judgment: once is enough
        t_large, q_large, size = timed(large_client, url, repeat)
        t_tiny, q_tiny, _ = timed(tiny_client, tiny_url, repeat)
        print(
            f"{label:<28} {t_large * 1000:>8.1f}ms {t_tiny * 1000:>7.1f}ms {t_large / t_tiny:>8.1f}   "
            f"{q_large:>6} / {q_tiny:<6}        {size:,}",
            flush=True,
        )


if __name__ == "__main__":
    main()
