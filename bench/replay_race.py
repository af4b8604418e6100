"""Racing across pairs, replayed: PRD's 10 system pairs under one shared budget of human judgments, an item at a
time to the pairs closest to a decision (race), to the pair with the fewest items (even) or to one pair at a time
in a random order (serial: the budget concentrated without reading any pair's progress), measured against a
two-sided t-test on all of a pair's items (bench/README.md, "Racing across pairs under one budget").

    DEBUG=1 DATABASE_URL=sqlite:////tmp/replay/db.sqlite3 python bench/replay_race.py --seeds 50 --null-seeds 100

Builds the PRD study with ``load_prd`` when the database has none (migrate first; ``replay_prd.load_studies``).
Per budget share and allocation, through ``simulate --replay --budget-share F --allocation A --json`` with the
study's default design (5 looks, futility 0.1, one rater per item first, alpha split study-wide): decisions the
t-test on all items agrees with (summed over the orders), direction errors (a direction opposite to the sign of the
pair's win rate on all its items), human judgments spent, and judgments per agreeing decision; then A/A orders
(``--null``) under race: the share of orders in which any pair decided a direction (study-wide false decisions),
against alpha + 2 standard errors.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from bench.replay_prd import load_studies  # noqa: E402  (after the path is set)

DESIGN = ["--looks", "5", "--futility", "0.1", "--first-raters", "one", "--error-control", "study_wide"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="random orders per budget share and allocation")
    parser.add_argument("--null-seeds", type=int, default=100, help="A/A orders per budget share, under race")
    parser.add_argument("--shares", default="0.2,0.3,0.4,0.5", help="comma-separated budget shares in (0, 1]")
    parser.add_argument("--allocations", default="race,even,serial", help="comma-separated allocations to compare")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    studies, truth, ttest = load_studies(["prd-vicuna80"])
    study = studies[0]
    print("t-test on all items:", {k[1]: v for k, v in ttest.items()})
    decidable = sum(v != "undecided" for v in ttest.values())

    def run(share: str, allocation: str, seeds: int, null: bool) -> list[dict]:
        out = StringIO()
        flags = ["--null"] if null else []
        call_command(
            "simulate",
            "--study",
            study.name,
            "--replay",
            "--json",
            "--seeds",
            str(seeds),
            "--budget-share",
            share,
            "--allocation",
            allocation,
            *DESIGN,
            *flags,
            stdout=out,
        )
        return json.loads(out.getvalue())

    shares = [s for s in args.shares.split(",") if s]
    print(
        f"\n{args.seeds} orders; the t-test on all items decides {decidable} of {len(ttest)} pairs "
        f"({decidable * args.seeds} pair-orders)\n"
    )
    print(
        "| budget share | budget (judgments) | allocation | agreeing decisions | other decisions | direction errors "
        "| judgments spent per order | per agreeing decision |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for share in shares:
        for allocation in [a for a in args.allocations.split(",") if a]:
            real = run(share, allocation, args.seeds, False)
            key = lambda r: (study.name, r["pair"])  # noqa: E731
            agree = sum(r["decision"] == ttest[key(r)] != "undecided" for r in real)
            decided = sum(r["decision"] != "undecided" for r in real)
            directional = [r for r in real if r["decision"] in ("a", "b")]
            wrong = sum(r["decision"] != truth[key(r)] for r in directional)
            spent = sum(r["judgments_used"] for r in real)
            assert all(
                sum(r["judgments_used"] for r in real if r["seed"] == s) <= real[0]["budget"]
                for s in {r["seed"] for r in real}
            ), "over budget"
            print(
                f"| {share} | {real[0]['budget']:,} | {allocation} | {agree} | {decided - agree} | "
                f"{wrong}/{len(directional)} | {spent / args.seeds:,.1f} | {spent / max(agree, 1):,.1f} |",
                flush=True,
            )
    print("\n| budget share | A/A orders (race) | any false decision | alpha | alpha + 2 SE |")
    print("|---|---|---|---|---|")
    alpha = study.selection_settings.decision_alpha  # the study's decision error rate, split over its pairs
    for share in shares:
        null = run(share, "race", args.null_seeds, True)
        orders = {r["seed"] for r in null}
        false = {r["seed"] for r in null if r["decision"] in ("a", "b")}
        bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / len(orders))
        print(
            f"| {share} | {len(orders)} | {len(false)} = {len(false) / len(orders):.1%} | {alpha:g} | {bound:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
