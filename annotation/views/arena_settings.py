"""An arena's own settings page (docs/arena.md#arena-settings): its researcher changes K, the turns, the vote limits,
the attention checks, the starter prompts and the categories -- the ``Arena`` row, through
``annotation/arena/setup.py``'s ``do_update_arena`` (which keeps each system's samples at K + 1)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render

from annotation.access import access_study
from annotation.arena import setup
from annotation.errors import ServiceError
from annotation.http import ResearcherRequest
from annotation.models import Arena
from annotation.studies import team
from annotation.views.forms import ArenaSettingsForm


@login_required
def arena_settings(request: ResearcherRequest, study_id: int) -> HttpResponse:
    """GET: the form with the arena's settings; POST: all of them stored, or none (the form again, each problem
    beside its field, status 400)."""
    study = access_study(request, study_id)
    arena = Arena.objects.filter(study=study).first()
    if arena is None:
        raise Http404("This study is not an arena.")
    form = ArenaSettingsForm(request.POST or None, instance=arena)
    if request.method == "POST" and form.is_valid():
        changes = form.changes()
        before = Arena.objects.filter(pk=arena.pk).values(*changes).get()  # the form wrote its values on ``arena``
        try:
            setup.do_update_arena(study, **changes)
        except ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            differ = {f: [str(before[f]), str(changes[f])] for f in changes if before[f] != changes[f]}
            if differ:
                team.do_audit(study, request.user, "arena_settings", "changed " + ", ".join(differ), differ)
            messages.success(request, "Arena settings saved.")
            return redirect(study)
    return render(
        request,
        "annotation/arena_settings.html",
        {"study": study, "form": form},
        status=400 if form.errors else 200,
    )
