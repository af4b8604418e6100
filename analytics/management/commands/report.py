import json

from django.core.management.base import BaseCommand, CommandError

from analytics import populations
from analytics.report.assembly import Report, compute
from analytics.report.consistency import PooledConsistency, pooled_consistency
from annotation.management.commands._common import get_study


class Command(BaseCommand):
    help = (
        "The study report: consistency, separability, ELO / sep-ELO / Bradley-Terry with bootstrap intervals, "
        "stopping status, positional bias, agreement and judge validation under rating indeterminacy."
    )

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--study", help="Study name.")
        target.add_argument(
            "--studies",
            help="Comma-separated study names: consistency by separability pooled "
            "across them (the separability paper's Fig. 8 over its four configurations).",
        )
        parser.add_argument(
            "--metric", help="With --studies: the separability metric to use (default: each study's own)."
        )
        parser.add_argument("--json", action="store_true", help="Print the whole report as JSON.")
        parser.add_argument(
            "--population",
            default="humans",
            help="Whose judgments: humans (default), all (mixes humans and judges), or judge:<rater id>.",
        )
        parser.add_argument(
            "--source",
            default="",
            help="Keep only these rater sources, comma-separated: "
            + ", ".join(populations.SOURCES)
            + " (default: every source).",
        )
        parser.add_argument("--rater", default="", help="Keep only this rater's judgments.")
        parser.add_argument(
            "--include-screened",
            action="store_true",
            help="Keep raters screened out by attention checks (left out by default).",
        )
        parser.add_argument(
            "--question",
            default="",
            help="Analyse the answers to this further preference question (its key in the study's "
            "settings) instead of the main question's.",
        )

    def handle(self, *args, **options):
        if options["studies"]:
            return self._pooled(options)
        if options["metric"]:
            raise CommandError("--metric goes with --studies (a single study's report uses its own metric)")
        study = get_study(options["study"])
        try:
            population = populations.parse_for(
                study,
                {
                    "population": options["population"],
                    "source": options["source"],
                    "rater": options["rater"],
                    "screened": "include" if options["include_screened"] else "exclude",
                    "question": options["question"],
                },
            )
        except populations.PopulationError as exc:
            raise CommandError(f"--{exc}") from None
        data = compute(study, population).to_json()
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2))
            return
        report = Report.from_json(data)
        counts = report.judgments
        self.stdout.write(
            f"{report.study} · {report.population.label}: {counts.total} judgments (of {counts.study_total}) by "
            f"{counts.raters} raters on {len(report.systems)} systems"
        )
        for name, board in (("elo", report.elo), ("sep_elo", report.sep_elo), ("bradley_terry", report.bradley_terry)):
            if not board.available:
                self.stdout.write(f"{name}: not available ({board.reason})")
                continue
            self.stdout.write(f"{name}:")
            for row in board.leaderboard:
                self.stdout.write(
                    f"  {row.rank:>2}  {row.system:<30} {row.rating:8.1f}  [{row.low:.1f}, {row.high:.1f}]"
                )
        for s in report.stopping:
            self.stdout.write(
                f"stopping {s.system_a} vs {s.system_b}: leader {s.leader or 'none'}, "
                f"k={s.k} of n={s.n} in a pool of {s.pool}, risk {s.risk:.4f} "
                f"(p={s.threshold}; beyond the pool {s.risk_beyond_pool:.4f}) "
                + ("decided" if s.decided else "undecided")
                + f"; decision {s.decision} [{s.win_rate_low:.3f}, {s.win_rate_high:.3f}] over {s.decision_items} "
                f"items ({s.decision_design})"
            )
        for kind, summary in report.consistency.summary.items():
            if not summary.available:
                self.stdout.write(f"consistency ({kind}): {summary.reason}")
                continue
            interval = f", 95 % CI [{summary.low:.3f}, {summary.high:.3f}]" if summary.low is not None else ""
            self.stdout.write(
                f"consistency ({kind}): mean {summary.mean:.3f} over {summary.n} rating sets "
                f"with two or more judgments{interval}"
            )

    def _pooled(self, options) -> None:
        names = [n.strip() for n in options["studies"].split(",") if n.strip()]
        if len(set(names)) != len(names) or not names:
            raise CommandError("--studies needs distinct study names, separated by commas")
        if options["metric"]:
            from selection.services import parse_metric

            try:
                parse_metric(options["metric"])
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        data = pooled_consistency([get_study(n) for n in names], options["metric"]).to_json()
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2))
            return
        pooled = PooledConsistency.from_json(data)
        self.stdout.write(f"Consistency by separability, pooled over {len(names)} studies ({pooled.metric})")
        for s in pooled.studies:
            self.stdout.write(
                f"  {s.study:<40} {s.metric:<10} mean delta {number(s.mean_separability)}  "
                f"Spearman(delta, consistency) {number(s.spearman_separability_consistency, 2)}  "
                f"{s.with_separability} of {s.rating_sets} rating sets with delta"
            )
        for kind, bins in pooled.bins.items():
            self.stdout.write(f"{kind}s, 5 equal-count bins:")
            for b in bins.equal_count:
                self.stdout.write(
                    f"  delta {number(b.low)}..{number(b.high)}  n={b.count:<4} mean consistency {number(b.mean)}"
                )
        if not pooled.bins:
            self.stdout.write("No rating set has a separability yet: compute it first (compute_separability).")


def number(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"
