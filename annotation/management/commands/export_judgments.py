import csv
import json
import os
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.exchange import exports, judgment_files
from annotation.management.commands._common import get_study


class Command(BaseCommand):
    what = "judgments"  # the records written, for the messages
    help = (
        "Export every judgment of a study in the format of docs/interfaces.md#judgment-format (JSONL, or CSV) to "
        "stdout or a file."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
        parser.add_argument("--output", "-o", help="Write to this file instead of stdout.")

    def handle(self, *args, **options):
        study = get_study(options["study"])
        if not options["output"]:
            count = self._write(study, options["format"], self.stdout)
            self.stderr.write(f"Exported {count} {self.what} of '{study.name}'.")
            return
        # Written whole or not at all: into a temporary file next to the target, renamed over it only once
        # every judgment is written (a failure leaves any earlier file as it was, and no partial one).
        target = Path(options["output"])
        try:
            handle, temporary = tempfile.mkstemp(
                prefix=f".{target.name}.", suffix=".part", dir=target.parent if str(target.parent) else "."
            )
        except OSError as exc:
            raise CommandError(f"Cannot write {target}: {exc.strerror}") from None
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
                count = self._write(study, options["format"], out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, target)
        except BaseException as exc:
            Path(temporary).unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise CommandError(f"Cannot write {target}: {exc.strerror}") from None
            raise
        self.stderr.write(f"Exported {count} {self.what} of '{study.name}' to {target}.")

    def _write(self, study, fmt: str, out) -> int:
        count = 0
        if fmt == "csv":
            writer = csv.writer(out)
            writer.writerow(judgment_files.JUDGMENT_CSV_COLUMNS)
            for line in exports.judgment_lines(study):
                writer.writerow(judgment_files.judgment_csv_row(line))
                count += 1
        else:
            for line in exports.judgment_lines(study):
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
                count += 1
        return count
