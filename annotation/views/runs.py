"""The run card of an endpoint run -- an LLM judge's or a generated system's (``annotation/endpoint_runs.py``) -- and
its two views, the same for both: the card's progress, polled while the run is live, and start / stop. Who may is
``annotation/access.py``'s (``access_judge``, ``access_system_endpoint``); the page each kind lives on is its own
(``views/judges.py``, ``views/systems.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation import access
from annotation.endpoint_runs import EndpointRun, Usage, is_live
from annotation.endpoints import EndpointError
from annotation.errors import ServiceError
from annotation.generating.runner import GenerationRun
from annotation.http import ResearcherRequest
from annotation.judges.runner import JudgeRun
from annotation.models import Endpoint, Job
from annotation.studies import team


@dataclasses.dataclass(frozen=True)
class Kind:
    """A kind of endpoint run as the pages know it: who may reach one, its run, the prefix of its URL names
    (``<prefix>_detail``, ``<prefix>_progress``, ``<prefix>_action``) and of its page's template, whose partial
    ``run-card`` includes the run card with the page's words for it, and who stops when Stop is pressed."""

    access: Callable[[HttpRequest, int, int], Endpoint]  # access.access_judge, access.access_system_endpoint
    run: type[EndpointRun]
    urls: str
    subject: str


KINDS = {
    JudgeRun.kind: Kind(access.access_judge, JudgeRun, "judge", "The judge"),
    GenerationRun.kind: Kind(access.access_system_endpoint, GenerationRun, "system", "The run"),
}


@dataclasses.dataclass(frozen=True)
class RunCard:
    """What the run card (``annotation/_endpoint_run.html``) shows: the current job, what the endpoint used, and
    what is still to ask when no run is live."""

    run: EndpointRun
    job: Job | None
    live: bool
    usage: Usage
    todo: int | None
    progress_url: str
    start_url: str
    stop_url: str

    @property
    def endpoint(self) -> Endpoint:
        return self.run.endpoint


def run_card(run: EndpointRun) -> RunCard:
    job = run.current_job()
    live = is_live(job)
    kind = KINDS[run.kind]
    study_id, pk = run.study.pk, run.endpoint.pk
    return RunCard(
        run=run,
        job=job,
        live=live,
        usage=run.usage(),
        todo=None if live else run.remaining(),
        progress_url=reverse(f"{kind.urls}_progress", args=[study_id, pk]),
        start_url=reverse(f"{kind.urls}_action", args=[study_id, pk, "start"]),
        stop_url=reverse(f"{kind.urls}_action", args=[study_id, pk, "stop"]),
    )


@login_required
def run_progress(request: ResearcherRequest, study_id: int, pk: int, kind: str) -> HttpResponse:
    """The run card as the endpoint's page shows it, polled by htmx every second while the run is live. The poll that
    finds the run over reloads the page, so its lists (every reply or output, the unusable ones, the failures) show
    what the run brought."""
    run = KINDS[kind].run(KINDS[kind].access(request, study_id, pk))
    card = run_card(run)
    page = f"annotation/{KINDS[kind].urls}_detail.html#run-card"
    response = render(request, page, {"card": card, "study": run.study})
    if request.htmx and not card.live:
        response["HX-Refresh"] = "true"
    return response


@login_required
@require_POST
def run_action(request: ResearcherRequest, study_id: int, pk: int, kind: str, action: str) -> HttpResponse:
    """Start (a first run or a resume) or stop the run; back to the endpoint's page."""
    run = KINDS[kind].run(KINDS[kind].access(request, study_id, pk))
    if action == "start":
        try:
            run.do_start()
        except (EndpointError, ServiceError) as exc:  # ServiceError: as many runs queued as the researcher may
            messages.error(request, str(exc))
        else:
            team.do_audit(run.study, request.user, "run_start", f"started the run of {run.endpoint}")
    elif action == "stop":
        run.do_stop()
        team.do_audit(run.study, request.user, "run_stop", f"stopped the run of {run.endpoint}")
        messages.info(
            request,
            f"{KINDS[kind].subject} stops within a second: requests still out are cut off and asked again on "
            "resume; resume it to go on.",
        )
    else:
        raise Http404("No such action.")
    return redirect(f"{KINDS[kind].urls}_detail", study_id, pk)
