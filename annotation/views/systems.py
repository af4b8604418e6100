"""The study's Systems page: every system with where its outputs come from (the study file, or an OpenAI-compatible
endpoint), how many it has of the ones wanted and whether it is compared yet; add a system by its endpoint, its run
card (start / stop / resume, progress, tokens and cost: ``views/runs.py``, shared with LLM judges), and its outputs
and the replies it could not use. The work is ``annotation/generating/runner.py``'s."""

from __future__ import annotations

import copy

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from annotation import access
from annotation.endpoints import EndpointError
from annotation.generating import runner
from annotation.http import ResearcherRequest
from annotation.models import Generation, GenerationCall, SystemEndpoint
from annotation.plan import planning
from annotation.studies import team
from annotation.views.forms import SystemEndpointForm
from annotation.views.runs import run_card

PROBLEMS_SHOWN = 5
OUTPUTS_PER_PAGE = 20
SAME_SOURCE = (
    "This system already has outputs, and all of a system's outputs come from one endpoint, model and way "
    "of asking (their provenance says which). It would change {changes}. Add another system for the new "
    "configuration; the budget, outputs per input, requests at once, timeout, retries and prices may "
    "change."
)


def _comparing(study) -> tuple[set[int], set[int]]:
    """The systems in one of the study's system pairs now, and those with every output (``systems_with_outputs``):
    a complete system is in no pair while raters' start froze the plan, or when the study compares only ticked
    pairs."""
    compared = {pk for pair in study.comparisons.values_list("system_a_id", "system_b_id") for pk in pair}
    return compared, {s.pk for s in planning.systems_with_outputs(study)}


@login_required
def systems(request: ResearcherRequest, study_id: int) -> HttpResponse:
    study = access.access_study(request, study_id)
    if request.method == "POST":
        form = SystemEndpointForm(request.POST)
        if form.is_valid():
            try:
                added = runner.do_add_endpoint_system(study, form.cleaned_data["name"], **form.endpoint_fields())
            except EndpointError as exc:
                form.add_error(None, str(exc))
            else:
                team.do_audit(study, request.user, "generate_added", f"added system {added} ({added.model})")
                messages.success(request, f"System {added} added. Start its run when ready.")
                return redirect("system_detail", study_id=study.pk, endpoint_id=added.pk)
    else:
        form = SystemEndpointForm()
    n_items = study.items.count()
    compared, complete = _comparing(study)
    rows = []
    for system in study.systems.select_related("endpoint").annotate(stored=Count("generations")).order_by("id"):
        endpoint: SystemEndpoint | None = getattr(system, "endpoint", None)  # an imported system has none
        row = {
            "system": system,
            "stored": system.stored,
            "compared": system.pk in compared,
            "complete": system.pk in complete,
        }
        if endpoint is not None:
            endpoint.system = system
            row.update(endpoint=endpoint, card=run_card(runner.GenerationRun(endpoint, n_items)))
        rows.append(row)
    return render(
        request,
        "annotation/systems.html",
        {
            "study": study,
            "form": form,
            "rows": rows,
            "n_items": n_items,
            "started": study.has_started(),
        },
    )


@login_required
def system_detail(request: HttpRequest, study_id: int, endpoint_id: int) -> HttpResponse:
    endpoint = access.access_system_endpoint(request, study_id, endpoint_id)
    study = endpoint.system.study
    n_items = study.items.count()
    card = run_card(runner.GenerationRun(endpoint, n_items))
    if request.method == "POST":
        form = SystemEndpointForm(request.POST, instance=copy.copy(endpoint))  # the form writes onto its own copy
        if card.live:
            messages.error(request, "Stop the run before changing how the outputs are asked for.")
            return redirect("system_detail", study_id=study.pk, endpoint_id=endpoint.pk)
        if form.is_valid():
            changes = runner.check_same_source(endpoint, **form.source_changes())
            if changes:
                form.add_error(None, SAME_SOURCE.format(changes="; ".join(changes)))
            else:
                form.save()
                messages.success(request, "Saved.")
                return redirect("system_detail", study_id=study.pk, endpoint_id=endpoint.pk)
    else:
        form = SystemEndpointForm(instance=endpoint)
    calls = GenerationCall.objects.filter(endpoint=endpoint).select_related("item").order_by("-id")
    outputs = (
        Generation.objects.filter(system=endpoint.system)
        .select_related("item")
        .order_by("item__position", "sample_index")
    )
    return render(
        request,
        "annotation/system_detail.html",
        {
            "card": card,
            "endpoint": endpoint,
            "study": study,
            "form": form,
            "n_items": n_items,
            "compared": endpoint.system_id in _comparing(study)[0],
            "complete": endpoint.system_id in _comparing(study)[1],
            "unusable": calls.filter(status=GenerationCall.Status.UNUSABLE)[:PROBLEMS_SHOWN],
            "failed": calls.filter(status=GenerationCall.Status.FAILED)[:PROBLEMS_SHOWN],
            "outputs": Paginator(outputs, OUTPUTS_PER_PAGE).get_page(request.GET.get("page")),
        },
    )
