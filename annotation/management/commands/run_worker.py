from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotation import worker


class Command(BaseCommand):
    help = (
        "Run the background worker (embedding, separability, reports, imports, LLM judges): django-tasks' "
        "database worker, supervised so that a locked or dropped database is waited out instead of ending it, "
        "with a sign of life every few seconds that pages and /healthz read, and jobs whose worker vanished "
        "failed visibly; it takes the fairest queued job (a researcher's share of the slots, the researcher "
        "served least recently first), several at once (--slots). Stop it with Ctrl+C or SIGTERM (a running task "
        "finishes first). `make run` starts one "
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
        parser.add_argument(
            "--max-tasks", type=int, help="Stop after this many tasks (for tests and batch use; one slot)."
        )
        parser.add_argument(
            "--slots",
            type=int,
            help="Tasks run at once, each in a thread of its own (default: SEPLAB_WORKER_SLOTS, 1; 1 with "
            "--max-tasks). One more than the researcher's share SEPLAB_JOBS_PER_RESEARCHER (2 by default, so 3 "
            "slots) keeps one researcher's long or hung jobs from holding every slot.",
        )
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
        if options["max_tasks"] is not None and options["max_tasks"] < 1:
            raise CommandError("--max-tasks must be 1 or more")
        slots = options["slots"]
        if slots is None:
            slots = 1 if options["max_tasks"] is not None else settings.SEPLAB_WORKER_SLOTS
        if slots < 1:
            raise CommandError("--slots must be 1 or more")
        if slots > 1 and options["max_tasks"] is not None:
            raise CommandError("--max-tasks counts one slot's tasks: run it with --slots 1")
        worker.run(
            options["queues"] or list(backend.get("QUEUES", ["default"])),
            options["interval"],
            "default",
            beat_seconds=options["beat_seconds"],
            max_tasks=options["max_tasks"],
            slots=slots,
        )
