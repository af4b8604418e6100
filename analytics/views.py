"""The researcher's report page, its CSV tables, and the report API."""

from __future__ import annotations

import csv
import io
import re
from typing import cast
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from analytics import arena, budgeting, populations, stored
from analytics.populations import Population
from analytics.tables import report_tables
from annotation import questions
from annotation.access import access_study
from annotation.errors import ServiceError
from annotation.exchange.rules import csv_safe


def population_of(request: HttpRequest, study) -> Population:
    """The rater population the request asks for (humans by default); a bad parameter is a 400 naming it."""
    params = {name: request.GET.get(name, "") for name in ("population", "rater", "screened", "question")}
    params["source"] = ",".join(request.GET.getlist("source"))  # checkboxes, or one comma-separated value
    try:
        return populations.parse_for(study, params)
    except populations.PopulationError as exc:
        raise BadPopulation(str(exc)) from None


class BadPopulation(Exception):
    pass


_SOURCE = "(" + "|".join(populations.SOURCES) + ")"
SOURCE_PATTERN = f"^{_SOURCE}(,{_SOURCE})*$"


@login_required
def report(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    try:
        population = population_of(request, study)
    except BadPopulation as exc:
        return render(
            request,
            "analytics/report.html",
            {
                "study": study,
                "error": str(exc),
                "population": Population(),
                "asked": questions.preference_questions(study),
                "sources": populations.SOURCES,
            },
            status=400,
        )
    served = stored.do_serve(study, population, page=True)
    context = {
        "study": study,
        "population": population,
        "served": served,
        "query": urlencode(population.query()),
        "sources": populations.SOURCES,
        "rater_ids": study.raters.values_list("external_id", flat=True)[:1000],
        "report": served.report,
        "asked": questions.preference_questions(study),
    }
    return render(request, "analytics/report.html", context)


@login_required
def report_status(request: HttpRequest, study_id: int) -> HttpResponse:
    """Polled by the report page while its report is missing or stale: reloads the page once the stored
    report is fresh, else shows the refresh job's progress."""
    study = access_study(request, study_id)
    try:
        population = population_of(request, study)
    except BadPopulation as exc:
        return HttpResponse(str(exc), status=400)
    served = stored.do_serve(study, population, page=True)
    response = render(
        request,
        "analytics/_report_status.html",
        {"study": study, "served": served, "query": urlencode(population.query())},
    )
    if served.state == "fresh":
        response["HX-Refresh"] = "true"
    return response


@login_required
def report_table(request: HttpRequest, study_id: int, name: str) -> HttpResponse:
    study = access_study(request, study_id)
    try:
        population = population_of(request, study)
    except BadPopulation as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    served = stored.do_serve(study, population)
    report = None if served.report is None else stored.readable(served.report)
    if report is None:
        messages.info(request, "The report is being computed; its tables can be downloaded once it is ready.")
        return redirect(f"{reverse('report', args=[study.pk])}?{urlencode(population.query())}")
    tables = report_tables(report)
    if name not in tables:
        raise Http404("No such table.")
    columns, rows = tables[name]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    writer.writerows(["" if v is None else (csv_safe(v) if isinstance(v, str) else v) for v in row] for row in rows)
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    # an attachment's header is never None (django-stubs types the function for both cases)
    response["Content-Disposition"] = cast(
        str, content_disposition_header(True, table_filename(study.name, name, population.key))
    )
    return response


def table_filename(study_name: str, table: str, population_key: str) -> str:
    """A report table's CSV file name: the study, the table and (but for the humans) the population, its parts kept
    apart (humans|question=clarity -> humans-question-clarity)."""
    suffix = "" if population_key == populations.HUMANS else "-" + slugify(re.sub(r"[|:=,]+", "-", population_key))
    return f"{study_name}-{table}{suffix}.csv"


@extend_schema(
    parameters=[
        OpenApiParameter(
            "population",
            str,
            pattern=r"^(humans|all|judge:.+)$",
            description="humans (default), all (mixes humans and judges), or judge:<rater id>",
        ),
        OpenApiParameter(
            "source", str, pattern=SOURCE_PATTERN, description="Comma-separated: " + ", ".join(populations.SOURCES)
        ),
        OpenApiParameter("rater", str, description="One rater's id"),
        OpenApiParameter(
            "screened", str, enum=["include", "exclude"], description="include | exclude (default) screened-out raters"
        ),
    ],
    responses={200: OpenApiTypes.OBJECT, 202: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT},
    description="The study report (see `report --json`) for one rater population, served from the stored "
    "result; `report_state` says whether it is fresh or stale (a refresh is then queued). 202 while "
    "the first report is computed.",
)
@api_view(["GET"])
def report_api(request, study_id: int):
    """The study report (the keys of docs/interfaces.md#report-json) as JSON, for the researcher who owns the study."""
    study = access_study(request, study_id)
    try:
        population = population_of(request, study)
    except BadPopulation as exc:  # a judge or rater the study does not have is not found; bad syntax is a 400
        return Response({"detail": str(exc)}, status=404 if "this study has no" in str(exc) else 400)
    served = stored.do_serve(study, population)
    if served.report is None:
        return Response(
            {"report_state": served.meta(), "population": population.as_dict()},
            status=202,
            headers={"Retry-After": "2"},
        )
    return Response({**served.report, "report_state": served.meta()})


BUDGET_FIELDS = ("margins", "raters", "power", "alpha", "pair")  # what the settings page's planner form sends


@login_required
def budget_start(request: HttpRequest, study_id: int) -> HttpResponse:
    """The settings page's budget planner: queue a plan (the worker simulates it) and go back to the page, which
    shows its progress and then the plan. A plan replaces the study's last one, so planning is an editor's."""
    study = access_study(request, study_id)
    if request.method != "POST":
        return redirect(f"{reverse('study_settings', args=[study.pk])}#budget")
    try:
        plan_request = budgeting.read_request(study, {f: request.POST.get(f, "").strip() for f in BUDGET_FIELDS})
    except budgeting.BadRequest as exc:
        messages.error(request, f"Budget planner, {budgeting.FIELD_WORDS.get(exc.field, exc.field)}: {exc.message}")
    else:
        try:
            budgeting.do_start_budget(study, plan_request)
        except ServiceError as exc:  # the study plans another request now
            messages.error(request, str(exc))
        else:
            messages.success(request, "Planning the budget in the background; this page shows it when it is done.")
    return redirect(f"{reverse('study_settings', args=[study.pk])}#budget")


@extend_schema(
    request={"application/json": budgeting.REQUEST_SCHEMA},
    responses={
        200: OpenApiTypes.OBJECT,
        202: OpenApiTypes.OBJECT,
        400: OpenApiTypes.OBJECT,
        404: OpenApiTypes.OBJECT,
        429: OpenApiTypes.OBJECT,
    },
    description="The budget planner (`plan_budget`). GET: the latest plan (`rows`: per system pair, margin and raters "
    "per item: items, judgments (items x raters x `pairs_per_item`), assignments, cost, rater_hours, the raters' "
    "intra-item correlation `rho` (`rho_seen`, `rho_items`, `design_effect`, `second_rater_share`) and the advice "
    "(`advice`, `recommended`); empty before any, `created` null) and "
    "the job computing a newer one. POST the plan's fields (all optional) to queue a plan: 202 with "
    "the job (the same plan already queued or running is returned); 400 names the field refused; 429 while "
    "the study plans another request.",
)
@api_view(["GET", "POST"])
def budget_api(request, study_id: int):
    study = access_study(request, study_id)  # reads the plan (a GET: any member); a POST plans (an editor's)
    job = study.jobs.filter(kind=budgeting.KIND).first()
    job_state = (
        None
        if job is None
        else {"id": job.pk, "status": job.status, "done": job.done, "total": job.total, "message": job.message}
    )
    if request.method == "POST":
        values = request.data
        if not hasattr(values, "keys"):
            return Response(
                {
                    "detail": "Send a JSON object of the plan's fields (all optional): "
                    + ", ".join(budgeting.FIELDS)
                    + "."
                },
                status=400,
            )
        unknown = sorted(set(values.keys()) - set(budgeting.FIELDS))
        if unknown:
            return Response(
                {k: ["not a field of a budget plan; the fields are " + ", ".join(budgeting.FIELDS)] for k in unknown},
                status=400,
            )
        try:
            plan_request = budgeting.read_request(study, {k: values.get(k) for k in values.keys()})
        except budgeting.BadRequest as exc:
            return Response({exc.field: [exc.message]}, status=404 if isinstance(exc, budgeting.NoSuchPair) else 400)
        try:
            job = budgeting.do_start_budget(study, plan_request)
        except ServiceError as exc:  # the study plans another request now: ask again when it is done
            return Response({"detail": str(exc)}, status=429, headers={"Retry-After": "10"})
        return Response(
            {"job": {"id": job.pk, "status": job.status, "done": 0, "total": 0, "message": job.message}}, status=202
        )
    latest = budgeting.latest(study)
    if latest is None:
        return Response(
            {"rows": [], "created": None, "job": job_state, "detail": "No budget plan yet: POST to plan one."}
        )
    return Response({**latest.result, "created": latest.created.isoformat(), "job": job_state})


@login_required
def arena_board(request: HttpRequest, study_id: int) -> HttpResponse:
    """An arena's leaderboard page: the board as the worker last stored it (``analytics.arena``), never computed
    here; its body polls ``arena_board_body`` for a newer one."""
    study = access_study(request, study_id)
    if not study.is_arena:
        raise Http404("This study is not an arena.")
    return render(request, "analytics/arena_board.html", arena.page(study, arena.do_serve(study)))


@login_required
def arena_board_body(request: HttpRequest, study_id: int) -> HttpResponse:
    """Polled by the board page: 204 (nothing to swap) while the stored board and its state are the ones the page
    shows (``since``, ``state``), else the new body."""
    study = access_study(request, study_id)
    if not study.is_arena:
        raise Http404("This study is not an arena.")
    served = arena.do_serve(study)
    context = arena.page(study, served)
    if request.GET.get("since", "") == context["since"] and request.GET.get("state", "") == context["state"]:
        return HttpResponse(status=204)
    return render(request, "analytics/_arena_board_body.html", context)
