import json

from django.core.management.base import BaseCommand

from analytics import services
from annotation.management.commands._common import get_study


class Command(BaseCommand):
    help = ("The study report: consistency, separability, ELO / sep-ELO / Bradley-Terry with bootstrap intervals, "
            "stopping status, positional bias, agreement and judge validation under rating indeterminacy.")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument("--json", action="store_true", help="Print the whole report as JSON.")

    def handle(self, *args, **options):
        study = get_study(options["study"])
        report = services.study_report(study)
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2))
            return
        self.stdout.write(f"{report['study']}: {report['judgments']['total']} judgments by "
                          f"{report['judgments']['raters']} raters on {len(report['systems'])} systems")
        for name in ("elo", "sep_elo", "bradley_terry"):
            board = report[name]
            if not board["available"]:
                self.stdout.write(f"{name}: not available ({board['reason']})")
                continue
            self.stdout.write(f"{name}:")
            for row in board["leaderboard"]:
                self.stdout.write(f"  {row['rank']:>2}  {row['system']:<30} {row['rating']:8.1f}  "
                                  f"[{row['low']:.1f}, {row['high']:.1f}]")
        for s in report["stopping"]:
            self.stdout.write(f"stopping {s['system_a']} vs {s['system_b']}: leader {s['leader'] or 'none'}, "
                              f"k={s['k']} of n={s['n']}, risk {s['risk']:.4f} (p={s['threshold']}) "
                              + ("decided" if s["decided"] else "undecided"))
        for kind, summary in report["consistency"]["summary"].items():
            self.stdout.write(f"consistency ({kind}): mean {summary['mean']:.3f} over {summary['rating_sets']} "
                              "rating sets")
