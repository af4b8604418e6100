"""Rater reliability on the separability paper's MTurk study: for each of its four configurations (50
instances x 3 workers x 5 sampled pairs), the report's one-coin Dawid-Skene fit next to the configuration's
separability (cosine-LA, the paper's metric). Prints per configuration: the mean item separability, the workers, how
many have enough overlap to be scored, their mean reliability (kappa against the other two workers' answer, as each
worker saw the pair), how many of those fall below 0.2, how
often the inferred answer differs from the plain majority of the pair's three workers, and the leader of the plain
and of the reliability-weighted board.

    python bench/reliability_mturk.py
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scratch import setup_scratch_database  # noqa: E402

MTURK = ROOT.parent / "shared" / "data" / "separability_human_study"


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    if not (MTURK / "human_ratings_long.csv").exists():
        sys.exit(f"{MTURK} is missing: this benchmark reads the real MTurk data in ../shared/data")
    setup_scratch_database("reliability")
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from analytics.core import reliability
    from analytics.report.assembly import study_report
    from analytics.report.data import load_rows, separability_by_item
    from analytics.report.ratings import Board
    from analytics.report.reliability import Reliability, WeightedBoard
    from annotation.models import Study

    get_user_model().objects.create_user("bench")
    call_command("import_mturk_ratings", "--data", str(MTURK), "--owner", "bench", stdout=io.StringIO())
    print(
        f"{'configuration':<48} {'delta':>6} {'workers':>7} {'scored':>6} {'mean kappa':>10} {'below 0.2':>9} "
        f"{'DS != majority':>14} {'plain leader':>14} {'weighted leader':>16} {'fit s':>6}"
    )
    for study in Study.objects.order_by("name"):
        call_command("compute_separability", "--study", study.name, "--metric", "cosine-la", stdout=io.StringIO())
        deltas = [
            d for by_item in separability_by_item(study, "cosine-la").values() for d in by_item.values() if d == d
        ]
        answered = [(r, r.effective_choice) for r in load_rows(study) if r.effective_choice is not None]
        rows = [r for r, _ in answered]
        started = time.perf_counter()
        fit = reliability.one_coin_dawid_skene(
            [r.pair_id for r in rows],
            [r.rater for r in rows],
            [choice for _, choice in answered],
            [r.a_shown_first for r in rows],
        )
        seconds = time.perf_counter() - started
        votes: dict[int, list[str]] = defaultdict(list)
        for r, choice in answered:
            votes[r.pair_id].append(choice)
        majority = {p: Counter(v).most_common(1)[0][0] for p, v in votes.items()}
        differ = sum(fit.labels[p] != majority[p] for p in majority) / len(majority)
        report = study_report(study)
        weighted_board = (
            report.rater_reliability.weighted_board if isinstance(report.rater_reliability, Reliability) else None
        )
        weighted = weighted_board.leaderboard if isinstance(weighted_board, WeightedBoard) else []
        plain = report.bradley_terry.leaderboard if isinstance(report.bradley_terry, Board) else []
        scored = ~np.isnan(fit.kappa)
        print(
            f"{study.name.removeprefix('mturk-'):<48} {statistics.mean(deltas):>6.3f} {len(fit.workers):>7} "
            f"{int(scored.sum()):>6} {float(np.nanmean(fit.kappa)):>10.2f} {int((fit.kappa[scored] < 0.2).sum()):>9} "
            f"{differ:>14.1%} "
            f"{plain[0].system if plain else '-':>14} {weighted[0].system if weighted else '-':>16} {seconds:>6.2f}"
        )


if __name__ == "__main__":
    main()
