import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotation.crowd import mturk
from annotation.errors import ServiceError
from annotation.management.commands._common import get_study


class Command(BaseCommand):
    help = (
        "MTurk requester API for existing requesters (sandbox by default; --live to spend real money). "
        "Credentials come from the standard AWS environment or config. Actions: create-hits, sync, approve, "
        "reject, bonus, create-qualification, grant-qualification."
    )

    def add_arguments(self, parser):
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--sandbox", action="store_true", default=True, help="Use the sandbox (default).")
        where.add_argument("--live", action="store_true", help="Use the live marketplace (real payments).")
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create-hits", help="Create HITs that open the study's MTurk-style link.")
        create.add_argument("--study", required=True)
        create.add_argument("--reward", required=True, help="USD per assignment, e.g. 1.20")
        create.add_argument("--assignments", type=int, default=3, help="Workers per HIT.")
        create.add_argument("--hits", type=int, default=1, help="Number of HITs.")
        create.add_argument("--title", default="Compare two texts")
        create.add_argument("--description", default="Read an input and two outputs, and say which is better.")
        create.add_argument("--keywords", default="evaluation, comparison, text")
        create.add_argument("--duration", type=int, default=3600, help="Seconds a worker has per assignment.")
        create.add_argument("--lifetime", type=int, default=7 * 24 * 3600, help="Seconds the HIT stays listed.")
        create.add_argument("--base-url", default=settings.SITE_URL, help="Public https address of this server.")
        sync = actions.add_parser("sync", help="List and record the submitted assignments of the study's HITs.")
        sync.add_argument("--study", required=True)
        approve = actions.add_parser("approve", help="Approve an assignment.")
        approve.add_argument("--assignment-id", required=True)
        approve.add_argument("--feedback", default="")
        reject = actions.add_parser("reject", help="Reject an assignment (a reason is required).")
        reject.add_argument("--assignment-id", required=True)
        reject.add_argument("--reason", required=True)
        bonus = actions.add_parser("bonus", help="Pay a bonus.")
        bonus.add_argument("--worker-id", required=True)
        bonus.add_argument("--assignment-id", required=True)
        bonus.add_argument("--amount", required=True)
        bonus.add_argument("--reason", required=True)
        qual = actions.add_parser("create-qualification", help="Create a qualification type.")
        qual.add_argument("--name", required=True)
        qual.add_argument("--description", required=True)
        grant = actions.add_parser("grant-qualification", help="Grant a qualification to a worker.")
        grant.add_argument("--qualification-id", required=True)
        grant.add_argument("--worker-id", required=True)
        grant.add_argument("--value", type=int, default=1)

    def handle(self, *args, **o):
        from botocore.exceptions import BotoCoreError, ClientError

        sandbox = not o["live"]
        client = mturk.make_client(sandbox)
        try:
            self._run(client, o, sandbox)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise CommandError(f"MTurk refused: {error.get('Code')}: {error.get('Message')}") from None
        except BotoCoreError as exc:
            raise CommandError(f"MTurk could not be reached: {exc}") from None
        except ServiceError as exc:
            raise CommandError(str(exc)) from None

    def _run(self, client, o, sandbox: bool) -> None:
        action = o["action"]
        where = "sandbox" if sandbox else "LIVE"
        if action == "create-hits":
            spec = mturk.HitSpec(
                o["title"], o["description"], o["reward"], o["assignments"], o["keywords"], o["duration"], o["lifetime"]
            )
            hits = mturk.do_create_hits(client, get_study(o["study"]), o["base_url"], spec, o["hits"], sandbox)
            for hit in hits:
                self.stdout.write(
                    f"Created {where} HIT {hit.hit_id} ({hit.max_assignments} assignments at ${hit.reward})."
                )
        elif action == "sync":
            rows = mturk.do_sync_assignments(client, get_study(o["study"]))
            self.stdout.write(json.dumps(rows, indent=2))
        elif action == "approve":
            mturk.approve(client, o["assignment_id"], o["feedback"])
            self.stdout.write(f"Approved {o['assignment_id']} ({where}).")
        elif action == "reject":
            mturk.reject(client, o["assignment_id"], o["reason"])
            self.stdout.write(f"Rejected {o['assignment_id']} ({where}).")
        elif action == "bonus":
            mturk.bonus(client, o["worker_id"], o["assignment_id"], o["amount"], o["reason"])
            self.stdout.write(f"Paid a ${mturk.money(o['amount'])} bonus to {o['worker_id']} ({where}).")
        elif action == "create-qualification":
            qid = mturk.create_qualification(client, o["name"], o["description"])
            self.stdout.write(f"Created qualification {qid} ({where}).")
        elif action == "grant-qualification":
            mturk.grant_qualification(client, o["qualification_id"], o["worker_id"], o["value"])
            self.stdout.write(f"Granted {o['qualification_id']} to {o['worker_id']} ({where}).")
