from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotation.arena import setup
from annotation.errors import ServiceError
from annotation.management.commands._common import add_endpoint_options, endpoint_fields, get_owner


class Command(BaseCommand):
    help = (
        "Create an arena study: raters write their own prompts, two of the systems (anonymous, drawn at random "
        "where the ranking still needs votes) answer side by side, the rater votes, and only then are the names "
        "shown (docs/arena.md). Each --system is LABEL=MODEL@BASE_URL, an OpenAI-compatible endpoint; give two or "
        "more. The endpoint options below apply to every system. Prints the open rater link to share. Nothing is "
        "created when anything is wrong."
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True, help="Name of the new arena study (unique among yours).")
        parser.add_argument(
            "--system",
            action="append",
            required=True,
            metavar="LABEL=MODEL@BASE_URL",
            help="A system: its label (shown to raters after their vote), the model name its endpoint expects and "
            "the endpoint's base URL, e.g. small=llama3.2:1b@http://127.0.0.1:11434/v1. Repeat for each system "
            "(at least two).",
        )
        parser.add_argument(
            "--samples",
            type=int,
            default=3,
            help="K: background samples of each of a battle's two systems on its prompt, for the prompt's "
            f"separability and sep-ELO (0 to {setup.MAX_SAMPLES}; default 3).",
        )
        parser.add_argument(
            "--base-url",
            default="",
            help="Public base URL of this server, for the printed link (stored as the study's public base URL); "
            f"default SITE_URL ({settings.SITE_URL}).",
        )
        parser.add_argument(
            "--owner", help="Username of the researcher who owns it (default: the only account, when there is one)."
        )
        parser.add_argument("--description", default="", help="Optional description.")
        parser.add_argument(
            "--starter",
            action="append",
            default=[],
            metavar="PROMPT",
            help="A starter prompt raters may take (repeat for more).",
        )
        parser.add_argument(
            "--category",
            action="append",
            default=[],
            metavar="NAME",
            help="A category raters may file their prompt under (repeat for more).",
        )
        endpoint = parser.add_argument_group("endpoint options, for every system (as manage.py generate has them)")
        add_endpoint_options(
            endpoint,
            budget_help="Most replies to pay for per system: battle replies and background samples (default 1,000).",
            reply="reply",
            prompt_before="each conversation",
        )

    def handle(self, *args, **options):
        owner = get_owner(options["owner"])
        fields = endpoint_fields(options)
        try:
            systems = [setup.parse_system(text) for text in options["system"]]
            study = setup.do_create_arena(
                owner,
                options["name"],
                systems,
                samples=options["samples"],
                endpoint_fields=fields,
                starters=options["starter"],
                categories=options["category"],
                base_url=options["base_url"],
                description=options["description"],
            )
        except ServiceError as exc:
            raise CommandError(f"{exc} (nothing was created)") from None
        base = (study.public_base_url or settings.SITE_URL).rstrip("/")
        names = ", ".join(s.name for s in study.systems.order_by("id"))
        pairs = study.comparisons.count()
        self.stdout.write(
            self.style.SUCCESS(
                f"Created arena '{study.name}': {study.systems.count()} systems ({names}), "
                f"{pairs} system pair{'s' if pairs != 1 else ''}, K = {study.arena.samples} background samples per "
                "system and prompt. Raters join through its open link:"
            )
        )
        self.stdout.write(f"URL to paste: {base}{study.open_link_path()}")
