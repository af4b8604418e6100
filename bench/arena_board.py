"""The arena board's refresh in the worker after 10,000 votes (target: at most 2 s), against the study report's
refresh of the same arena in the same run (the baseline: what a board would cost if it were the whole report).

An arena of ``--systems`` systems gets ``--votes`` battles, one vote each (a prompt per battle, a Bradley-Terry
preference with ties from ``--raters`` people), stored as the arena stores them (``build``), with a researcher's
category on two battles in three, automatic tags, and every prompt a separability (so sep-ELO weighs every vote).
Then, each timed ``--repeat`` times (the median):

- board, first: ``jobs.start(study, "arena_board")`` and the job run as the worker runs it (``run_job``): the
  outlier test, every board (Bradley-Terry with clustered sandwich, sep-ELO and ELO with 100 bootstrap rounds of
  prompts, style control), the decisions, categories and counts, stored -- in a process that has not counted the
  answers' style yet;
- board, steady: the same after one more vote, in the same process (the worker's: the answers' style counts kept);
- baseline: ``analytics.stored.do_refresh`` (the whole study report) on the same arena, in the same process.

    python bench/arena_board.py [--votes 10000] [--systems 6] [--database sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scratch import setup_scratch_database  # noqa: E402

NAMES = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--votes", type=int, default=10_000)
    parser.add_argument("--systems", type=int, default=6)
    parser.add_argument("--raters", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    args = parser.parse_args()
    if args.votes < 100 or not 2 <= args.systems <= len(NAMES) or args.raters < 2 or args.repeat < 1:
        parser.error(f"need --votes >= 100, 2 <= --systems <= {len(NAMES)}, --raters >= 2, --repeat >= 1")
    setup_scratch_database("arena_board", args.database)
    measure(args)


def build(args):
    """The arena as votes leave it: a study of kind arena (its systems and every pair from a two-prompt study file),
    then per battle an item, its two systems' replies (sample 0, as a battle stores them) and their ``Pair``, the
    vote as the pair's judgment, the ``Battle`` and its prompt's separability -- written in bulk (the vote path's
    one-by-one writes would take minutes, and are bench/arena_load.py's to time)."""
    import numpy as np
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from annotation.models import Battle, Comparison, Generation, Item, Judgment, Pair, Rater, Study
    from annotation.models.items import text_hash
    from annotation.studies import creation
    from selection.models import ItemSeparability, SeparabilityRun

    systems = NAMES[: args.systems]
    strength = {s: 0.8 - 1.6 * i / (len(systems) - 1) for i, s in enumerate(systems)}
    rng = np.random.default_rng(0)
    owner, _ = get_user_model().objects.get_or_create(username="bench")
    seed_file = "".join(
        json.dumps({"id": f"seed-{i}", "input": "seed", "outputs": {s: ["seed"] for s in systems}}) + "\n"
        for i in range(2)
    ).encode()
    started = time.perf_counter()
    study = creation.do_create_study(owner, "arena-bench", seed_file, "arena.jsonl")
    Study.objects.filter(pk=study.pk).update(kind=Study.Kind.ARENA)
    study.refresh_from_db()
    comparisons = {
        frozenset((c.system_a.name, c.system_b.name)): c
        for c in Comparison.objects.filter(study=study).select_related("system_a", "system_b")
    }
    system_ids = dict(study.systems.values_list("name", "pk"))
    n = args.votes
    drawn = [tuple(rng.choice(len(systems), size=2, replace=False)) for _ in range(n)]
    with transaction.atomic():
        Rater.objects.bulk_create(
            [Rater(study=study, external_id=f"r{k}", source=Rater.Source.OPEN_LINK) for k in range(args.raters)]
        )
        raters = list(Rater.objects.filter(study=study).order_by("pk").values_list("pk", flat=True))
        Item.objects.bulk_create(
            [
                Item(study=study, external_id=f"battle-{i}", input=f"prompt {i}", position=i, metadata={"arena": True})
                for i in range(n)
            ],
            batch_size=2000,
        )
        items = dict(
            Item.objects.filter(study=study, external_id__startswith="battle-").values_list("external_id", "pk")
        )

        def reply(system: str, i: int) -> str:
            return f"{system} answers prompt {i}{' with **bold**' * (i % 2)}\n- a point\n" + "words " * (i % 40)

        Generation.objects.bulk_create(
            [
                Generation(
                    item_id=items[f"battle-{i}"],
                    system_id=system_ids[systems[k]],
                    sample_index=0,
                    text=reply(systems[k], i),
                    text_hash=text_hash(reply(systems[k], i)),
                )
                for i, pair in enumerate(drawn)
                for k in pair
            ],
            batch_size=2000,
        )
        generation = {
            (item, system): pk
            for pk, item, system in Generation.objects.filter(
                item__study=study, item__external_id__startswith="battle-"
            ).values_list("pk", "item_id", "system_id")
        }
        Pair.objects.bulk_create(
            [
                Pair(
                    item_id=items[f"battle-{i}"],
                    generation_a_id=generation[(items[f"battle-{i}"], system_ids[systems[a]])],
                    generation_b_id=generation[(items[f"battle-{i}"], system_ids[systems[b]])],
                )
                for i, (a, b) in enumerate(drawn)
            ],
            batch_size=2000,
        )
        pairs = dict(Pair.objects.filter(item__study=study).values_list("item_id", "pk"))
        now = timezone.now()
        votes, battles = [], []
        for i, (a, b) in enumerate(drawn):
            sa, sb = systems[a], systems[b]
            p_a = 1 / (1 + np.exp(-(strength[sa] - strength[sb])))
            choice = "tie" if rng.random() < 0.1 else ("a" if rng.random() < p_a else "b")
            rater = raters[int(rng.integers(args.raters))]
            when = now - timezone.timedelta(seconds=n - i)
            votes.append(
                Judgment(
                    study=study,
                    rater_id=rater,
                    pair_id=pairs[items[f"battle-{i}"]],
                    a_shown_first=True,
                    choice=choice,
                    created=when,
                    idempotency_key=f"vote-{i}",
                )
            )
            battles.append(
                Battle(
                    study=study,
                    rater_id=rater,
                    item_id=items[f"battle-{i}"],
                    comparison=comparisons[frozenset((sa, sb))],
                    a_shown_first=True,
                    category=("writing", "coding", "")[i % 3],
                    tags={"language": "en" if i % 4 else "de", "code": i % 5 == 0, "long": i % 7 == 0},
                    status=Battle.Status.VOTED,
                    created=when,
                    voted=when,
                )
            )
        Judgment.objects.bulk_create(votes, batch_size=2000)
        Battle.objects.bulk_create(battles, batch_size=2000)
        metric = study.selection_settings.separability_metric
        runs = {
            key: SeparabilityRun.objects.create(study=study, comparison=c, metric=metric)
            for key, c in comparisons.items()
        }
        deltas = rng.beta(2, 3, size=n)
        ItemSeparability.objects.bulk_create(
            [
                ItemSeparability(
                    run=runs[frozenset((systems[a], systems[b]))],
                    item_id=items[f"battle-{i}"],
                    self_a=0.9,
                    self_b=0.9,
                    cross=0.5,
                    delta=float(deltas[i]),
                )
                for i, (a, b) in enumerate(drawn)
            ],
            batch_size=2000,
        )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return study, time.perf_counter() - started


def add_vote(study, n: int) -> None:
    """One more vote on the first battle's pair (as another rater's), the way the importer's rows look."""
    from annotation.models import Judgment, Pair, Rater

    pair = Pair.objects.get(item__study=study, item__external_id="battle-0")
    rater = Rater.objects.create(study=study, external_id=f"late-{n}", source=Rater.Source.OPEN_LINK)
    Judgment.objects.create(
        study=study, rater=rater, pair=pair, a_shown_first=True, choice="a", idempotency_key=f"late-{n}"
    )


def measure(args) -> None:
    from analytics import arena, stored
    from analytics.models import ArenaBoard
    from analytics.populations import Population
    from analytics.report import data
    from annotation import jobs
    from annotation.jobs import run_job

    study, built = build(args)
    print(f"arena of {args.systems} systems, {args.votes:,} votes on {args.votes:,} prompts, built in {built:.0f} s")

    def timed(fn) -> tuple[float, float]:
        """(wall-clock seconds, this process's CPU seconds): the CPU time is what the refresh costs the worker
        whatever else the machine runs meanwhile."""
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - wall, time.process_time() - cpu

    def board() -> tuple[float, float]:
        job = jobs.start(study, arena.JOB_KIND)
        return timed(lambda: run_job.call(job.pk))

    first = []
    for _ in range(args.repeat):
        data._counted.clear()  # a worker that has not counted these answers yet
        first.append(board())
    steady = []
    for n in range(args.repeat):
        add_vote(study, n)  # one more vote
        steady.append(board())
    stored_board = ArenaBoard.objects.get(study=study)
    assert stored_board.data["counted"] == args.votes + args.repeat, stored_board.data["counted"]
    baseline = [timed(lambda: stored.do_refresh(study, Population())) for _ in range(args.repeat)]

    def median(runs: list[tuple[float, float]]) -> tuple[float, float]:
        return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)

    (bw, bc), (fw, fc), (sw, sc) = median(baseline), median(first), median(steady)
    print(f"{'refresh (median of ' + str(args.repeat) + ')':<44} {'wall s':>7} {'CPU s':>7} {'ratio (CPU)':>12}")
    print(f"{'board, first (style counted in the run)':<44} {fw:>7.2f} {fc:>7.2f} {fc / bc:>12.2f}")
    print(f"{'board, steady (worker after one more vote)':<44} {sw:>7.2f} {sc:>7.2f} {sc / bc:>12.2f}")
    print(f"{'baseline: the whole study report':<44} {bw:>7.2f} {bc:>7.2f} {1:>12.2f}")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    print(f"target: the board's steady refresh <= 2 s -- {'met' if sw <= 2 else 'NOT met'} (wall clock)")


if __name__ == "__main__":
    main()
