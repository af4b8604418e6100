"""Cost of the plan's decision step per completed assignment (the setting "Stop buying decided pairs",
docs/decisions.md#stop-buying-decided-pairs).

A study of P system pairs (every item on every pair) and N items, one rater per item, one pair per assignment; the
first system wins about 55 % of the items, so most pairs stay undecided and every completion updates a decision.
After a warm-up of W completed assignments per pair, it times ``planning.do_close_decided_pairs`` for each further
completion: the stored confidence sequence advanced by the items the assignment completed (O(grid)). The baseline,
measured in the same run on the same state, is what the step would cost without the stored state: the pair's item
scores read again and the whole sequence recomputed (``pair_item_scores`` + ``betting_confidence_sequence``).

Then it times a new rater's start (``allocation.do_start_assignment``) in the same study, which finishes started items
first while it stops buying decided pairs: with the open tasks' own index (``task_fill_order``), then with that index
dropped (the previous design, the plain ``task_open_order`` index), each ``--completions`` times.

    python bench/decision_step.py [--systems 9] [--items 1000] [--warmup 300] [--completions 40] [--database postgresql]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scratch import setup_scratch_database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", type=int, default=9, help="systems (9 make 36 pairs, the timed size)")
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=300, help="completed assignments per pair before timing")
    parser.add_argument("--completions", type=int, default=40, help="completions timed")
    parser.add_argument(
        "--database",
        choices=["sqlite", "postgresql"],
        default="sqlite",
        help="a SQLite file, or a PostgreSQL database of the run's own on 127.0.0.1:5432 (dropped after)",
    )
    args = parser.parse_args()
    if args.systems < 2 or args.items < 10 or args.warmup < 1 or args.completions < 1:
        parser.error("need --systems >= 2, --items >= 10, --warmup and --completions >= 1")
    setup_scratch_database("decisions", args.database)
    measure(args.systems, args.items, args.warmup, args.completions)


def measure(n_systems: int, n_items: int, warmup: int, completions: int) -> None:
    import random

    import numpy as np
    from django.contrib.auth import get_user_model
    from django.db import connection

    from annotation.elicitation import Answer
    from annotation.models import Assignment, Judgment
    from annotation.plan import planning
    from annotation.rating import allocation, recording
    from annotation.studies import creation, enrolment, lifecycle
    from selection import rating_sets
    from selection.core import decisions

    systems = [f"s{k}" for k in range(n_systems)]
    lines = "".join(
        json.dumps({"id": f"i{i}", "input": f"Question {i}?", "outputs": {s: [f"{s} answers {i}."] for s in systems}})
        + "\n"
        for i in range(n_items)
    ).encode()
    owner = get_user_model().objects.create_user("bench")
    started = time.perf_counter()
    study = creation.do_create_study(owner, "decisions", lines, "d.jsonl")
    lifecycle.do_update_settings(
        study,
        {
            "scheduling": "no_repeat",
            "raters_per_item": 1,
            "pairs_per_assignment": 1,
            "judgments_per_assignment": 1,
            "selection_method": "random",
            "stop_when_decided": True,
            "decision_margin": 0.0,
        },
        None,
    )
    pairs = study.comparisons.count()
    print(f"{pairs} pairs x {n_items} items: study and plan in {time.perf_counter() - started:.1f} s")
    rng = random.Random(0)
    rater_count = 0
    timings: list[float] = []
    real_step = planning.do_close_decided_pairs

    queries: list[int] = []

    def timed_step(assignment) -> None:  # the step as it runs, inside the submit that completes the assignment
        count = [0]

        def counted(execute, *args):
            count[0] += 1
            return execute(*args)

        with connection.execute_wrapper(counted):
            t0 = time.perf_counter()
            real_step(assignment)
            timings.append((time.perf_counter() - t0) * 1000)
        queries.append(count[0])

    planning.do_close_decided_pairs = timed_step

    def complete() -> Assignment | None:
        nonlocal rater_count
        rater = enrolment.do_create_rater_link(study, f"r{rater_count}")
        rater_count += 1
        assignment = allocation.do_start_assignment(rater)
        if assignment is None:
            return None
        for pair in assignment.pairs.all():
            allocation.do_mark_shown(pair)
            recording.do_record_judgment(
                pair, idempotency_key=f"k{pair.pk}", answer=Answer(choice="first" if rng.random() < 0.55 else "second")
            )
        return assignment

    started = time.perf_counter()
    for _ in range(warmup * pairs):
        if complete() is None:
            break
    print(f"warm-up: {Judgment.objects.count()} judgments in {time.perf_counter() - started:.1f} s")
    step, recompute = [], []
    for _ in range(completions):
        timings.clear()
        assignment = complete()
        if assignment is None:
            break
        step.append(timings[-1])
        comparison = assignment.places.get().task.comparison
        t0 = time.perf_counter()
        scored, _ = rating_sets.pair_item_scores(comparison)
        decisions.betting_confidence_sequence(np.array([s for _, s in scored]), study.selection_settings.decision_alpha)
        recompute.append((time.perf_counter() - t0) * 1000)
    if not step:
        sys.exit(
            f"nothing left to time after the warm-up ({Judgment.objects.count()} judgments): every pair was decided or "
            "stopped for futility (racing feeds the pairs nearest a decision first); use a smaller --warmup"
        )
    p50, p95 = statistics.median(step), sorted(step)[int(0.95 * (len(step) - 1))]
    base = statistics.median(recompute)
    print(
        f"decision step per completed assignment: p50 {p50:.2f} ms, p95 {p95:.2f} ms "
        f"(recomputing the pair instead: p50 {base:.1f} ms; ratio {p50 / base:.3f}); "
        f"queries per step: {statistics.median(queries[-len(step) :]):.0f}"
    )

    def starts() -> list[float]:  # a new rater's start, as the rating link's first request runs it
        nonlocal rater_count
        took = []
        for _ in range(completions):
            rater = enrolment.do_create_rater_link(study, f"r{rater_count}")
            rater_count += 1
            t0 = time.perf_counter()
            allocation.do_start_assignment(rater)
            took.append((time.perf_counter() - t0) * 1000)
        return took

    planning.do_close_decided_pairs = real_step
    study.refresh_from_db()
    indexed = starts()
    with connection.cursor() as cursor:  # the previous design: depth first read through the plain open-tasks index
        cursor.execute("DROP INDEX task_fill_order")
    plain = starts()
    print(
        f"a rater's start (finishing started items first: {study.fill_items_first}): p50 "
        f"{statistics.median(indexed):.2f} ms with the open tasks' own index, {statistics.median(plain):.2f} ms "
        f"through the plain index (ratio {statistics.median(indexed) / statistics.median(plain):.3f})"
    )


if __name__ == "__main__":
    main()
