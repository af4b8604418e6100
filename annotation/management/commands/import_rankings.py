from django.core.management.base import BaseCommand, CommandError

from annotation.exchange.rules import FormatError
from annotation.management.commands._common import get_study, read_file
from annotation.rating import rankings


class Command(BaseCommand):
    help = (
        "Import rankings and best-worst answers (JSONL in the format of docs/interfaces.md#ranking-format, as "
        "export_rankings writes it) into a study, each stored with the pairwise judgments it implies. All or "
        "nothing; answers already present are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="Path to the .jsonl rankings file.")
        parser.add_argument("--study", required=True, help="Study name.")

    def handle(self, *args, **options):
        study = get_study(options["study"])
        data = read_file(options["file"])
        try:
            summary = rankings.do_import_rankings(study, data, options["file"])
        except FormatError as exc:
            raise CommandError(f"{options['file']} was not imported (nothing was saved):\n{exc}") from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {summary.created} rankings into '{study.name}' ({summary.skipped} already present)."
            )
        )
