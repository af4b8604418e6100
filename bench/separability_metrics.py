"""Which separability metric agrees with the separability paper's own human study?

Imports the paper's public MTurk rating sets (../shared/data/separability_human_study: four model pair and
dataset configurations, 50 instances x 3 workers x 5 pairs, K = 5 samples per model) into a throw-away
SQLite database with `import_mturk_ratings`, computes separability under every metric with the product's
own service, and prints, per metric: each configuration's mean delta (the paper chose them as Low / High /
Medium / Medium), Spearman's rho between an item's delta and its mean human consistency, and mean
consistency over 5 equal-count delta bins pooled over the four configurations (the paper's Fig. 8), as
`report --studies` computes it.

    python bench/separability_metrics.py [--metrics cosine,cosine-la,rouge1,rouge1-la,bleu,bleu-la]
"""

from __future__ import annotations

import argparse
import sys
import time
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scratch import setup_scratch_database  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "separability_human_study"
CONFIGS = [  # the paper's order (§3.2) with its intended separability level
    ("vicuna-7b_gpt-3.5-turbo-instruct_cnn_dm", "Low"),
    ("flan-t5-xxl_gpt-3.5_turbo_instruct_cnn_dm", "High"),
    ("vicuna-7b_gpt-3.5-turbo-instruct_samsum", "Medium"),
    ("mistral-7b_vicuna-7b_samsum", "Medium"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metrics", default="cosine,cosine-la,rouge1,rouge1-la,bleu,bleu-la")
    args = parser.parse_args()
    if not (DATA / "human_ratings_long.csv").exists():
        sys.exit(f"{DATA} is missing: the human study lives in ../shared/data (see shared/data/README.md)")
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    setup_scratch_database("metrics")
    from selection.services import parse_metric

    for metric in metrics:
        try:
            parse_metric(metric)
        except ValueError as exc:
            parser.error(str(exc))
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from analytics.report.consistency import PooledConsistency, pooled_consistency
    from annotation.models import Study
    from selection import services as selection_services

    get_user_model().objects.create_user("bench")
    call_command("import_mturk_ratings", "--data", str(DATA), "--owner", "bench", stdout=StringIO())
    studies = [Study.objects.get(name=f"mturk-{config}") for config, _ in CONFIGS]
    labels = [f"{level} ({config.split('_')[0]}…{config.rsplit('_', 1)[-1]})" for config, level in CONFIGS]
    print(
        f"{'metric':<10} {'seconds':>7}  "
        + "  ".join(f"{label:>24}" for label in labels)
        + "   equal-count bins (pooled, mean consistency)  monotone"
    )
    for metric in metrics:
        started = time.perf_counter()
        for study in studies:
            selection_services.do_compute_separability(study, metric)
        pooled = PooledConsistency.from_json(pooled_consistency(studies, metric).to_json())
        seconds = time.perf_counter() - started
        cells = [f"{s.mean_separability:.3f} rho {s.spearman_separability_consistency:+.2f}" for s in pooled.studies]
        curve = [b.mean for b in pooled.bins["human"].equal_count]
        print(
            f"{metric:<10} {seconds:7.1f}  "
            + "  ".join(f"{c:>24}" for c in cells)
            + "   "
            + " ".join(f"{v:.3f}" for v in curve)
            + f"  {'yes' if curve == sorted(curve) else 'no'}"
        )


if __name__ == "__main__":
    main()
