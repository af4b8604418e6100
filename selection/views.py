"""Researcher pages of the selection app: separability (with its background job) and live selection."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotation.access import access_study
from annotation.models import Generation
from selection import live, tasks
from selection.core.separability import METRICS
from selection.models import Job, SeparabilityRun
from selection.plots import histogram_svg

METRIC_CHOICES = [m for base in METRICS for m in (base, f"{base}-la")]
SHOWN_ITEMS = 5


@login_required
def separability(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    metric = request.GET.get("metric", study.selection_settings.separability_metric)
    if metric not in METRIC_CHOICES:
        metric = study.selection_settings.separability_metric
    runs = SeparabilityRun.objects.filter(study=study, metric=metric).select_related(
        "comparison__system_a", "comparison__system_b")
    panels = [_panel(run) for run in runs]
    job = Job.objects.filter(study=study, kind="separability").first()
    return render(request, "selection/separability.html", {
        "study": study, "metric": metric, "metrics": METRIC_CHOICES, "panels": panels, "job": job,
        "n_comparisons": study.comparisons.count(),
    })


def _panel(run: SeparabilityRun) -> dict:
    rows = list(run.items.select_related("item").order_by("delta"))
    defined = [r for r in rows if r.delta is not None]
    texts: dict[tuple[int, int], list[str]] = {}
    shown = defined[:SHOWN_ITEMS] + defined[-SHOWN_ITEMS:]
    for g in Generation.objects.filter(item__in=[r.item for r in shown],
                                       system__in=[run.comparison.system_a, run.comparison.system_b]):
        texts.setdefault((g.item_id, g.system_id), []).append((g.sample_index, g.text))

    def entry(row):
        return {"row": row, "a": [t for _, t in sorted(texts.get((row.item_id, run.comparison.system_a_id), []))],
                "b": [t for _, t in sorted(texts.get((row.item_id, run.comparison.system_b_id), []))]}

    values = [r.delta for r in defined]
    return {
        "run": run, "total": len(rows), "defined": len(defined), "undefined": len(rows) - len(defined),
        "mean": sum(values) / len(values) if values else None,
        "svg": histogram_svg(values, label=f"delta ({run.metric})") if values else "",
        "most": [entry(r) for r in reversed(defined[-SHOWN_ITEMS:])],
        "least": [entry(r) for r in defined[:SHOWN_ITEMS]],
    }


@login_required
@require_POST
def separability_start(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    metric = request.POST.get("metric", study.selection_settings.separability_metric)
    if metric not in METRIC_CHOICES:
        messages.error(request, f"Unknown metric {metric!r}.")
        return redirect("separability", study_id=study.pk)
    tasks.start_separability_job(study, metric)
    return redirect(f"{reverse('separability', args=[study.pk])}?metric={metric}")


@login_required
@require_POST
def embedding_start(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    tasks.start_embedding_job(study)
    return redirect(study)


@login_required
def job_progress(request: HttpRequest, study_id: int, job_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    job = get_object_or_404(Job, pk=job_id, study=study)
    response = render(request, "selection/_job.html", {"study": study, "job": job})
    if request.htmx and not job.active and request.GET.get("was") == "active":
        response["HX-Refresh"] = "true"  # the results are in: reload the page to show them
    return response


@login_required
def live_selection(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    return render(request, "selection/live.html", {"study": study, "statuses": live.statuses(study)})
