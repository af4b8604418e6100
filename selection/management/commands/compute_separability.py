from typing import TextIO, cast

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from annotation.management.commands._common import get_study
from selection import services
from selection.core.separability import METRICS


class Command(BaseCommand):
    help = (
        "Compute generation separability (delta per item, docs/separability.md) for every system pair of a study. "
        "Needs K >= 2 samples per system; items with a single sample are reported as undefined."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument(
            "--metric",
            help="Similarity: "
            + ", ".join(f"{m}, {m}-la" for m in METRICS)
            + " (-la = length-adjusted). Default: the study's separability metric (cosine-la unless "
            "changed: cosine of the study encoder's embeddings, length-adjusted).",
        )

    def handle(self, *args, **options):
        study = get_study(options["study"])
        options["metric"] = options["metric"] or study.selection_settings.separability_metric
        try:
            services.parse_metric(options["metric"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        bar = None

        def progress(done: int, total: int) -> None:
            nonlocal bar
            if bar is None:
                # the stream OutputWrapper wraps, without its line endings (django-stubs leaves the attribute out)
                stream = cast(TextIO, self.stderr._out)
                bar = tqdm(total=total, desc="embedding", unit="text", file=stream)
            bar.update(done - bar.n)

        runs = services.do_compute_separability(study, options["metric"], progress=progress)
        if bar is not None:
            bar.close()
        for run in runs:
            values = services.separability_values(run)
            total = run.items.count()
            if values.size == 0:
                self.stdout.write(
                    f"{run.comparison}: separability undefined for all {total} items "
                    "(a system has a single sample; separability needs K >= 2)."
                )
                continue
            undefined = total - values.size
            self.stdout.write(
                f"{run.comparison} [{run.metric}]: {values.size} items, mean delta {values.mean():.3f}, "
                f"median {float(sorted(values)[len(values) // 2]):.3f}"
                + (f"; undefined for {undefined} items with a single sample" if undefined else "")
            )
