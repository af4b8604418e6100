import json

from django.core.management.base import BaseCommand, CommandError

from annotation import services as annotation_services
from annotation.management.commands._common import get_study
from selection import services
from selection.strategies import DEFAULT_PARAMS, STRATEGIES


class Command(BaseCommand):
    help = ("Choose which items of each system pair to send to raters with a selection strategy, and store the "
            "run (method, parameters, seed, items) so it can be audited and reproduced. With --apply, the study "
            "switches to this method and budget and its rating plan is rebuilt (only before raters start).")

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument("--method", required=True, choices=sorted(STRATEGIES), help="Selection strategy.")
        parser.add_argument("--budget", type=int, help="Items per system pair (default: all, in strategy order).")
        parser.add_argument("--seed", type=int, help="Random seed (default: the study's seed).")
        parser.add_argument("--metric", default=DEFAULT_PARAMS["metric"],
                            help="Separability metric for the separability strategies.")
        parser.add_argument("--threshold", type=float, default=DEFAULT_PARAMS["threshold"],
                            help="Separability threshold for the threshold strategies.")
        parser.add_argument("--json", action="store_true", help="Print the runs as JSON.")
        parser.add_argument("--apply", action="store_true",
                            help="Make this the study's selection and rebuild its plan.")

    def handle(self, *args, **options):
        study = get_study(options["study"])
        if options["budget"] is not None and options["budget"] < 1:
            raise CommandError("--budget must be at least 1")
        seed = study.seed if options["seed"] is None else options["seed"]
        params = {"metric": options["metric"], "threshold": options["threshold"]}
        if options["apply"]:
            try:
                annotation_services.do_update_settings(
                    study, {"selection_method": options["method"], "budget": options["budget"], "seed": seed}, None)
            except annotation_services.ServiceError as exc:
                raise CommandError(str(exc)) from None
        runs = []
        for comparison in study.comparisons.select_related("system_a", "system_b"):
            try:
                _, run = services.run_selection(study, comparison, options["method"], options["budget"], seed, params)
            except ValueError as exc:
                raise CommandError(f"{comparison}: {exc}") from None
            runs.append(run)
        if options["json"]:
            self.stdout.write(json.dumps([{
                "id": r.pk, "system_a": r.system_a, "system_b": r.system_b, "method": r.method, "params": r.params,
                "budget": r.budget, "seed": r.seed, "candidates": r.candidates, "items": r.items,
            } for r in runs], indent=2))
            return
        for run in runs:
            self.stdout.write(f"{run.system_a} vs {run.system_b}: {len(run.items)} of {run.candidates} items "
                              f"by {run.method} (seed {run.seed}, run #{run.pk}): {', '.join(run.items[:20])}"
                              + (" ..." if len(run.items) > 20 else ""))
