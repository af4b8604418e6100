import csv
import json

from django.core.management.base import BaseCommand, CommandError

from annotation import formats, services
from annotation.management.commands._common import get_study


class Command(BaseCommand):
    help = "Export every judgment of a study in the SPEC §8 format (JSONL, or CSV) to stdout or a file."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
        parser.add_argument("--output", "-o", help="Write to this file instead of stdout.")

    def handle(self, *args, **options):
        study = get_study(options["study"])
        try:
            out = open(options["output"], "w", encoding="utf-8", newline="") if options["output"] else self.stdout
        except OSError as exc:
            raise CommandError(f"Cannot write {options['output']}: {exc.strerror}") from None
        count = 0
        try:
            if options["format"] == "csv":
                writer = csv.writer(out)
                writer.writerow(formats.JUDGMENT_CSV_COLUMNS)
                for line in services.judgment_lines(study):
                    writer.writerow(formats.judgment_csv_row(line))
                    count += 1
            else:
                for line in services.judgment_lines(study):
                    out.write(json.dumps(line, ensure_ascii=False) + "\n")
                    count += 1
        finally:
            if out is not self.stdout:
                out.close()
        self.stderr.write(f"Exported {count} judgments of '{study.name}'.")
