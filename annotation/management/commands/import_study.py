from django.core.management.base import BaseCommand, CommandError

from annotation.exchange.rules import FormatError
from annotation.management.commands._common import get_owner, read_file
from annotation.studies import creation


class Command(BaseCommand):
    help = (
        "Create a study from a JSONL file (one item per line: id, input, optional reference, "
        "outputs {system: [samples]}, optional metadata) or a long-form CSV "
        "(item_id,input,system,sample,output). A bad file is rejected whole, with every problem listed."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="Path to the .jsonl or .csv study file.")
        parser.add_argument("--name", required=True, help="Name of the new study (unique).")
        parser.add_argument(
            "--owner", help="Username of the researcher who owns it (default: the only account, when there is one)."
        )
        parser.add_argument("--description", default="", help="Optional description.")

    def _progress(self, done: int, total: int) -> None:
        """A large file is imported in steps (creation._import_staged): say how far it is."""
        self.stderr.write(f"\rimporting: step {done} of {total}", ending="\n" if done == total else "")
        self.stderr.flush()

    def handle(self, *args, **options):
        owner = get_owner(options["owner"])
        data = read_file(options["file"])
        try:
            study = creation.do_create_study(
                owner, options["name"], data, options["file"], options["description"], progress=self._progress
            )
        except FormatError as exc:
            raise CommandError(f"{options['file']} was not imported (nothing was saved):\n{exc}") from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Created study '{study.name}': {study.items.count()} items, {study.systems.count()} systems, "
                f"{study.tasks.count()} rating tasks."
            )
        )
        for warning in study.import_warnings:
            self.stderr.write(f'warning: {warning} (imported; raters see "(empty output)")')
