"""The study's Team page: its members in their roles (the owner adds, changes and removes them) and the audit trail
of who changed what. Anyone on the team reads it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotation import access
from annotation.errors import FieldErrors
from annotation.http import ResearcherRequest
from annotation.models import Role
from annotation.studies import team

AUDIT_PER_PAGE = 50


@login_required
def team_page(request: ResearcherRequest, study_id: int) -> HttpResponse:
    study = access.access_study(request, study_id, access.VIEW)
    errors: dict[str, list[str]] = {}
    entered = {"username": "", "role": Role.VIEWER.value}
    if request.method == "POST":  # add a member
        access.check_may(request.user, study, access.MANAGE)
        entered = {"username": request.POST.get("username", ""), "role": request.POST.get("role", "")}
        try:
            membership = team.do_add_member(study, entered["username"], entered["role"], request.user)
        except FieldErrors as exc:
            errors = exc.errors
        else:
            messages.success(request, f"{membership.user.username} is now a {membership.role} of this study.")
            return redirect("team", study_id=study.pk)
    trail = Paginator(study.audit_entries.all(), AUDIT_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "annotation/team.html",
        {
            "study": study,
            "owner": study.owner,
            "members": study.memberships.select_related("user"),
            "roles": Role.choices,
            "may_manage": access.MANAGE in request.study_may,
            "errors": errors,
            "entered": entered,
            "trail": trail,
        },
        status=400 if errors else 200,
    )


@login_required
@require_POST
def member_change(request: ResearcherRequest, study_id: int, member_id: int) -> HttpResponse:
    """Change a member's role, or remove them (``remove``)."""
    study, membership = access.access_member(request, study_id, member_id)
    if request.POST.get("remove"):
        team.do_remove_member(membership, request.user)
        messages.success(request, f"{membership.user.username} is no longer on this study's team.")
    else:
        try:
            team.do_set_role(membership, request.POST.get("role", ""), request.user)
        except FieldErrors as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"{membership.user.username} is now a {membership.role} of this study.")
    return redirect("team", study_id=study.pk)
