"""The data manager's page (every item, searched and filtered) and its bulk actions, in the browser and the API."""

from __future__ import annotations

import dataclasses

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from analytics import curation
from annotation.access import REVIEW, access_study
from annotation.errors import FieldErrors
from annotation.models import Item, Study
from annotation.views.api_pagination import StrictPageNumberPagination

PER_PAGE = 50


def _systems(study: Study) -> list[str]:
    return list(study.systems.order_by("pk").values_list("name", flat=True))


def _need(action: object) -> str:
    """The role an action needs (``curation.ACTIONS``); an unknown one the least of them (a reviewer's: a viewer may
    act on nothing), and is then refused by name."""
    return curation.ACTIONS[action].need if isinstance(action, str) and action in curation.ACTIONS else REVIEW


@login_required
def study_items(request: HttpRequest, study_id: int) -> HttpResponse:
    """The data manager: every item of the study, filtered by the query string (a filter refused by name leaves every
    item shown and says why)."""
    study = access_study(request, study_id)
    systems = _systems(study)
    try:
        filters, problems = curation.Filters.check(request.GET, systems), {}
    except FieldErrors as exc:
        filters, problems = curation.Filters(), exc.errors
    rows, counts = curation.data_manager(study, filters)
    page = Paginator(rows, PER_PAGE).get_page(request.GET.get("page"))
    may: frozenset[str] = getattr(request, "study_may", frozenset())
    query = filters.query()
    return render(
        request,
        "analytics/data_manager.html",
        {
            "study": study,
            "page": page,
            "counts": counts,
            "filters": filters,
            "query": query,
            "problems": problems,
            "systems": systems,
            "agreement": curation.AGREEMENT,
            "judges": curation.JUDGES,
            "flagged": curation.FLAGGED,
            "states": curation.STATE,
            "actions": {key: a for key, a in curation.ACTIONS.items() if a.need in may},
            "back": request.get_full_path(),
        },
    )


@login_required
@require_POST
def curate(request: HttpRequest, study_id: int) -> HttpResponse:
    """A bulk action on the items ticked, or on every item the page's filters match (``scope=matching``)."""
    action = request.POST.get("action", "")
    study = access_study(request, study_id, _need(action))
    try:
        if request.POST.get("scope") == "matching":
            rows, _ = curation.data_manager(study, curation.Filters.check(request.POST, _systems(study)))
            ids: list = [r.item_id for r in rows]
            shown = request.POST.get("expected", "")
            if shown != str(len(ids)):  # new verdicts since the page was drawn: act only on what was shown
                raise FieldErrors(
                    {
                        "items": [
                            f"The items matching these filters changed since the page was shown ({shown or '?'} then, "
                            f"{len(ids)} now): look at them again before acting."
                        ]
                    }
                )
        else:
            ids = request.POST.getlist("items")
        n = curation.do_curate(study, action, ids, request.user)
    except FieldErrors as exc:
        for field, problems in exc.errors.items():
            messages.error(request, f"{field}: {' '.join(problems)}")
    else:
        done = curation.ACTIONS[action].done
        messages.success(
            request,
            f"{n} item{'' if n == 1 else 's'} {done}." if n else f"Nothing to change: those items were {done} already.",
        )
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = reverse("study_items", args=[study.pk])
    return redirect(back)


class CurationSerializer(serializers.Serializer):
    action = serializers.ChoiceField(
        choices=list(curation.ACTIONS),
        help_text="review: send to the review queue (a reviewer may); exclude: leave out of every analysis, kept "
        "and exported; reopen: analysed again, no longer sent, rulings withdrawn (exclude and reopen need an "
        "editor).",
    )
    items = serializers.ListField(
        child=serializers.CharField(max_length=200),
        min_length=1,
        max_length=curation.MOST_ITEMS,
        help_text="The items by their ids in the study file.",
    )


class CurationResultSerializer(serializers.Serializer):
    action = serializers.CharField()
    changed = serializers.IntegerField(help_text="Items the action changed (the others were so already).")


@extend_schema(
    request=CurationSerializer,
    responses={200: CurationResultSerializer},
    description="A data manager's bulk action on items named by their ids in the study file, all or none: 400 names "
    "the field refused (an unknown item, an excluded item sent to review) and changes nothing; a viewer gets 403.",
)
@api_view(["POST"])
def curate_api(request, study_id: int):
    asked = request.data.get("action") if isinstance(request.data, dict) else None
    study = access_study(request, study_id, _need(asked))
    given = CurationSerializer(data=request.data)
    given.is_valid(raise_exception=True)
    data = given.validated_data
    wanted = list(dict.fromkeys(data["items"]))
    found = dict(Item.objects.filter(study=study, external_id__in=wanted).values_list("external_id", "pk"))
    missing = [i for i in wanted if i not in found]
    if missing:
        raise ValidationError({"items": [f"Not items of this study: {', '.join(missing[:10])}."]})
    try:
        n = curation.do_curate(study, data["action"], [found[i] for i in wanted], request.user)
    except FieldErrors as exc:
        raise ValidationError(exc.errors) from None
    return Response({"action": data["action"], "changed": n})


class VerdictSerializer(serializers.Serializer):
    pair = serializers.IntegerField(help_text="The pair's id (the review queue's and the rulings API's).")
    system_a = serializers.CharField()
    system_b = serializers.CharField()
    samples = serializers.ListField(child=serializers.IntegerField(), help_text="The two outputs' sample indices.")
    people_winner = serializers.CharField(help_text="A system's name, tie, or none (no counted human judgment).")
    agreement = serializers.ChoiceField(choices=list(curation.AGREEMENT))
    judges = serializers.CharField(help_text="agree, disagree, none (no judge verdict), or empty (no people's winner).")
    flagged = serializers.BooleanField()
    ruling = serializers.CharField(allow_null=True, help_text="The ruling on the pair, if any.")


class ManagedItemSerializer(serializers.Serializer):
    id = serializers.CharField(source="external_id", help_text="The item's id in the study file.")
    excluded = serializers.BooleanField()
    review_requested = serializers.BooleanField()
    flagged = serializers.BooleanField()
    ruled = serializers.BooleanField()
    comments = serializers.ListField(child=serializers.CharField())
    pairs = VerdictSerializer(many=True, source="verdicts")


class ManagedPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="The study's items, flagged, …")
    results = ManagedItemSerializer(many=True)


@extend_schema(
    parameters=[
        OpenApiParameter(name, OpenApiTypes.STR, required=False, description=what)
        for name, what in (
            ("q", "text in the item's id or input (at most 200 characters)"),
            ("comment", "text in a rater's comment (at most 200 characters)"),
            ("system", "one of the study's systems, by name"),
            ("winner", "the people's winner: one of the study's systems by name, tie or none"),
        )
    ]
    + [
        OpenApiParameter(name, OpenApiTypes.STR, required=False, enum=["", *choices], description=what)
        for name, choices, what in (
            ("agreement", curation.AGREEMENT, "how the pair's raters agree"),
            ("judges", curation.JUDGES, "the pair's judges against its people"),
            ("flagged", curation.FLAGGED, "raters or a judge disagree"),
            ("state", curation.STATE, "the item's state"),
        )
    ]
    + [OpenApiParameter("page", {"type": "integer", "minimum": 1}, required=False, description="A page of 50 items.")],
    responses={200: ManagedPageSerializer},
    description="The data manager: the items the filters match (the page's, by the same names), each with its "
    "pairs' verdicts; 400 names each filter refused.",
)
@api_view(["GET"])
def data_manager_api(request, study_id: int):
    study = access_study(request, study_id)
    query = request.query_params
    try:
        filters = curation.Filters.check({n: query.get(n, "") for n in curation.Filters.NAMES}, _systems(study))
    except FieldErrors as exc:
        raise ValidationError(exc.errors) from None
    rows, counts = curation.data_manager(study, filters)
    paginator = StrictPageNumberPagination()
    paginator.page_size = PER_PAGE
    page = paginator.paginate_queryset(rows, request) or []
    items = [
        {
            "external_id": row.external_id,
            "excluded": row.excluded,
            "review_requested": row.review_requested,
            "flagged": row.flagged,
            "ruled": row.ruled,
            "comments": row.comments,
            "verdicts": [
                {
                    "pair": p.pair_id,
                    "system_a": p.system_a,
                    "system_b": p.system_b,
                    "samples": list(p.samples),
                    "people_winner": p.winner,
                    "agreement": p.agreement,
                    "judges": p.judges,
                    "flagged": p.flagged,
                    "ruling": p.ruling,
                }
                for p in row.pairs
            ],
        }
        for row in page
    ]
    response = paginator.get_paginated_response(ManagedItemSerializer(items, many=True).data)
    response.data["counts"] = dataclasses.asdict(counts)
    return response
