"""Cost of the live iterative DiffUse loop per completed assignment and per study-page load.

A study of N items (two systems, one output each) with the diffuse-iterative method, raters judging one
pair per assignment with a 50/50 coin (so the loop runs to its budget). Embeddings are random vectors put
in the cache beforehand (the loop's cost does not depend on their values; encoding 10^5 texts is not what
is measured). For each completed assignment it times the rater's submit that completes it (recording the
judgment and advancing the loop, inside the row lock), and the study page's live status; the baseline,
measured in the same run on the same state, is the previous design: rebuild the difference vectors and
the tree from the stored linkage and replay Algorithm 1 on them.

    python bench/live_loop.py [--items 5000,50000] [--completions 40]
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


def positive_list(value: str) -> list[int]:
    try:
        numbers = [int(v) for v in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, not {value!r}") from None
    if any(n < 10 for n in numbers):
        raise argparse.ArgumentTypeError("every size must be at least 10")
    return numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=positive_list, default=[5000, 50000])
    parser.add_argument("--completions", type=int, default=40, help="completed assignments measured per size")
    args = parser.parse_args()
    if args.completions < 1:
        parser.error("--completions must be at least 1")
    setup_scratch_database("live")
    print(
        f"{'items':>7} {'plan s':>7}  {'submit that completes ms p50 / p95':>35}  {'loop alone ms p50':>18}  "
        f"{'previous replay ms p50':>23}  {'study page ms: now / previous':>30}"
    )
    for n in args.items:
        measure(n, args.completions)


def measure(n_items: int, completions: int) -> None:
    import numpy as np
    from django.contrib.auth import get_user_model

    from annotation.elicitation import Answer
    from annotation.models import Item
    from annotation.plan import planning
    from annotation.rating import allocation, recording
    from annotation.studies import creation, enrolment, lifecycle
    from selection import embedding, live
    from selection.core.diffuse import Dendrogram, IterativeDiffUse
    from selection.models import Embedding, IterativeRun
    from selection.services import do_build_selection_context

    owner, _ = get_user_model().objects.get_or_create(username="bench")
    texts = {s: [f"{s} output for item {i}" for i in range(n_items)] for s in ("a", "b")}
    rng = np.random.default_rng(n_items)
    name = embedding.encoder_name()
    Embedding.objects.bulk_create(
        [
            Embedding(
                encoder=name,
                text_hash=embedding.text_hash(t),
                dim=384,
                vector=rng.normal(size=384).astype("<f4").tobytes(),
            )
            for s in texts
            for t in texts[s]
        ],
        batch_size=5000,
        ignore_conflicts=True,
    )
    lines = "".join(
        json.dumps({"id": f"i{i}", "input": f"input {i}", "outputs": {s: [texts[s][i]] for s in texts}}) + "\n"
        for i in range(n_items)
    )
    study = creation.do_create_study(owner, f"live-{n_items}", lines.encode(), "live.jsonl")
    started = time.perf_counter()
    lifecycle.do_update_settings(
        study,
        {
            "selection_method": "diffuse-iterative",
            "risk": 0.001,
            "min_n": 5,
            "budget": 200,
            "raters_per_item": 1,
            "pairs_per_assignment": 1,
            "judgments_per_assignment": 1,
        },
        None,
    )
    plan_seconds = time.perf_counter() - started
    run = IterativeRun.objects.get(study=study)
    submit_ms, loop_ms, previous_ms, page_ms, previous_page_ms = [], [], [], [], []
    coin = np.random.default_rng(0)
    for number in range(completions):
        rater = enrolment.do_create_rater_link(study, f"r{number}")
        assignment = allocation.do_start_assignment(rater)
        if assignment is None:
            break
        [pair] = assignment.pairs.all()
        started = time.perf_counter()
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(
            pair, idempotency_key=f"k{number}", answer=Answer(choice=str(coin.choice(["first", "second"])))
        )
        submit_ms.append((time.perf_counter() - started) * 1e3)
        started = time.perf_counter()
        planning.do_advance_live_selection(assignment)  # the loop's part of that submit, again (nothing new to release)
        loop_ms.append((time.perf_counter() - started) * 1e3)
        run.refresh_from_db()
        started = time.perf_counter()
        live.statuses(study)
        page_ms.append((time.perf_counter() - started) * 1e3)
        started = time.perf_counter()
        previous_replay(run, Item, do_build_selection_context, Dendrogram, IterativeDiffUse, live)
        previous_ms.append((time.perf_counter() - started) * 1e3)
        previous_page_ms.append(previous_ms[-1])  # the page replayed the same way, once per system pair
    p50, p95 = statistics.median(submit_ms), float(np.percentile(submit_ms, 95))
    print(
        f"{n_items:>7} {plan_seconds:>7.1f}  {p50:>21.1f} / {p95:<11.1f}  {statistics.median(loop_ms):>18.1f}  "
        f"{statistics.median(previous_ms):>23.1f}  "
        f"{statistics.median(page_ms):>14.1f} / {statistics.median(previous_page_ms):<13.1f}"
    )


def previous_replay(run, Item, do_build_selection_context, Dendrogram, IterativeDiffUse, live):
    """The design before the stored schedule: vectors and tree rebuilt, Algorithm 1 replayed on them."""
    import numpy as np

    by_pk = Item.objects.in_bulk(run.item_ids)
    items = [by_pk[pk] for pk in run.item_ids]
    vectors = do_build_selection_context(run.study, run.comparison, items).vectors
    groups = [np.array(g, dtype=np.int64) for g in run.leaf_groups] or None
    algorithm = IterativeDiffUse(
        Dendrogram(vectors, run.linkage_matrix(), groups), risk=run.risk, min_n=run.min_n, budget=run.budget
    )
    index = {item.pk: i for i, item in enumerate(items)}
    labels = {index[pk]: label for pk, label in live.item_labels(run.comparison).items() if pk in index}
    while True:
        for i in algorithm.to_annotate():
            if i in labels:
                algorithm.record(i, labels[i])
        if not algorithm.advance():
            break
    return algorithm


if __name__ == "__main__":
    main()
