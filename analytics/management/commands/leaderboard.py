import json
from typing import Any

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from analytics.battles import read_battles, style_counts
from analytics.core import ratings
from analytics.leaderboards import board, default_intervals, style_board
from analytics.report.serial import to_json
from annotation.exchange.rules import FormatError

STYLE_NOTE = (
    "The penalty 0.5 * reg * |coefficients|^2 on the mean loss shrinks the style coefficients toward 0 "
    "(arena-rank's default: reg = 1); --style-reg 0 fits them without it."
)


class Command(BaseCommand):
    # A battles file needs no database and no URLs: skipping the system checks (which import every view) and
    # the report's services keeps the start under half a second (bench/README.md, "Leaderboards").
    requires_system_checks: list[str] = []

    help = (
        "Leaderboard of a Chatbot-Arena battles file (CSV or JSONL: model_a, model_b, winner in model_a | "
        "model_b | tie | 'tie (bothbad)'; for sep-elo a separability column), no study needed: ELO, sep-ELO or "
        "Bradley-Terry with 95 %% intervals and CI-based ranks. ELO and sep-ELO are ranked by their bootstrap "
        "median (as Chatbot Arena does); the online value in file order is kept as 'online'. Bradley-Terry's "
        "intervals are closed-form by default (the sandwich of LMArena's arena-rank), or its bootstrap."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="Battles file (.csv or .jsonl).")
        parser.add_argument("--method", choices=["elo", "sep-elo", "bt"], default="elo")
        parser.add_argument("--bootstrap", type=int, default=100, help="Bootstrap rounds (0 for none).")
        parser.add_argument(
            "--intervals",
            choices=["sandwich", "bootstrap"],
            help="Bradley-Terry: sandwich (closed form, the default) or bootstrap; ELO: bootstrap.",
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--k", type=float, default=4.0, help="ELO K factor.")
        parser.add_argument("--T", type=float, default=0.4, dest="threshold", help="sep-ELO threshold T.")
        parser.add_argument("--alpha", type=float, default=2.0, help="sep-ELO alpha.")
        parser.add_argument("--beta", type=float, default=6.0, help="sep-ELO beta.")
        parser.add_argument(
            "--style-control",
            action="store_true",
            help="Bradley-Terry controlling for answer style as LMArena does (arena-rank's "
            "ContextualBradleyTerry): needs the file's sum_assistant_tokens_a/_b, header_count_a/_b, "
            "list_count_a/_b and bold_count_a/_b columns; prints the style coefficients.",
        )
        parser.add_argument(
            "--style-reg",
            type=float,
            default=ratings.STYLE_REG,
            help="L2 penalty on the style coefficients, 0.5 * reg * |coefficients|^2 on the mean loss "
            f"(arena-rank's default {ratings.STYLE_REG}; 0: none). It shrinks them toward 0.",
        )
        parser.add_argument("--json", action="store_true", help="Print JSON.")

    def handle(self, *args: Any, **o: Any) -> None:
        if o["bootstrap"] < 0:
            raise CommandError("--bootstrap must be 0 or more")
        intervals = o["intervals"] or default_intervals(o["method"])
        if intervals == "sandwich" and o["method"] != "bt":
            raise CommandError("--intervals sandwich is for --method bt; ELO's intervals come from the bootstrap")
        if o["style_control"] and (o["method"] != "bt" or intervals != "sandwich"):
            raise CommandError("--style-control is Bradley-Terry with closed-form intervals (--method bt)")
        if not o["style_reg"] >= 0:
            raise CommandError("--style-reg must be 0 or more")
        try:
            battles = read_battles(o["file"], settings.SEPLAB_MAX_IMPORT_BYTES)
        except FormatError as exc:
            raise CommandError(f"{o['file']} has problems:\n{exc}") from None
        except OSError as exc:
            raise CommandError(f"Cannot read {o['file']}: {exc.strerror}") from None
        a, b, score = battles.a, battles.b, battles.score
        k: float | np.ndarray = o["k"]
        if o["method"] == "sep-elo":
            if np.isnan(battles.separability).all():
                raise CommandError("sep-elo needs a 'separability' column in the battles file")
            delta = np.where(np.isnan(battles.separability), o["threshold"], battles.separability)
            k = ratings.separability_k(delta, o["k"], o["threshold"], o["alpha"], o["beta"])
        coefficients = None
        if o["style_control"]:
            try:
                with open(o["file"], "rb") as handle:
                    counts_a, counts_b = style_counts(
                        handle.read(settings.SEPLAB_MAX_IMPORT_BYTES + 1),
                        o["file"],
                        len(score),
                        settings.SEPLAB_MAX_IMPORT_BYTES,
                    )
            except FormatError as exc:
                raise CommandError(f"{o['file']} has problems:\n{exc}") from None
            rows, coefficients = style_board(battles.systems, a, b, score, counts_a, counts_b, o["style_reg"])
        else:
            rows = board(battles.systems, o["method"], a, b, score, k, o["bootstrap"], o["seed"], intervals)
        headline = (
            "maximum likelihood"
            if o["method"] == "bt"
            else ("bootstrap median" if o["bootstrap"] else "online, in file order (no bootstrap)")
        )
        rounds = 0 if intervals == "sandwich" else o["bootstrap"]
        document = to_json(
            {
                "method": o["method"],
                "battles": len(score),
                "intervals": intervals,
                "bootstrap": rounds,
                "seed": o["seed"],
                "rating": headline,
                "parameters": {"k": o["k"], "T": o["threshold"], "alpha": o["alpha"], "beta": o["beta"]},
                "leaderboard": rows,
                **(
                    {"style_coefficients": coefficients, "style_reg": o["style_reg"], "style_note": STYLE_NOTE}
                    if coefficients is not None
                    else {}
                ),
            }
        )
        if o["json"]:
            self.stdout.write(json.dumps(document, indent=2))
            return
        how = "closed-form (sandwich) intervals" if intervals == "sandwich" else f"{rounds} bootstrap rounds"
        self.stdout.write(f"{o['method']} on {len(score)} battles ({how}, seed {o['seed']}); rating = {headline}")
        if coefficients is not None:
            self.stdout.write(
                "style coefficients (log-odds per standard deviation of the relative difference): "
                + ", ".join(f"{name} {value:+.4f}" for name, value in coefficients.items())
            )
            self.stdout.write(STYLE_NOTE)
        for row in rows:
            online = f"  online {row.online:.2f}" if row.online is not None else ""
            self.stdout.write(
                f"{row.rank:>3}  {row.system:<30} {row.rating:9.2f}  [{row.low:.1f}, {row.high:.1f}]{online}"
            )
