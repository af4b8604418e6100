"""Crowdsourcing: the entry point sites send workers to, and the researcher's external-link page."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from annotation import access, questions
from annotation.crowd import payments, prolific, sites
from annotation.errors import (
    AllocationBusy,
    NetworkHoldsEnough,
    RaterLimitReached,
    RaterScreenedOut,
    ServiceError,
)
from annotation.exchange.judgment_files import COMMENT_MAX_CHARS
from annotation.http import RaterRequest, ResearcherRequest
from annotation.models import Assignment, CrowdPayment, ExternalLink, Rater
from annotation.ratelimit import client_ip
from annotation.rating import allocation, attention, consent, holds, practice
from annotation.studies import enrolment, team
from annotation.views import raters
from annotation.views.forms import GenerateGoldForm, GoldPairForm


def _message(request, study, title: str, message: str, status: int = 200, code: str | None = None):
    return render(
        request,
        "annotation/rater_message.html",
        {"study": study, "title": title, "message": message, "code": code},
        status=status,
    )


@access.frameable
@csrf_exempt  # the consent form posts back here from inside the site's frame: the URL is the authority, never a cookie
@access.rater_page
def external_entry(request: RaterRequest, token: str) -> HttpResponse:
    """Sites open this URL with their worker parameters. A preview stores nothing; an accepted visit
    creates (or resumes) the worker's session and sends them to their assignment."""
    link = access.access_external_link(token)
    study = link.study
    access.speak_to_raters(request, study)
    if not study.accepts_raters:
        return raters.paused_message(request, study)
    try:
        arrival = sites.parse_arrival(link, request.GET)
    except ServiceError as exc:
        return _message(request, study, _("This link is incomplete"), str(exc), status=400)
    if arrival.preview:
        mode = study.elicitation_mode
        # the first pair as a worker will see it, on the sides of a random worker's place
        pairs = allocation.preview_pairs(study, allocation.preview_seed(request.GET.get("seed")))
        return render(
            request,
            "annotation/external_preview.html",
            {
                "study": study,
                "shown": pairs[0] if pairs else None,
                "total": len(pairs),
                "mode": mode,
                "fieldsets": mode.fieldsets(study),
                "further": questions.form(study),
                "disabled": True,
                "key_help": questions.key_help(study),
                "size": allocation.assignment_size(study),
                "run_out": not allocation.open_places(study),
                "skip_reasons": raters.skip_reasons(),
                "comment_max": COMMENT_MAX_CHARS,
            },
        )
    if sites.is_blocked(study, link.platform, arrival.worker_id):
        return _message(request, study, _("Not available"), _("This task is not available to your account."))
    agreed = False
    if consent.required(study) and not sites.worker_consented(link, arrival):
        # Before anything is stored: declining leaves no trace, agreeing is accepting the task.
        choice = request.POST.get("consent") if request.method == "POST" else None
        if choice == consent.DECLINE:
            return raters.declined(request, study, crowd=True)
        if choice != consent.AGREE:
            return render(request, "annotation/consent.html", {"study": study, "action": request.get_full_path()})
        agreed = True
    try:
        session = sites.do_accept(link, arrival, client_ip(request))
    except sites.TooManyNewWorkers as exc:
        response = _message(request, study, _("Too many new workers right now"), str(exc), status=429)
        response["Retry-After"] = "600"
        return response
    except NetworkHoldsEnough as exc:
        response = _message(request, study, _("Please wait a moment"), str(exc), status=429)
        response["Retry-After"] = "60"
        return response
    except RaterScreenedOut as exc:
        return _message(request, study, _("Thank you"), str(exc), code=link.screened_code)
    except sites.SessionOfAnotherWorker as exc:
        return _message(request, study, _("Not your task"), str(exc), status=403)
    except (RaterLimitReached, sites.OtherSessionActive, AllocationBusy) as exc:
        return _message(request, study, _("No more work here"), str(exc))
    except ServiceError as exc:  # e.g. a Prolific link opened from another Prolific study
        return _message(request, study, _("This link does not fit"), str(exc), status=400)
    if agreed:
        consent.do_record_consent(session.rater)
    if session.assignment is None and practice.due(session.rater):
        # the practice round first; its last page comes back here, and the worker's work starts then
        return redirect(raters.practice_url(session.rater.token(), request.get_full_path()))
    if session.assignment is None:
        return _message(
            request,
            study,
            _("Nothing left to rate"),
            _("Every item of this study has all the raters it needs. Please return the task."),
        )
    return redirect("rate", token=session.rater.token(), assignment_id=session.assignment_id)


@login_required
def external_links(request: ResearcherRequest, study_id: int) -> HttpResponse:
    study = access.access_study(request, study_id)
    if request.method == "POST":
        try:
            sites.do_create_external_link(
                study, request.POST.get("platform", ""), request.POST.get("site_study_id", "")
            )
            messages.success(request, "Link created.")
        except ServiceError as exc:
            messages.error(request, str(exc))
        return redirect("external_links", study_id=study.pk)
    base = enrolment.public_base_url(study, request)
    minted = sites.minting_warnings(study)
    links = []
    # a crowd link lets whoever holds it rate: shown to those who may change the study only
    may_change = access.CHANGE in request.study_may
    for link in study.external_links.all():
        url = sites.link_url(link, base) if may_change else None
        xml, xml_error = None, None
        if link.platform == ExternalLink.Platform.MTURK and url is not None:
            try:
                xml = sites.external_question_xml(url)
            except ServiceError as exc:
                xml_error = str(exc)
        links.append(
            {
                "link": link,
                "url": url,
                "xml": xml,
                "xml_error": xml_error,
                "sessions": link.sessions.count(),
                "minted": minted.get(link.pk),
                "refused": sites.launch_refusals(link),
                "unanswered": holds.unanswered(link),
            }
        )
    workers = list(
        Rater.objects.filter(study=study, source=Rater.Source.EXTERNAL)
        .annotate(
            done=Count("assignments", filter=Q(assignments__status=Assignment.Status.COMPLETED), distinct=True),
            gold=Count("gold_answers", distinct=True),
            gold_right=Count("gold_answers", filter=Q(gold_answers__correct=True), distinct=True),
        )
        .annotate(**practice.counts())  # apart, so the type checker sees the named ones (the same SQL)
        .order_by("id")
    )
    for w in workers:  # flagged: below the study's accuracy bar, before enough gold answers to screen out
        w.flagged = not w.screened_out and study.crowd_settings.below_gold_bar(w.gold_right, w.gold)
    blocked = access.blocked_workers_for(study.owner)
    payable = list(payments.payable_sessions(study).prefetch_related("payments")[:PAYABLE_SHOWN])
    for session in payable:  # each form queues its action once, however often it is sent
        session.form_token = payments.new_token()
    return render(
        request,
        "annotation/external_links.html",
        {
            "before_first_pair": practice.before_first_pair(study),
            "open_places": allocation.open_places(study),
            "gold_form": GoldPairForm(),
            "generate_form": GenerateGoldForm(),
            "n_gold": study.gold_pairs.count(),
            "study": study,
            "links": links,
            "unanswered_cap": settings.SEPLAB_CROWD_UNANSWERED_PER_LINK,
            "platforms": ExternalLink.Platform.choices,
            "workers": workers,
            "blocked": blocked,
            "blocked_ids": {(b.platform, b.worker_id) for b in blocked},
            "payable": payable,
            "ledger": study.crowd_payments.select_related("session__link", "by")[:LEDGER_SHOWN],
            "money": payments.totals(study),
            "payment_kinds": CrowdPayment.Kind.choices,
            "rejection_categories": prolific.REJECTION_CATEGORIES,
            "pay_job": study.jobs.filter(kind=payments.KIND).first(),
        },
    )


PAYABLE_SHOWN = LEDGER_SHOWN = 500


@login_required
@require_POST
def pay_worker(request: ResearcherRequest, study_id: int) -> HttpResponse:
    """Approve, reject, bonus or block one worker's submission: checked and queued here, sent by the worker."""
    study, session = access.access_worker_session(request, study_id, request.POST.get("session", ""))
    try:
        payment = payments.do_queue(
            study,
            session,
            request.POST.get("kind", ""),
            request.POST.get("amount", ""),
            request.POST.get("reason", ""),
            request.POST.get("category", ""),
            request.user,
            request.POST.get("token") or None,
        )
    except ServiceError as exc:  # refused by field (FieldErrors), or the researcher's jobs at their limit
        messages.error(request, f"Not queued, {session.worker_id}: {exc}")
    else:
        money = f" ({payment.amount})" if payment.amount is not None else ""
        messages.success(
            request,
            f"{payment.get_kind_display()}{money} for {session.worker_id} is queued; the worker sends it to "
            f"{session.link.get_platform_display()} and the ledger below shows the outcome.",
        )
    return redirect(reverse("external_links", args=[study.pk]) + "#pay")


@login_required
@require_POST
def external_link_action(request: ResearcherRequest, study_id: int, link_id: int, action: str) -> HttpResponse:
    """Disable, enable or rotate a crowd link (disabling and rotating stop its workers at once), or set its launch
    limit."""
    study, link = access.access_study_external_link(request, study_id, link_id)
    done = {"disable": "disabled", "enable": "enabled", "rotate": "gave a new URL to"}
    if action in done:
        team.do_audit(study, request.user, f"crowd_link_{action}", f"{done[action]} the {link.platform} link")
    if action in ("disable", "enable"):
        stopped = enrolment.do_set_external_link(link, action == "enable")
        messages.success(
            request,
            "Link enabled."
            if action == "enable"
            else f"Link disabled; {stopped} worker(s) who came through it can no longer rate.",
        )
    elif action == "launch-limit":
        try:
            sites.do_set_launch_limit(link, request.POST.get("launch_per_minute", ""))
        except ServiceError as exc:
            messages.error(request, str(exc))
        else:
            limit = link.launch_limit
            team.do_audit(study, request.user, "crowd_link_limit", f"set the {link.platform} link's launch limit")
            messages.success(
                request,
                f"The link now accepts {limit} new workers a minute."
                if limit
                else "The link now accepts new workers without a limit.",
            )
    elif action == "rotate":
        stopped = enrolment.do_rotate_external_link(link)
        messages.success(
            request,
            f"New URL made: paste it on the site again. The old one, and the pages of "
            f"{stopped} worker(s) who came through it, stopped working.",
        )
    else:
        raise Http404("No such action.")
    return redirect("external_links", study_id=study.pk)


@login_required
@require_POST
def gold_pairs(request: HttpRequest, study_id: int) -> HttpResponse:
    """Add an attention check by hand, or generate some from the study's outputs."""
    study = access.access_study(request, study_id)
    if "generate" in request.POST:
        form = GenerateGoldForm(request.POST)
        if form.is_valid():
            made = attention.do_generate_gold(study, form.cleaned_data["count"])
            messages.success(request, f"Added {len(made)} attention checks made from the study's outputs.")
        else:
            messages.error(request, "Give how many attention checks to generate (1 to 100).")
    else:
        pair_form = GoldPairForm(request.POST)
        if pair_form.is_valid():
            attention.do_add_gold_pair(study, **pair_form.cleaned_data)
            messages.success(request, "Attention check added.")
        else:
            messages.error(request, "An attention check needs an input, a good output and a bad output.")
    return redirect("external_links", study_id=study.pk)


@login_required
@require_POST
def block_worker(request: ResearcherRequest, study_id: int) -> HttpResponse:
    study = access.access_study(request, study_id)
    try:
        blocked = sites.do_block_worker(
            study.owner,
            request.POST.get("platform", ""),
            request.POST.get("worker_id", ""),
            request.POST.get("reason", ""),
        )
        team.do_audit(
            study,
            request.user,
            "worker_blocked",
            f"blocked {blocked.platform} worker {blocked.worker_id}",
            {"platform": blocked.platform, "worker_id": blocked.worker_id, "reason": blocked.reason},
        )
        messages.success(request, f"{blocked.worker_id} gets no more work in the studies of {study.owner.username}.")
    except ServiceError as exc:
        messages.error(request, str(exc))
    return redirect("external_links", study_id=study.pk)


@login_required
@require_POST
def unblock_worker(request: ResearcherRequest, study_id: int, block_id: int) -> HttpResponse:
    study, blocked = access.access_blocked_worker(request, study_id, block_id)
    sites.do_unblock_worker(blocked)
    team.do_audit(
        study,
        request.user,
        "worker_unblocked",
        f"let {blocked.platform} worker {blocked.worker_id} back in",
        {"platform": blocked.platform, "worker_id": blocked.worker_id},
    )
    return redirect("external_links", study_id=study.pk)
