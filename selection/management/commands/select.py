import json
import random

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ServiceError
from annotation.management.commands._common import get_study
from annotation.plan import planning
from annotation.studies import lifecycle
from selection import services
from selection.models import SelectionRun
from selection.strategies import STATIC_STRATEGIES, strategy_parameters


class Command(BaseCommand):
    help = (
        "Choose which items of each system pair to send to raters with a selection strategy, and store the "
        "run (method, parameters, seed, items) so it can be audited and reproduced. With --apply, the study "
        "switches to this method and budget and its rating plan is rebuilt (only before raters start)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument(
            "--method",
            required=True,
            choices=STATIC_STRATEGIES,
            help="Selection strategy (diffuse-iterative runs live: choose it in the settings).",
        )
        parser.add_argument("--budget", type=int, help="Items per system pair (default: all, in strategy order).")
        parser.add_argument("--seed", type=int, help="Random seed (default: the study's seed).")
        parser.add_argument(
            "--metric", help="Separability metric for the separability strategies (default: the study's)."
        )
        parser.add_argument(
            "--threshold",
            type=float,
            help="Separability threshold for the threshold strategies (default: the study's).",
        )
        parser.add_argument("--json", action="store_true", help="Print the runs as JSON.")
        parser.add_argument(
            "--apply", action="store_true", help="Make this the study's selection and rebuild its plan."
        )

    def handle(self, *args, **options):
        study = get_study(options["study"])
        if options["budget"] is not None and options["budget"] < 1:
            raise CommandError("--budget must be at least 1")
        seed = study.seed if options["seed"] is None else options["seed"]
        if options["apply"]:
            runs = self._apply(study, options, seed)
        else:
            runs = self._select(study, options, seed)
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    [
                        {
                            "id": r.pk,
                            "system_a": r.system_a,
                            "system_b": r.system_b,
                            "method": r.method,
                            "params": r.params,
                            "budget": r.budget,
                            "seed": r.seed,
                            "candidates": r.candidates,
                            "items": r.items,
                        }
                        for r in runs
                    ],
                    indent=2,
                )
            )
            return
        for run in runs:
            self.stdout.write(
                f"{run.system_a} vs {run.system_b}: {len(run.items)} of {run.candidates} items "
                f"by {run.method} (seed {run.seed}, run #{run.pk}): {', '.join(run.items[:20])}"
                + (" ..." if len(run.items) > 20 else "")
            )

    @staticmethod
    def _select(study, options, seed: int) -> list[SelectionRun]:
        """Run the strategy on the candidates the plan would give each system pair, with the study's stored
        parameters (the same mapping the plan uses) and the command's overrides."""
        params = strategy_parameters(study, metric=options["metric"], threshold=options["threshold"])
        runs = []
        comparisons = list(study.comparisons.select_related("system_a", "system_b"))
        candidates = planning.plan_candidates(study, comparisons, random.Random(seed))
        for comparison, items in zip(comparisons, candidates, strict=True):
            try:
                _, run = services.do_run_selection(
                    study, comparison, options["method"], options["budget"], seed, params, items=items
                )
            except ValueError as exc:
                raise CommandError(f"{comparison}: {exc}") from None
            runs.append(run)
        return runs

    @staticmethod
    def _apply(study, options, seed: int) -> list[SelectionRun]:
        """Store the method, budget, seed and parameter overrides as the study's settings, rebuild the plan,
        and report the runs the plan released (not a second run)."""
        changes = {"selection_method": options["method"], "budget": options["budget"], "seed": seed}
        if options["metric"] is not None:
            changes["separability_metric"] = options["metric"]
        if options["threshold"] is not None:
            changes["separability_threshold"] = options["threshold"]
        latest = SelectionRun.objects.filter(study=study).order_by("-pk").values_list("pk", flat=True).first() or 0
        try:
            lifecycle.do_update_settings(study, changes, None)
            if not SelectionRun.objects.filter(study=study, pk__gt=latest).exists():
                planning.do_rebuild_plan(study)  # the settings were already these: rebuild all the same
        except (ServiceError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        return list(SelectionRun.objects.filter(study=study, pk__gt=latest).order_by("pk"))
