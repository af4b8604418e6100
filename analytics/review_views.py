"""The review queue (pairs where raters disagree with each other or with a judge) and the researcher's rulings."""

from __future__ import annotations

import csv
import io
from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header, url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from analytics import review
from analytics.models import Adjudication
from annotation.access import REVIEW, access_study
from annotation.exchange.rules import csv_safe

PER_PAGE = 20


@login_required
def review_queue(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    show = request.GET.get("show", "open")
    show = show if show in review.SHOW else "open"
    why = request.GET.get("why", "any")
    why = why if why in review.WHY else "any"
    pairs, counts = review.review_queue(study, show, why)
    page = Paginator(pairs, PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "analytics/review.html",
        {
            "study": study,
            "page": page,
            "counts": counts,
            "show": show,
            "why": why,
            "show_choices": review.SHOW,
            "why_choices": review.WHY,
            "why_label": review.WHY[why],
            "back": request.get_full_path(),
        },
    )


@login_required
@require_POST
def adjudicate(request: HttpRequest, study_id: int, pair_id: int) -> HttpResponse:
    study = access_study(request, study_id, REVIEW)
    if request.POST.get("clear"):
        if review.do_clear_adjudication(study, pair_id, request.user):
            messages.success(request, "Ruling withdrawn.")
    else:
        try:
            review.do_adjudicate(
                study, pair_id, request.POST.get("ruling", ""), request.POST.get("note", ""), request.user
            )
        except review.RulingError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, "Ruling saved. The raters' judgments are unchanged.")
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = reverse("review_queue", args=[study.pk])
    return redirect(back)


@login_required
def adjudications_csv(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    rows = Adjudication.objects.filter(study=study).values_list(
        "pair__item__external_id",
        "pair__generation_a__system__name",
        "pair__generation_b__system__name",
        "pair__generation_a__sample_index",
        "pair__generation_b__sample_index",
        "ruling",
        "note",
        "decided_by__username",
        "decided",
    )
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        ["item_id", "system_a", "system_b", "sample_a", "sample_b", "ruling", "note", "decided_by", "decided"]
    )
    writer.writerows(
        [
            csv_safe(v)
            if isinstance(v, str)
            else ("" if v is None else v.isoformat() if hasattr(v, "isoformat") else v)
            for v in row
        ]
        for row in rows
    )
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    # an attachment's header is never None (django-stubs types the function for both cases)
    response["Content-Disposition"] = cast(str, content_disposition_header(True, f"{study.name}-adjudications.csv"))
    return response


class RulingSerializer(serializers.Serializer):
    pair = serializers.IntegerField(min_value=1, help_text="The pair's id (the review queue's, and the judgments').")
    ruling = serializers.ChoiceField(choices=Adjudication.Ruling.choices)
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


@extend_schema(
    request=RulingSerializer,
    responses={200: RulingSerializer},
    description="Rule on a pair of the review queue (a reviewer's, an editor's or the owner's role; a viewer gets "
    "403); ruling again changes the ruling. The raters' judgments are not touched. 400 names the field refused.",
)
@api_view(["POST"])
def rulings_api(request, study_id: int):
    study = access_study(request, study_id, REVIEW)
    given = RulingSerializer(data=request.data)
    given.is_valid(raise_exception=True)
    data = given.validated_data
    try:
        review.do_adjudicate(study, data["pair"], data["ruling"], data["note"], request.user)
    except review.RulingError as exc:
        raise ValidationError({"pair": [str(exc)]}) from None
    return Response({"pair": data["pair"], "ruling": data["ruling"], "note": data["note"].strip()})
