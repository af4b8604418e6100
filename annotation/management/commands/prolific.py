import json

from django.core.management.base import BaseCommand, CommandError

from annotation.crowd import prolific
from annotation.management.commands._common import get_study


class Command(BaseCommand):
    help = (
        "Prolific API (token from PROLIFIC_TOKEN): sync a Prolific study's submissions with this study, approve "
        "or reject submissions."
    )

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        sync = actions.add_parser("sync", help="List Prolific's submissions and match them to our sessions.")
        sync.add_argument("--study", required=True, help="Our study name.")
        sync.add_argument("--prolific-study", required=True, help="Prolific's study id.")
        approve = actions.add_parser("approve", help="Approve a submission.")
        approve.add_argument("--submission", required=True)
        reject = actions.add_parser("reject", help="Reject a submission (message of 100+ characters, category).")
        reject.add_argument("--submission", required=True)
        reject.add_argument("--message", required=True)
        reject.add_argument("--category", required=True, choices=prolific.REJECTION_CATEGORIES)

    def handle(self, *args, **o):
        try:
            client = prolific.Client()
            if o["action"] == "sync":
                rows = prolific.do_sync_submissions(client, get_study(o["study"]), o["prolific_study"])
                self.stdout.write(json.dumps(rows, indent=2))
            elif o["action"] == "approve":
                client.approve(o["submission"])
                self.stdout.write(f"Approved {o['submission']}.")
            else:
                client.reject(o["submission"], o["message"], o["category"])
                self.stdout.write(f"Rejected {o['submission']}.")
        except prolific.ProlificError as exc:
            raise CommandError(str(exc)) from None
