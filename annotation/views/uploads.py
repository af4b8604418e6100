"""A stopped import's two ways on: resume it where it stopped, or discard it (``annotation/uploads.py``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from annotation import uploads
from annotation.access import access_study
from annotation.errors import ServiceError


@login_required
@require_POST
def upload_resume(request: HttpRequest, study_id: int, upload_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    try:
        uploads.do_resume_upload(study, upload_id)
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "The import goes on where it stopped (progress below).")
    return redirect(study)


@login_required
@require_POST
def upload_discard(request: HttpRequest, study_id: int, upload_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    try:
        uploads.do_discard_upload(study, upload_id)
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "The stopped import was discarded: nothing of the file is in the study.")
    return redirect(study)
