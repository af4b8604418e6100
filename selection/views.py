"""Researcher pages of the selection app: separability (with its background job) and live selection."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.middleware import HtmxDetails

from annotation import access
from annotation.access import access_study
from annotation.errors import ServiceError
from annotation.models import Generation, Job
from selection import jobs, live, services
from selection.core.separability import METRICS
from selection.models import SeparabilityRun
from selection.plots import histogram_svg
from selection.strategies import STRATEGIES

METRIC_CHOICES = [m for base in METRICS for m in (base, f"{base}-la")]
SHOWN_ITEMS = 5


class HtmxHttpRequest(HttpRequest):
    """A request as the type checker sees it behind ``django_htmx.middleware.HtmxMiddleware`` (config/settings.py),
    which sets ``htmx`` on every one (django-htmx's documented pattern; never instantiated)."""

    htmx: HtmxDetails


@login_required
def separability(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    metric = request.GET.get("metric", study.selection_settings.separability_metric)
    if metric not in METRIC_CHOICES:
        metric = study.selection_settings.separability_metric
    runs = SeparabilityRun.objects.filter(study=study, metric=metric).select_related(
        "comparison__system_a", "comparison__system_b"
    )
    panels = [_panel(run, study.output_format) for run in runs]
    job = Job.objects.filter(study=study, kind="separability").first()
    # K: samples per system and item; separability compares a system's own samples, so K = 1 leaves it undefined
    per_system = (
        Generation.objects.filter(item__study=study)
        .values("system")
        .annotate(k=Max("sample_index"))
        .values_list("k", flat=True)
    )
    k = min(per_system) + 1 if per_system else 0
    return render(
        request,
        "selection/separability.html",
        {
            "study": study,
            "metric": metric,
            "metrics": METRIC_CHOICES,
            "panels": panels,
            "job": job,
            "n_comparisons": study.comparisons.count(),
            "k": k,
        },
    )


def _panel(run: SeparabilityRun, output_format: str) -> dict:
    rows = list(run.items.select_related("item").order_by("delta"))
    scored = [(r, r.delta) for r in rows if r.delta is not None]
    defined = [r for r, _ in scored]
    texts: dict[tuple[int, int], list[tuple[int, str]]] = {}  # (item, system) -> (sample index, text)
    shown = defined[:SHOWN_ITEMS] + defined[-SHOWN_ITEMS:]
    for g in Generation.objects.filter(
        item__in=[r.item for r in shown], system__in=[run.comparison.system_a, run.comparison.system_b]
    ):
        texts.setdefault((g.item_id, g.system_id), []).append((g.sample_index, g.text))

    def entry(row):
        return {
            "row": row,
            "input": row.item.input,
            "format": output_format,
            "system_a": run.comparison.system_a.name,
            "system_b": run.comparison.system_b.name,
            "a": [t for _, t in sorted(texts.get((row.item_id, run.comparison.system_a_id), []))],
            "b": [t for _, t in sorted(texts.get((row.item_id, run.comparison.system_b_id), []))],
        }

    values = [delta for _, delta in scored]
    return {
        "run": run,
        "total": len(rows),
        "defined": len(defined),
        "undefined": len(rows) - len(defined),
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
    if not Generation.objects.filter(item__study=study, sample_index__gte=1).exists():
        messages.error(
            request,
            "Separability needs at least two outputs per system and item (K >= 2); this study "
            "has one, so it would be undefined for every item.",
        )
        return redirect("separability", study_id=study.pk)
    if metric not in METRIC_CHOICES:
        messages.error(request, f"Unknown metric {metric!r}.")
        return redirect("separability", study_id=study.pk)
    try:
        jobs.do_start_separability_job(study, metric)
    except ServiceError as exc:  # as many computations queued as the study or the researcher may have
        messages.error(request, str(exc))
    return redirect(f"{reverse('separability', args=[study.pk])}?metric={metric}")


@login_required
@require_POST
def embedding_start(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    try:
        jobs.do_start_embedding_job(study)
    except ServiceError as exc:
        messages.error(request, str(exc))
    return redirect(study)


@login_required
def job_progress(request: HtmxHttpRequest, study_id: int, job_id: int) -> HttpResponse:
    study, job = access.access_job(request, study_id, job_id)
    response = render(request, "selection/_job.html", {"study": study, "job": job})
    if request.htmx and not job.active and request.GET.get("was") == "active":
        response["HX-Refresh"] = "true"  # the results are in: reload the page to show them
    return response


@login_required
def live_selection(request: HttpRequest, study_id: int) -> HttpResponse:
    """What the selection did: its method, budget and seed, the items it chose per system pair (with DiffUse's
    cluster sizes and each item's separability), and the live stopping status when it runs live."""
    study = access_study(request, study_id)
    stored = study.selection_settings
    pairs = services.chosen_items(study)
    for p in pairs:
        p["any_delta"] = any(i["delta"] is not None for i in p["items"])
    return render(
        request,
        "selection/live.html",
        {
            "study": study,
            "statuses": live.statuses(study),
            "pairs": pairs,
            "strategy": STRATEGIES.get(stored.selection_method),
            "settings": stored,
        },
    )
