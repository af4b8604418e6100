from django.core.management.base import BaseCommand, CommandError

from annotation.exchange.rules import FormatError
from annotation.management.commands._common import get_study, read_file
from annotation.rating import imports


class Command(BaseCommand):
    help = (
        "Import judgments (JSONL in the format of docs/interfaces.md#judgment-format, or the CSV that "
        "export_judgments writes) into a study: "
        "judge ratings or past human data. All or nothing; judgments already present are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="Path to the .jsonl or .csv judgments file.")
        parser.add_argument("--study", required=True, help="Study name.")

    def handle(self, *args, **options):
        study = get_study(options["study"])
        data = read_file(options["file"])
        try:
            summary = imports.do_import_judgments(study, data, options["file"])
        except FormatError as exc:
            raise CommandError(f"{options['file']} was not imported (nothing was saved):\n{exc}") from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {summary.created} judgments into '{study.name}' ({summary.skipped} already present)."
            )
        )
