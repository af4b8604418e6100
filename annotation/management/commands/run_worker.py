from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotation import worker


class Command(BaseCommand):
    help = (
        "Run the background worker (embedding, separability, reports, imports, LLM judges): django-tasks' "
        "database worker, supervised so that a locked or dropped database is waited out instead of ending it, "
        "with a sign of life every few seconds that pages and /healthz read, and jobs whose worker vanished "
        "failed visibly. Stop it with Ctrl+C or SIGTERM (a running task finishes first). `make run` starts one "
        "and starts it again if it is killed; run as many as you like for more throughput."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            help="Queue to take tasks from (repeatable; default: every queue the backend has).",
        )
        parser.add_argument("--interval", type=float, default=1.0, help="Seconds between polls when idle (1).")
        parser.add_argument("--max-tasks", type=int, help="Stop after this many tasks (for tests and batch use).")
        parser.add_argument(
            "--beat-seconds",
            type=float,
            default=worker.BEAT_SECONDS,
            help=f"Seconds between signs of life ({worker.BEAT_SECONDS:.0f}).",
        )

    def handle(self, *args, **options):
        backend = settings.TASKS["default"]
        if not backend["BACKEND"].startswith("django_tasks_db."):
            raise CommandError(
                f"run_worker runs the database backend's tasks; this server uses {backend['BACKEND']} "
                "(run that backend's own worker, e.g. rqworker)."
            )
        if options["interval"] <= 0 or options["beat_seconds"] <= 0:
            raise CommandError("--interval and --beat-seconds must be above 0")
        worker.run(
            options["queues"] or list(backend.get("QUEUES", ["default"])),
            options["interval"],
            "default",
            beat_seconds=options["beat_seconds"],
            max_tasks=options["max_tasks"],
        )
