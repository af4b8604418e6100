import json

from django.core.management.base import BaseCommand, CommandError

from annotation.management.commands._common import get_study
from annotation.rating import allocation
from selection import services
from selection.core import budget


def numbers(value: str, kind=float) -> list:
    try:
        return [kind(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise CommandError(f"expected comma-separated numbers, not {value!r}") from None


class Command(BaseCommand):
    help = ("Before paying: per system pair, how many items and judgments its anytime-valid decision needs to name "
            "the better system with the given power when it wins a half plus each margin (e.g. 0.05 = a 55 %% win "
            "rate, ties as halves), for each number of raters per item -- from a pilot: the pair's human judgments "
            "so far (imported ones count), else its LLM judges' verdicts as a prior, else the largest possible "
            "variance. The pilot's intra-item correlation of raters is the design effect (taken as 1, so extra raters "
            "add nothing, when the pilot had one rater per item). Also in assignments (HITs) "
            "and rater-hours at the study's measured pace.")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument("--pair", help="SYSTEM_A,SYSTEM_B (default: every system pair).")
        parser.add_argument("--margins", default="0.05,0.1,0.15", help="Win rate above a half to tell (0.05,0.1,0.15).")
        parser.add_argument("--raters", default="1,3", help="Raters per item to plan for (1,3).")
        parser.add_argument("--alpha", type=float, help="Decision error rate (default: the study's).")
        parser.add_argument("--power", type=float, default=0.8, help="Share of studies that decide (0.8).")
        parser.add_argument("--max-items", type=int, default=2000, help="Give up beyond this many items (2000).")
        parser.add_argument("--rounds", type=int, default=200, help="Simulated studies per plan (200).")
        parser.add_argument("--seed", type=int, help="Seed (default: the study's).")
        parser.add_argument("--json", action="store_true", help="Print a JSON list of plans.")
        parser.add_argument("--plot", help="Write the curve (judgments needed against the margin told, one line per "
                            "pair and raters per item) to this .png or .svg file.")

    def handle(self, *args, **o):
        study = get_study(o["study"])
        margins, raters = numbers(o["margins"]), numbers(o["raters"], int)
        alpha = study.selection_settings.decision_alpha if o["alpha"] is None else o["alpha"]
        if not margins or any(not 0 < m < 0.5 for m in margins):
            raise CommandError("--margins must be above 0 and below 0.5")
        if not raters or any(r < 1 for r in raters):
            raise CommandError("--raters must be whole numbers of at least 1")
        if not 0 < alpha < 1 or not 0 < o["power"] < 1 or o["max_items"] < 10 or o["rounds"] < 10:
            raise CommandError("need 0 < --alpha < 1, 0 < --power < 1, --max-items >= 10 and --rounds >= 10")
        comparisons = list(study.comparisons.select_related("system_a", "system_b"))
        if o["pair"]:
            wanted = sorted(p.strip() for p in o["pair"].split(","))
            comparisons = [c for c in comparisons if sorted((c.system_a.name, c.system_b.name)) == wanted]
            if not comparisons:
                raise CommandError(f"the study does not compare {o['pair']!r}")
        pace, measured = allocation.seconds_per_pair(study)
        per_assignment = study.judgments_per_assignment
        plans = []
        for c in comparisons:
            source, outcomes = services.pilot_outcomes(c)
            pilot = budget.pilot_of(outcomes) if outcomes else budget.Pilot(budget.NO_PILOT_VARIANCE,
                                                                            budget.UNKNOWN_RHO)
            for p in budget.plan(pilot, margins, raters, alpha, o["power"], o["max_items"], o["rounds"],
                                 study.seed if o["seed"] is None else o["seed"]):
                plans.append({
                    "pair": str(c), "pilot": source, "outcome_variance": round(pilot.outcome_variance, 4),
                    "rho": round(pilot.rho, 4), "margin": p.margin, "raters": p.raters, "items": p.items,
                    "judgments": p.judgments, "alpha": alpha, "power": o["power"],
                    "assignments": None if p.judgments is None else -(-p.judgments // per_assignment),
                    "rater_hours": None if p.judgments is None else round(p.judgments * pace / 3600, 1)})
        if o["plot"]:
            self._plot(plans, o["plot"], study.name, o["power"], alpha)
        if o["json"]:
            self.stdout.write(json.dumps(plans, indent=2))
            return
        self.stdout.write(f"{study.name}: power {o['power']}, error rate {alpha}, {pace:.0f} s per judgment "
                          f"({'measured' if measured else 'the default until enough are timed'})")
        self.stdout.write("pair".ljust(34) + "pilot".ljust(12) + "margin".rjust(7) + "raters".rjust(7)
                          + "items".rjust(7) + "judgments".rjust(10) + "HITs".rjust(7) + "hours".rjust(8))
        for p in plans:
            items = "> max" if p["items"] is None else str(p["items"])
            self.stdout.write(p["pair"][:33].ljust(34) + p["pilot"].ljust(12) + f"{p['margin']:7.2f}"
                              + str(p["raters"]).rjust(7) + items.rjust(7) + str(p["judgments"] or "-").rjust(10)
                              + str(p["assignments"] or "-").rjust(7) + str(p["rater_hours"] or "-").rjust(8))

    def _plot(self, plans: list[dict], path: str, name: str, power: float, alpha: float) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for key in dict.fromkeys((p["pair"], p["raters"]) for p in plans):
            line = [p for p in plans if (p["pair"], p["raters"]) == key and p["judgments"] is not None]
            if line:
                ax.plot([0.5 + p["margin"] for p in line], [p["judgments"] for p in line], marker="o",
                        label=f"{key[0]}, {key[1]} rater{'s' if key[1] != 1 else ''} per item")
        ax.set_xlabel("win rate of the better system to tell from a half")
        ax.set_ylabel("judgments needed")
        ax.set_yscale("log")
        ax.set_title(f"{name}: power {power}, error rate {alpha}, watched all along")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        try:
            fig.savefig(path)
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot write the plot to {path}: {exc}") from None
        finally:
            plt.close(fig)
        self.stderr.write(f"plot: {path}")
