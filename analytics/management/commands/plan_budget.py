import json

from django.core.management.base import BaseCommand, CommandError

from analytics import budgeting
from annotation.management.commands._common import get_study
from selection.core import budget


class Command(BaseCommand):
    help = (
        "Before paying: per system pair, how many items and judgments its anytime-valid decision needs to name "
        "the better system with the given power when it wins a half plus each margin (e.g. 0.05 = a 55 %% win "
        "rate, ties as halves), for each number of raters per item -- from a pilot: the pair's human judgments "
        "so far (imported ones count), else its LLM judges' verdicts as a prior, else the largest possible "
        "variance. The pilot's intra-item correlation of raters is the design effect (taken as 1, so extra raters "
        "add nothing, when the pilot had one rater per item). Judgments = items x raters per item x the pairs "
        "an item gives a rater (one when each system has one output per item). Also in assignments (HITs), money "
        "at the study's pay per assignment and rater-hours at the study's measured pace, with the advice: one "
        "rater per item (new items) first, another rater only where the pool runs short (the row marked *). The "
        "settings page runs the same plan."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument("--pair", help="SYSTEM_A,SYSTEM_B (default: every system pair).")
        parser.add_argument(
            "--margins",
            default=budgeting.DEFAULTS["margins"],
            help=f"Win rate above a half to tell ({budgeting.DEFAULTS['margins']}).",
        )
        parser.add_argument(
            "--raters",
            default=budgeting.DEFAULTS["raters"],
            help=f"Raters per item to plan for ({budgeting.DEFAULTS['raters']}).",
        )
        parser.add_argument("--alpha", help="Decision error rate (default: the study's).")
        parser.add_argument(
            "--power",
            default=str(budgeting.DEFAULTS["power"]),
            help=f"Share of studies that decide ({budgeting.DEFAULTS['power']}).",
        )
        parser.add_argument(
            "--max-items",
            default=str(budgeting.DEFAULTS["max_items"]),
            help=f"Give up beyond this many items ({budgeting.DEFAULTS['max_items']}).",
        )
        parser.add_argument(
            "--rounds",
            default=str(budgeting.DEFAULTS["rounds"]),
            help=f"Simulated studies per plan ({budgeting.DEFAULTS['rounds']}).",
        )
        parser.add_argument("--seed", help="Seed (default: the study's).")
        parser.add_argument("--json", action="store_true", help="Print a JSON list of plans.")
        parser.add_argument(
            "--plot",
            help="Write the curve (judgments needed against the win rate told, one line "
            "per pair and raters per item) to this .svg file.",
        )

    def handle(self, *args, **o):
        study = get_study(o["study"])
        if o["plot"] and not o["plot"].endswith(".svg"):
            raise CommandError("--plot writes an .svg file")
        try:
            request = budgeting.read_request(study, o)
        except budgeting.BadRequest as exc:
            raise CommandError(f"--{exc.field.replace('_', '-')}: {exc.message}") from None
        result = budgeting.plan(study, request)
        plans = result["rows"]
        if o["plot"]:
            try:
                with open(o["plot"], "w", encoding="utf-8") as out:
                    caption = budgeting.curve_caption(plans).replace("--", "- -")  # a comment may not hold "--"
                    out.write(
                        f'<?xml version="1.0" encoding="UTF-8"?>\n<!-- {caption} -->\n' + budgeting.curve_svg(plans)
                    )
            except OSError as exc:
                raise CommandError(f"cannot write the plot to {o['plot']}: {exc}") from None
            self.stderr.write(f"plot: {o['plot']}")
        if o["json"]:
            self.stdout.write(json.dumps(plans, indent=2))
            return
        pace = result["seconds_per_judgment"]
        pay = result["pay_per_assignment"]
        timed = "measured" if result["pace_measured"] else "the default until enough are timed"
        self.stdout.write(
            f"{study.name}: power {request.power}, error rate {request.alpha:.4g}, {pace:.0f} s per "
            f"judgment ({timed})"
            + (f", {pay} per assignment" if pay else ", no pay per assignment set (money not shown)")
        )
        self.stdout.write(budgeting.advice_words(plans))
        self.stdout.write(
            "pair".ljust(34)
            + "pilot".ljust(12)
            + "rho".rjust(6)
            + "pairs/item".rjust(11)
            + "margin".rjust(7)
            + "raters".rjust(7)
            + "items".rjust(7)
            + "judgments".rjust(10)
            + "HITs".rjust(7)
            + "cost".rjust(10)
            + "hours".rjust(8)
            + "  advice"
        )
        for p in plans:
            items = "> max" if p["items"] is None else str(p["items"])
            rho = f"{p['rho']:.2f}" if p["rho_seen"] else "-"
            advice = f"  * {p['advice']}" if p["recommended"] else ""
            if p["advice"] == budget.MORE_ITEMS:
                advice = f"  {p['advice']}"
            self.stdout.write(
                p["pair"][:33].ljust(34)
                + p["pilot"].ljust(12)
                + rho.rjust(6)
                + f"{p['pairs_per_item']:g}".rjust(11)
                + f"{p['margin']:7.2f}"
                + str(p["raters"]).rjust(7)
                + items.rjust(7)
                + str(p["judgments"] or "-").rjust(10)
                + str(p["assignments"] or "-").rjust(7)
                + str(p["cost"] or "-").rjust(10)
                + str(p["rater_hours"] or "-").rjust(8)
                + advice
            )
