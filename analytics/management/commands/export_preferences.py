from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from analytics import populations, preferences
from annotation.management.commands._common import get_study


class Command(BaseCommand):
    help = (
        "A study's judgments as preference data for reward models and DPO: prompt / chosen / rejected records with "
        "the pair's systems and the rater population, as JSONL, Parquet, or a folder Hugging Face `datasets` "
        "loads (Parquet + a dataset card on how the data was collected); or as Chatbot Arena battles with their "
        "style columns (--format arena)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument(
            "--format",
            required=True,
            choices=preferences.FORMATS,
            help="jsonl (one record per line), parquet (one file), hf (a folder: data/*.parquet and "
            "README.md, the dataset card) or arena (battles CSV with the style columns).",
        )
        parser.add_argument("--output", required=True, help="The file (jsonl, parquet, arena) or folder (hf) to write.")
        parser.add_argument(
            "--population",
            default="humans",
            help="Whose judgments, as on the report: humans (default), all, or judge:<rater id>.",
        )
        parser.add_argument(
            "--source",
            default="",
            help="Keep only these rater sources, comma-separated: "
            + ", ".join(populations.SOURCES)
            + " (default: every source).",
        )
        parser.add_argument(
            "--include-screened",
            action="store_true",
            help="Keep raters screened out by attention checks (left out by default).",
        )
        parser.add_argument(
            "--question",
            default="",
            help="Export the answers to this further preference question (its key) instead of the main question's.",
        )
        parser.add_argument(
            "--ties",
            choices=("drop", "keep"),
            default="drop",
            help="Ties have no chosen output: left out (default) or kept with tie=true (then chosen / "
            "rejected are A's / B's output).",
        )
        parser.add_argument(
            "--both-bad",
            choices=("drop", "keep"),
            default="drop",
            help="'Both are bad' / 'neither is acceptable' answers: left out (default) or kept with "
            "both_bad=true. (arena keeps ties and both-bad as Arena's 'tie' and 'tie (bothbad)'.)",
        )
        parser.add_argument(
            "--rater-ids",
            choices=("pseudonym", "raw"),
            default="pseudonym",
            help="People's rater ids as a pseudonym stable within the study (default: crowd worker ids "
            "identify people, and sites restrict sharing them) or as stored. Judges keep their "
            "names.",
        )

    def handle(self, *args, **options):
        study = get_study(options["study"])
        try:
            population = populations.parse_for(
                study,
                {
                    "population": options["population"],
                    "source": options["source"],
                    "screened": "include" if options["include_screened"] else "exclude",
                    "question": options["question"],
                },
            )
        except populations.PopulationError as exc:
            raise CommandError(f"--{exc}") from None
        output = Path(options["output"])
        if options["format"] == "hf":
            if output.exists() and not output.is_dir():
                raise CommandError(f"--output: {output} is a file; --format hf writes a folder")
            if output.is_dir() and any(output.iterdir()):
                raise CommandError(f"--output: {output} is a folder that is not empty; give a new or empty folder")
        elif output.is_dir():
            raise CommandError(f"--output: {output} is a folder; give a file name")
        if not output.parent.is_dir():
            raise CommandError(f"--output: the folder {output.parent} does not exist")
        try:
            n = preferences.export(
                study,
                options["format"],
                output,
                preferences.Options(
                    population,
                    ties=options["ties"] == "keep",
                    both_bad=options["both_bad"] == "keep",
                    raw_rater_ids=options["rater_ids"] == "raw",
                ),
            )
        except preferences.ExportError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Wrote {n:,} record{'s' if n != 1 else ''} ({population.label}) to {output}")
