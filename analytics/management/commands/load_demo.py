import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from analytics import stored
from analytics.populations import Population
from annotation.demo import population
from annotation.models import Rater, Study
from annotation.studies import creation, enrolment, lifecycle
from selection import services as selection_services

DEMO_SEED = 20261124  # the same plan, simulated answers and report on every machine
DEMO_FILE = Path(population.__file__).resolve().parent / "demo_study.jsonl"


class Command(BaseCommand):
    help = (
        "Set up the demo: a researcher account (a new password is printed on every run), the demo study "
        "(20 items, 3 systems, 3 samples each) with judgments by five simulated people and one simulated LLM "
        "judge, its separability (rouge1-la) and report, and rater links. Safe to run again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default="researcher")
        parser.add_argument("--study", default="demo", help="Name of the demo study.")
        parser.add_argument("--base-url", default=settings.SITE_URL, help="Base of the printed links.")
        parser.add_argument("--empty", action="store_true", help="Leave the demo study without judgments.")

    def handle(self, *args, **options):
        users = get_user_model().objects
        user = users.filter(username=options["username"]).first()
        if user is None:
            user = users.create_user(options["username"], email="")  # a researcher, not an operator
        password = secrets.token_urlsafe(9)
        user.set_password(password)
        user.save()
        study = Study.objects.filter(owner=user, name=options["study"]).first()
        if study is None:
            study = creation.do_create_study(
                user,
                options["study"],
                DEMO_FILE.read_bytes(),
                DEMO_FILE.name,
                description="Demo: news summaries and short answers from three fictional systems.",
            )
            # Three samples per system: three pairs per rating set show each sample once (the paper's protocol).
            # rouge1-la separability needs no encoder, so the demo's separability page fills in at once.
            lifecycle.do_update_settings(
                study, {"pairs_per_assignment": 3, "separability_metric": "rouge1-la", "seed": DEMO_SEED}, None
            )
            if not options["empty"]:
                self._populate(study)
        if not study.open_link_enabled:
            study.open_link_enabled = True
            study.save(update_fields=["open_link_enabled"])
        rater = Rater.objects.filter(study=study, external_id="demo-rater").first()
        if rater is None:
            rater = enrolment.do_create_rater_link(study, "demo-rater")
        base = (study.public_base_url or options["base_url"]).rstrip("/")
        self.stdout.write(self.style.SUCCESS("SepLab demo is ready."))
        self.stdout.write(f"  Researcher login: {base}/accounts/login/  user '{user.username}'  password '{password}'")
        self.stdout.write(f"  Demo study:       {base}{study.get_absolute_url()}")
        self.stdout.write(f"  Rater link:       {base}{rater.link_path()}")
        self.stdout.write(f"  Open rater link:  {base}{study.open_link_path()}")

    def _populate(self, study) -> None:
        made = population.populate(study)
        selection_services.do_compute_separability(study, "rouge1-la")
        stored.do_refresh(study, Population())  # the first report is there on first open
        self.stdout.write(
            f"  Simulated {made['human']} judgments by 5 demo people and {made['judge']} verdicts by "
            "one demo judge (both orders); rate more yourself with the links below."
        )
