from django.core.management.base import BaseCommand, CommandError

from annotation import endpoints
from annotation.endpoint_runs import is_live
from annotation.endpoints import EndpointError
from annotation.generating import runner
from annotation.jobs import run_job
from annotation.management.commands._common import add_endpoint_options, endpoint_fields, get_study
from annotation.models import Job, SystemEndpoint

PASSES = 3  # runs over what is missing while each brings new outputs (failed requests are asked again)


class Command(BaseCommand):
    help = (
        "Generate a system's outputs from an OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, the llama.cpp "
        "server, ...): --samples outputs per item of the study, stored with their provenance; runs to the end in "
        "the foreground. Resumable: run it again and only what is missing is asked for (a second call with "
        "nothing missing asks nothing). The first call adds the system to the study (a study created from a "
        "file of inputs alone has none); once every item has its outputs the system joins the comparison plan."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="The study: its name, or OWNER/NAME.")
        parser.add_argument(
            "--system",
            required=True,
            help="The system's name in the study (new, or one added from an endpoint before).",
        )
        parser.add_argument(
            "--base-url",
            required=True,
            help="The endpoint's base URL, e.g. http://127.0.0.1:8000/v1 (vLLM) or http://127.0.0.1:11434/v1 (Ollama).",
        )
        parser.add_argument("--model", required=True, help="The model name the endpoint expects.")
        parser.add_argument(
            "--samples",
            type=int,
            required=True,
            help="Outputs per item (K; separability needs 2 or more, its paper uses 5).",
        )
        add_endpoint_options(
            parser,
            budget_help="Most replies to pay for, over every run of this system (default 1,000, or what was set "
            "before).",
        )

    def handle(self, *args, **options):
        study = get_study(options["study"])
        endpoint = self._endpoint(study, options)
        run = runner.GenerationRun(endpoint)
        self.stderr.write(
            f"{endpoint}: {run.remaining()} output(s) to generate from {endpoint.model} "
            f"at {endpoint.base_url} (the study's Systems page shows the run's progress)"
        )
        for _ in range(PASSES):  # the first pass, then again for what failed while each pass brings new outputs
            if not run.remaining():
                break
            used = run.usage()
            if used.replies >= endpoint.request_budget:
                break
            before = used.done
            try:  # a job of its own, run here: a worker's run and this one exclude each other, Stop on the page works
                job = run.do_start(foreground=True)
            except EndpointError as exc:
                raise CommandError(str(exc)) from None
            run_job.call(job.pk)
            job.refresh_from_db()
            self.stderr.write(f"run {job.pk}: {job.message}")
            if job.status == Job.Status.FAILED:
                raise CommandError(f"The run failed: {job.message}")
            if job.status == Job.Status.STOPPED:
                raise CommandError(f"The run was stopped (from the Systems page): {job.message}")
            if run.usage().done == before:
                break
        self.stdout.write(run.summary())
        left = run.remaining()
        if left and run.usage().replies >= endpoint.request_budget:
            raise CommandError(
                f"The request budget ({endpoint.request_budget}) is used up with {left} output(s) "
                "missing: run again with a larger --budget."
            )
        if left:
            problems = [c.problem for c in endpoint.calls.exclude(status="generated").order_by("-pk")[:3]]
            raise CommandError(
                f"{left} output(s) still missing after the retries (run again to ask for them). The "
                "last problems: " + " | ".join(problems)
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"{endpoint}: every item has {endpoint.samples} output(s). {run.do_include_if_complete()}"
            )
        )

    def _endpoint(self, study, options) -> SystemEndpoint:
        fields = {"base_url": options["base_url"], "model": options["model"], "samples": options["samples"]}
        fields.update(endpoint_fields(options))
        system = study.systems.filter(name=options["system"].strip()).first()
        if system is None:
            fields.setdefault("api_key_env", "")  # a local server needs no key (the form's default too)
            try:
                return runner.do_add_endpoint_system(study, options["system"], **fields)
            except EndpointError as exc:
                raise CommandError(str(exc)) from None
        endpoint = SystemEndpoint.objects.filter(system=system).select_related("system").first()
        if endpoint is None:
            raise CommandError(f"The system {system.name!r} has imported outputs; generate into a new system name.")
        changed = runner.check_same_source(endpoint, **fields)
        if changed:
            raise CommandError(
                f"{system.name!r} already has outputs generated otherwise ({'; '.join(changed)}): the "
                "outputs of one system come from one configuration. Use a new system name."
            )
        if is_live(runner.GenerationRun(endpoint).current_job()):
            raise CommandError(
                f"{system.name!r} is being generated now (by the worker, or another generate "
                "command); stop that run first."
            )
        for name, value in fields.items():
            setattr(endpoint, name, value)
        try:
            endpoints.check_configuration(endpoint)
        except endpoints.EndpointError as exc:
            raise CommandError(str(exc)) from None
        endpoint.save()
        return endpoint
