"""The saving, where it has to hold: every replay design of ``simulate --replay`` on PRD's 10 system pairs, measured
against a two-sided t-test on all of a pair's items (bench/README.md, "The saving, where it has to hold").

    DEBUG=1 DATABASE_URL=sqlite:////tmp/replay/db.sqlite3 python bench/replay_prd.py --seeds 50 --null-seeds 100

Builds the PRD study with ``load_prd`` when the database has none (migrate first). Per design, through
``simulate --replay --json`` (real orders and ``--null``): among the pairs the t-test on all items (item scores = mean
of the item's votes, against a half, alpha = 0.05) decides, the share of records with the same decision; direction
errors (a direction opposite to the sign of the pair's win rate on all its items); A/A false decisions per pair and
study-wide (orders in which any pair decided a direction); human judgments bought against the fixed design, overall
and per decision the t-test agrees with.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

DESIGNS = {
    "continuous, one rater first": ["--looks", "0"],
    "continuous, whole items": ["--looks", "0", "--first-raters", "all"],
    "group-sequential 5 looks, one rater first": ["--looks", "5"],
    "group-sequential 5 looks, whole items": ["--looks", "5", "--first-raters", "all"],
    "judges, continuous, one rater first": ["--judges", "--looks", "0"],
    "judges, group-sequential 5 looks, one rater first": ["--judges", "--looks", "5"],
    "judges, group-sequential 5 looks, whole items": ["--judges", "--looks", "5", "--first-raters", "all"],
    "group-sequential 5 looks, futility 0.1, one rater first": ["--looks", "5", "--futility", "0.1"],
    "group-sequential 5 looks, futility 0.1, whole items": [
        "--looks",
        "5",
        "--futility",
        "0.1",
        "--first-raters",
        "all",
    ],
    "judges, group-sequential 5 looks, futility 0.1, whole items": [
        "--judges",
        "--looks",
        "5",
        "--futility",
        "0.1",
        "--first-raters",
        "all",
    ],
}


def load_studies(names: list[str]) -> tuple[list, dict, dict]:
    """The studies (PRD built with ``load_prd`` when missing; Django set up first), and per (study, pair) the sign
    of its win rate on all items and the two-sided t-test's decision on them (alpha 0.05; "undecided" otherwise)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from scipy import stats

    from analytics.populations import Population
    from analytics.report.data import admitted, load_rows
    from analytics.report.stopping import item_scores, pair_rating_sets
    from annotation.models import Study

    if "prd-vicuna80" in names and not Study.objects.filter(name="prd-vicuna80").exists():
        owner, _ = get_user_model().objects.get_or_create(username="bench")
        call_command("load_prd", "--owner", owner.username, stdout=StringIO())
    studies = [Study.objects.get(name=n) for n in names]
    truth, ttest = {}, {}
    for study in studies:
        rows = admitted(load_rows(study), Population())
        for c in study.comparisons.select_related("system_a", "system_b"):
            scores, _ = item_scores(pair_rating_sets(rows, (c.system_a.name, c.system_b.name)))
            key = (study.name, str(c))
            truth[key] = "a" if scores.mean() > 0.5 else "b"
            p = stats.ttest_1samp(scores, 0.5).pvalue
            ttest[key] = truth[key] if p < 0.05 else "undecided"
    return studies, truth, ttest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--null-seeds", type=int, default=100)
    parser.add_argument("--error-control", default=None, help="per_pair / study_wide / auto (default: the study's)")
    parser.add_argument("--only", default="", help="comma-separated design numbers (1-based) to run")
    parser.add_argument(
        "--studies",
        default="prd-vicuna80",
        help="comma-separated study names (default PRD, built when missing; others must exist, e.g. "
        "import_mturk_ratings' mturk-*); figures pool their records, study-wide A/A per study and order",
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    names = [n for n in args.studies.split(",") if n]
    studies, truth, ttest = load_studies(names)
    print("t-test on all items:", {f"{k[0]}: {k[1]}": v for k, v in ttest.items()})

    def run(extra: list[str], seeds: int, null: bool) -> list[dict]:
        control = ["--error-control", args.error_control] if args.error_control else []
        flags = ["--null"] if null else []
        records = []
        for study in studies:
            out = StringIO()
            call_command(
                "simulate",
                "--study",
                study.name,
                "--replay",
                "--json",
                "--seeds",
                str(seeds),
                *extra,
                *control,
                *flags,
                stdout=out,
            )
            records += [
                {**r, "pair": (study.name, r["pair"]), "seed": (study.name, r["seed"])}
                for r in json.loads(out.getvalue())
            ]
        return records

    chosen = {int(x) for x in args.only.split(",") if x} or set(range(1, len(DESIGNS) + 1))
    print(
        "| design | alpha per pair | same decision as the t-test (pairs it decides) | direction errors | A/A false, "
        "per pair | A/A false, study-wide | human judgments used of fixed | fewer | per agreeing decision |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for number, (name, extra) in enumerate(DESIGNS.items(), start=1):
        if number not in chosen:
            continue
        real, null = run(extra, args.seeds, False), run(extra, args.null_seeds, True)
        decided = [r for r in real if ttest[r["pair"]] != "undecided"]
        same = sum(r["decision"] == ttest[r["pair"]] for r in decided)
        directional = [r for r in real if r["decision"] in ("a", "b")]
        wrong = sum(r["decision"] != truth[r["pair"]] for r in directional)
        false = [r for r in null if r["decision"] in ("a", "b")]
        orders = {r["seed"] for r in null}
        any_false = len({r["seed"] for r in false})
        used, fixed = sum(r["judgments_used"] for r in real), sum(r["judgments_fixed"] for r in real)
        # per decision: the fixed design's judgments per t-test decision against the design's per agreeing one
        fixed_per = fixed / max(len(decided), 1)
        used_per = used / max(same, 1)
        verdicts = sum(r.get("judge_verdicts_used", 0) for r in real)
        print(
            f"| {name} | {real[0]['alpha']:.4g} | {same}/{len(decided)} = {same / max(len(decided), 1):.1%} | "
            f"{wrong}/{len(directional)} | {len(false)}/{len(null)} = {len(false) / len(null):.2%} | "
            f"{any_false}/{len(orders)} = {any_false / len(orders):.1%} | {used:,} of {fixed:,}"
            + (f" (+{verdicts:,} verdicts)" if verdicts else "")
            + f" | {fixed / used:.2f}x | {fixed_per / used_per:.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
