"""Researcher pages: thin views that check access, validate a form, call one service, render."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_POST

from annotation import access, elicitation, extensions, questions
from annotation.access import access_study, studies_for
from annotation.errors import ServiceError
from annotation.exchange import exports
from annotation.exchange.judgment_files import COMMENT_MAX_CHARS
from annotation.exchange.rules import FormatError, check_size
from annotation.generating import runner
from annotation.http import ResearcherRequest
from annotation.models import Arena, Battle, Generation, Item, Job, Judgment, Rater, Skip, Study, SystemEndpoint
from annotation.rating import allocation, imports, rankings
from annotation.studies import creation, enrolment, lifecycle, monitoring, team
from annotation.views import raters
from annotation.views.forms import (
    BulkLinksForm,
    DeleteForm,
    DuplicateForm,
    RaterLinkForm,
    StudyCreateForm,
    StudySettingsForm,
    UploadForm,
)


def home(request: HttpRequest) -> HttpResponse:
    return redirect("study_list" if request.user.is_authenticated else "login")


@login_required
def study_list(request: ResearcherRequest) -> HttpResponse:
    """The researcher's studies with their items, human judgments and judge verdicts counted as the study page counts
    them (an answer the rater changed, once), in one query whatever their size."""
    archived = request.GET.get("archived") == "1"
    counted = Judgment.objects.filter(revised=False)
    studies = (
        studies_for(request.user)
        .filter(
            status__in=[Study.Status.ARCHIVED]
            if archived
            else [Study.Status.ACTIVE, Study.Status.PAUSED, Study.Status.IMPORTING]
        )
        .annotate(
            n_items=Study.count_per_study(Item.objects.all()),
            n_human=Study.count_per_study(counted.filter(rater__kind=Rater.Kind.HUMAN)),
            n_judge=Study.count_per_study(counted.filter(rater__kind=Rater.Kind.JUDGE)),
        )
    )
    n_archived = 0 if archived else studies_for(request.user).filter(status=Study.Status.ARCHIVED).count()
    return render(
        request, "annotation/study_list.html", {"studies": studies, "archived": archived, "n_archived": n_archived}
    )


@login_required
def study_create(request: ResearcherRequest) -> HttpResponse:
    form = StudyCreateForm(request.POST or None, request.FILES or None)
    problems: list[str] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            check_size(upload.size, settings.SEPLAB_MAX_IMPORT_BYTES)
            study, job = creation.do_start_study_import(
                request.user, form.cleaned_data["name"], upload.read(), upload.name, form.cleaned_data["description"]
            )
        except FormatError as exc:
            problems = exc.messages()
        except ServiceError as exc:  # as many imports queued as one researcher may have (jobs.JobLimit)
            problems = [str(exc)]
        else:
            if job is None:
                messages.success(request, f"Imported {study.items.count()} items.")
            else:
                messages.success(request, "The file is valid; its items are being imported in the background.")
            warnings = study.import_warnings
            if warnings:
                shown = "; ".join(str(w) for w in warnings[:10])
                more = f" and {len(warnings) - 10} more" if len(warnings) > 10 else ""
                messages.warning(
                    request,
                    f"{len(warnings)} empty output{'s' if len(warnings) != 1 else ''} imported "
                    f"(raters see “(empty output)”; the system loses those comparisons): "
                    f"{shown}{more}.",
                )
            return redirect(study)
    status = 400 if problems else 200
    return render(request, "annotation/study_create.html", {"form": form, "problems": problems}, status=status)


def _import_jobs(study: Study) -> dict[str, Job | None]:
    """The latest judgments import and rankings import of the study (``judgments_job``, ``rankings_job``), one
    query."""
    latest: dict[str, Job | None] = {"judgments_job": None, "rankings_job": None}
    for job in study.jobs.filter(kind__in=("judgments", "rankings")):  # newest first (Job.Meta.ordering)
        if latest[f"{job.kind}_job"] is None:
            latest[f"{job.kind}_job"] = job
    return latest


@login_required
def study_detail(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    if study.status == Study.Status.IMPORTING:  # nothing to show or manage until the import is published
        return render(
            request,
            "annotation/study_importing.html",
            {"study": study, "job": study.jobs.filter(kind="import").first()},
        )
    arena = study.is_arena  # an arena's page: its battles and systems first, no plan, assignment size or selection
    context = {
        "study": study,
        "systems": study.systems.all(),
        "n_items": study.items.count(),
        "n_generations": Generation.objects.filter(item__study=study).count(),
        "progress": None if arena else monitoring.study_progress(study),
        "raters": monitoring.rater_progress(study),
        "fast_seconds": monitoring.FAST_SECONDS,
        "size": None if arena else allocation.assignment_size(study),
        "arena": _arena_summary(study) if arena else None,
        "n_judgments": study.judgments.filter(revised=False).aggregate(
            human=Count("id", filter=Q(rater__kind="human")), judge=Count("id", filter=Q(rater__kind="judge"))
        ),
        "rater_form": RaterLinkForm(),
        "upload_form": UploadForm(),
        "embed_job": study.jobs.filter(kind="embed").first(),
        "plan_job": study.jobs.filter(kind="plan").first(),
        **_import_jobs(study),
        "n_rankings": study.rankings.count(),
        "base_url": enrolment.public_base_url(study, request),
        **extensions.page_context("study", study),
    }
    return render(request, "annotation/study_detail.html", context)


def _arena_summary(study: Study) -> dict:
    """An arena's study page: its battles by what became of them, its systems with their endpoints' request budget
    used (the replies shown and the background samples alike), whether its settings row exists."""
    battles = Battle.objects.filter(study=study).aggregate(
        started=Count("id"),
        checks=Count("id", filter=Q(gold__isnull=False)),
        voted=Count("id", filter=Q(status=Battle.Status.VOTED)),
        failed=Count("id", filter=Q(status=Battle.Status.FAILED)),
        refused=Count("id", filter=Q(status=Battle.Status.REFUSED)),
        flagged=Count("id", filter=~Q(flag="") & ~Q(status=Battle.Status.REFUSED)),
    )
    battles["prompts"] = battles["started"] - battles["checks"]  # an attention check's message is not a prompt
    systems = []
    for system in study.systems.select_related("endpoint").order_by("id"):
        endpoint: SystemEndpoint | None = getattr(system, "endpoint", None)
        used = None if endpoint is None else runner.GenerationRun(endpoint).usage().replies
        systems.append({"system": system, "endpoint": endpoint, "used": used})
    return {
        "settings": Arena.objects.filter(study=study).first(),
        "battles": battles,
        "systems": systems,
    }


@login_required
def study_preview(request: HttpRequest, study_id: int) -> HttpResponse:
    """The real rating page on a whole assignment of the plan, for its researcher, on random sides (``seed``):
    answers are read and checked by the study's elicitation mode, nothing is stored (a GET per pair; ``n`` is
    how many were answered); the comment box and Skip are shown, inactive. In the raters' language, as they see
    it (``speak_to_raters``; the researcher's pages stay in theirs)."""
    study = access_study(request, study_id)
    with translation.override(access.raters_language(request, study)):
        return _preview(request, study)


def _preview(request: HttpRequest, study) -> HttpResponse:
    seed = allocation.preview_seed(request.GET.get("seed"))  # kept from pair to pair: the sides stay put
    pairs = allocation.preview_pairs(study, seed)
    if not pairs:
        messages.error(request, "There is nothing to preview yet: the plan has no tasks.")
        return redirect(study)
    context = {
        "study": study,
        "preview": True,
        "submit_url": reverse("study_preview", args=[study.pk]),
        "total": len(pairs),
        "seed": seed,
        "skip_reasons": Skip.Reason.choices,
        "comment_max": COMMENT_MAX_CHARS,
    }
    try:
        done = max(0, int(request.GET.get("n", 0)))
    except ValueError:
        done = 0
    mode = study.elicitation_mode

    def screen_of(index: int) -> rankings.Screen:  # a ranking study's screen of the preview's place ``index``
        return rankings.screen(study, f"preview-{seed}-{index}", pairs[index]["item_id"])

    if done and "n" in request.GET and done <= len(pairs):
        try:  # the answer to pair ``done`` (1-based), checked as a submit would be
            if study.ranks:
                rankings.read_answer(screen_of(done - 1), request.GET)
            else:
                mode.validate(study, mode.read(request.GET))
                questions.to_model(study, questions.read(study, request.GET), True)
        except elicitation.AnswerError as exc:
            context["error"] = str(exc)
            done -= 1
    if done >= len(pairs):
        return render(request, "annotation/rate.html", {**context, "preview_done": True})
    shown = pairs[done]
    context.update(
        shown=shown,
        number=done + 1,
        done=done,
        percent=round(100 * done / len(pairs)),
        mode=mode,
        **questions.page(study, request.GET if "error" in context else None),  # a refused answer, shown again
        current=None,
    )
    if study.ranks:
        screen = screen_of(done)
        given = request.GET if "error" in context else None
        context.update(
            screen=screen, ranking_rows=raters.ranking_rows(screen, given), places=range(1, len(screen.outputs) + 1)
        )
    return render(request, "annotation/rate.html", context)


@login_required
def item_detail(request: HttpRequest, study_id: int, item_id: int) -> HttpResponse:
    study, item = access.access_item(request, study_id, item_id)
    generations = item.generations.select_related("system").order_by("system_id", "sample_index")
    return render(
        request,
        "annotation/item_detail.html",
        {
            "study": study,
            "item": item,
            "generations": generations,
            "back": request.get_full_path(),
            **extensions.page_context("item", item),
        },
    )


@login_required
def study_settings(request: ResearcherRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    started = study.has_started()
    form = StudySettingsForm(request.POST or None, instance=study, frozen=started)
    if request.method == "POST" and form.is_valid():
        changes = {f: form.cleaned_data[f] for f in form.setting_names()}
        study.refresh_from_db()  # the ModelForm already wrote the values onto the instance
        try:
            lifecycle.do_update_settings(study, changes, form.explicit(), background=True, by=request.user)
        except ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            building = study.jobs.filter(kind="plan", status__in=("queued", "running")).exists()
            messages.success(
                request,
                "Settings saved."
                + (
                    " The plan is being built in the background (the outputs are embedded first); this page shows its "
                    "progress."
                    if building
                    else ""
                ),
            )
            return redirect(study)
    return render(
        request,
        "annotation/study_settings.html",
        {
            "study": study,
            "form": form,
            "started": started,
            "groups": form.groups(),
            **extensions.page_context(
                "settings", study
            ),  # what the stored settings become, as selection and the report
        },
    )


@login_required
@require_POST
def rater_create(request: HttpRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    form = RaterLinkForm(request.POST)
    if form.is_valid():
        try:
            rater = enrolment.do_create_rater_link(study, form.cleaned_data["name"])
        except ServiceError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Personal link for {rater.external_id} created.")
    else:
        messages.error(request, "Give the rater a name.")
    return redirect(study)


@login_required
@require_POST
def open_link_toggle(request: ResearcherRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    enabled = request.POST.get("enabled") == "1"
    stopped = enrolment.do_set_open_link(study, enabled)
    team.do_audit(study, request.user, "open_link", f"{'opened' if enabled else 'closed'} the open link")
    messages.success(
        request,
        "The open link is open."
        if enabled
        else f"The open link is closed; {stopped} rater{'s' if stopped != 1 else ''} who joined through it "
        "can no longer rate.",
    )
    return redirect(study)


@login_required
@require_POST
def open_link_rotate(request: ResearcherRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    stopped = enrolment.do_rotate_open_link(study)
    team.do_audit(study, request.user, "open_link_rotate", "gave the open link a new URL")
    messages.success(
        request,
        f"New open link made; the old one and the pages of the {stopped} rater(s) who joined "
        "through it stopped working.",
    )
    return redirect(study)


@login_required
@require_POST
def rater_link(request: ResearcherRequest, study_id: int, rater_id: int, action: str) -> HttpResponse:
    """Rotate (a new link, the old one stops) or revoke (no link) one rater's personal link."""
    study, rater = access.access_study_rater(request, study_id, rater_id)
    if action == "rotate":
        enrolment.do_rotate_rater_link(rater)
        team.do_audit(study, request.user, "rater_rotated", f"gave {rater.external_id} a new link", {"rater": rater.pk})
        messages.success(request, f"New link for {rater.external_id}; the old one no longer works.")
    elif action == "revoke":
        enrolment.do_revoke_rater_link(rater)
        team.do_audit(study, request.user, "rater_revoked", f"revoked {rater.external_id}'s link", {"rater": rater.pk})
        messages.success(request, f"{rater.external_id}'s link is revoked; their judgments are kept.")
    else:
        raise Http404("No such action.")
    return redirect(reverse("study_detail", args=[study.pk]) + "#raters")


@login_required
def rater_links_bulk(request: HttpRequest, study_id: int) -> HttpResponse:
    """Personal links for a list of names, all or none, downloaded as a CSV of name and link."""
    study = access_study(request, study_id)
    form = BulkLinksForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            raters = enrolment.do_bulk_create_rater_links(study, enrolment.parse_names(form.cleaned_data["names"]))
        except ServiceError as exc:
            form.add_error("names", str(exc))
        else:
            response = HttpResponse(
                enrolment.links_csv(raters, enrolment.public_base_url(study, request)),
                content_type="text/csv; charset=utf-8",
            )
            disposition = content_disposition_header(True, f"{study.name}-rater-links.csv")
            # a str whenever as_attachment is True: the stub has one signature, returning str | None
            response["Content-Disposition"] = disposition  # type: ignore[assignment]
            return response
    return render(
        request, "annotation/rater_links_bulk.html", {"study": study, "form": form}, status=400 if form.errors else 200
    )


@login_required
@require_POST
def study_status(request: ResearcherRequest, study_id: int) -> HttpResponse:
    study = access_study(request, study_id)
    try:
        lifecycle.do_set_status(study, request.POST.get("status", ""))
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        team.do_audit(study, request.user, "status", f"set the study {study.status}", {"status": study.status})
        messages.success(
            request,
            {
                "active": "Rating resumed.",
                "paused": "Rating is paused: raters see a notice and get no more pairs until you resume.",
                "archived": "Study archived: raters get no more pairs and the study list "
                "hides it (show archived studies to find it).",
            }[study.status],
        )
    return redirect(study)


@login_required
def study_delete(request: HttpRequest, study_id: int) -> HttpResponse:
    """Confirm, with the exports offered first; then delete the study and everything in it (its owner only)."""
    study = access_study(request, study_id, access.MANAGE)
    form = DeleteForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            lifecycle.do_delete_study(study, form.cleaned_data["confirm"])
        except ServiceError as exc:
            form.add_error("confirm", str(exc))
        else:
            messages.success(request, f"Study {study.name} deleted.")
            return redirect("study_list")
    counts = study.judgments.aggregate(n=Count("id"))["n"], study.raters.count(), study.items.count()
    return render(
        request,
        "annotation/study_delete.html",
        {"study": study, "form": form, "counts": counts},
        status=400 if form.errors else 200,
    )


@login_required
def study_duplicate(request: ResearcherRequest, study_id: int) -> HttpResponse:
    """A copy of one's own (any member may: it changes nothing in this study)."""
    study = access_study(request, study_id, access.VIEW)
    form = DuplicateForm(request.POST or None, initial={"name": f"{study.name} (copy)"})
    if request.method == "POST" and form.is_valid():
        try:
            copy = lifecycle.do_duplicate_study(study, form.cleaned_data["name"], owner=request.user)
        except FormatError as exc:  # the name is empty or taken (creation.check_study_name)
            for problem in exc.problems:
                form.add_error("name", problem.message)
        except ServiceError as exc:  # the copy's plan cannot be built (e.g. no judge verdicts to select by)
            form.add_error(None, str(exc))
        else:
            messages.success(
                request, f"{copy.name}: the items, outputs and settings of {study.name}, no raters or judgments yet."
            )
            return redirect(copy)
    return render(
        request, "annotation/study_duplicate.html", {"study": study, "form": form}, status=400 if form.errors else 200
    )


@login_required
@require_POST
def judgments_import(request: ResearcherRequest, study_id: int) -> HttpResponse:
    return _import_file(request, access_study(request, study_id), imports.do_start_judgment_import, "judgments")


@login_required
@require_POST
def rankings_import(request: ResearcherRequest, study_id: int) -> HttpResponse:
    return _import_file(request, access_study(request, study_id), rankings.do_start_rankings_import, "rankings")


def _import_file(request: ResearcherRequest, study: Study, start, records: str) -> HttpResponse:
    """A judgments or rankings file from the study page: checked whole (every problem listed, nothing saved), then
    imported at once or by the worker (``uploads.do_import_or_stage``)."""
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, f"Choose a {records} file to import.")
        return redirect(study)
    upload = form.cleaned_data["file"]
    try:
        check_size(upload.size, settings.SEPLAB_MAX_IMPORT_BYTES)
        summary, job = start(study, upload.read(), upload.name)
    except FormatError as exc:
        context = {"study": study, "problems": exc.messages(), "records": records}
        return render(request, "annotation/import_problems.html", context, status=400)
    except ServiceError as exc:  # as many imports queued as one researcher may have (jobs.JobLimit)
        context = {"study": study, "problems": [str(exc)], "records": records}
        return render(request, "annotation/import_problems.html", context, status=429)
    if job is not None:
        messages.success(
            request,
            f"The file was checked: its {job.total:,} {records} are being imported in the background (progress below).",
        )
        said = f"started importing {job.total:,} {records} from {upload.name}"
    else:  # imported at once (a file gives a summary or a job, never neither)
        messages.success(request, f"Imported {summary.created} {records} ({summary.skipped} already present).")
        said = f"imported {summary.created:,} {records} from {upload.name}"
    team.do_audit(study, request.user, f"{records}_import", said)
    return redirect(study)


@login_required
def judgments_export(request: HttpRequest, study_id: int, fmt: str) -> StreamingHttpResponse:
    study = access_study(request, study_id)
    if fmt not in ("jsonl", "csv"):
        raise Http404("Export formats are jsonl and csv.")
    return exports.export_response(study, fmt)


@login_required
def rankings_export(request: HttpRequest, study_id: int) -> StreamingHttpResponse:
    return exports.rankings_response(access_study(request, study_id))


@login_required
def api_token(request: ResearcherRequest) -> HttpResponse:
    if request.method == "POST":
        enrolment.do_rotate_api_token(request.user)
        messages.success(request, "A new API token was created; the old one no longer works.")
        return redirect("api_token")
    token = access.api_token_for(request.user)
    return render(request, "annotation/api_token.html", {"token": token})
