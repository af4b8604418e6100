from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotation.crowd import sites
from annotation.errors import ServiceError
from annotation.management.commands._common import get_study
from annotation.models import ExternalLink


class Command(BaseCommand):
    help = (
        "Create an external link for a crowdsourcing site and print the URL to paste (and, for MTurk-style "
        "sites, the ExternalQuestion XML, which requires an https base URL)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument("--platform", required=True, choices=ExternalLink.Platform.values)
        parser.add_argument("--base-url", default=settings.SITE_URL, help="Public base URL of this server.")

    def handle(self, *args, **options):
        study = get_study(options["study"])
        link = ExternalLink.objects.create(study=study, platform=options["platform"])
        url = sites.link_url(link, options["base_url"])
        self.stdout.write(f"URL to paste: {url}")
        self.stdout.write(f"Screened-out workers get the code {link.screened_code}.")
        if link.platform == ExternalLink.Platform.MTURK:
            try:
                self.stdout.write(sites.external_question_xml(url))
            except ServiceError as exc:
                raise CommandError(
                    f"{exc}: pass --base-url https://… (the link was created; the URL above works on other sites)"
                ) from None
