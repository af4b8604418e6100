from typing import TextIO, cast

from django.core.management.base import BaseCommand
from tqdm import tqdm

from annotation.management.commands._common import get_study
from selection import services


class Command(BaseCommand):
    help = "Embed every distinct output of a study with the study encoder (cached outputs are skipped)."

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")

    def handle(self, *args, **options):
        study = get_study(options["study"])
        bar = None

        def progress(done: int, total: int) -> None:
            nonlocal bar
            if bar is None:
                # the stream OutputWrapper wraps, without its line endings (django-stubs leaves the attribute out)
                stream = cast(TextIO, self.stderr._out)
                bar = tqdm(total=total, desc="embedding", unit="text", file=stream)
            bar.update(done - bar.n)

        total = services.do_embed_study(study, progress=progress)
        if bar is not None:
            bar.close()
        done, distinct = services.embedding_coverage(study)
        self.stdout.write(f"'{study.name}': {done} of {distinct} distinct outputs embedded ({total} looked at).")
