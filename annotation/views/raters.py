"""Rater pages. Raters have no account: a signed personal link identifies them, an open link makes
an anonymous rater for the visiting browser. One URL serves the full page and the htmx fragment."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any
from urllib.parse import urlencode

from django.db import InterfaceError, OperationalError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation import access, elicitation, orientation, questions
from annotation.compiled import CompiledQuery, model_columns
from annotation.crowd import sites
from annotation.elicitation import AnswerError
from annotation.errors import AllocationBusy, NetworkHoldsEnough, RaterLimitReached, RaterScreenedOut, ServiceError
from annotation.exchange.judgment_files import COMMENT_MAX_CHARS
from annotation.http import RaterRequest
from annotation.models import Assignment, AssignmentPair, Judgment, Rater, Skip
from annotation.ratelimit import client_ip, client_key, refuse_posts
from annotation.rating import allocation, consent, practice, rankings, recording
from annotation.studies import enrolment
from annotation.text import whole_number
from annotation.views.forms import PracticeForm, RatingForm


@access.frameable
@access.rater_page
def rater_home(request: RaterRequest, token: str) -> HttpResponse:
    rater = access.access_rater(token)
    if rater.study.is_arena:  # an arena has no assignments to start: its prompt box
        return redirect("arena_home", token=token)
    access.speak_to_raters(request, rater.study)
    active = rater.assignments.filter(status=Assignment.Status.ACTIVE).first()
    completed = rater.assignments.filter(status=Assignment.Status.COMPLETED).count()
    study = rater.study
    return render(
        request,
        "annotation/rater_home.html",
        {
            "rater": rater,
            "study": study,
            "token": token,
            "active": active,
            "completed": completed,
            "key_help": questions.key_help(study),
            "size": allocation.assignment_size(study),
        },
    )


@access.frameable
@csrf_exempt  # authority is the signed rater token in the URL, never a cookie (iframes block third-party cookies)
@require_POST
@access.rater_page
def rater_start(request: RaterRequest, token: str) -> HttpResponse:
    rater = access.access_rater(token)
    access.speak_to_raters(request, rater.study)
    return _start(request, rater, token)


def paused_message(request: RaterRequest, study) -> HttpResponse:
    """What a rater sees while the researcher has paused (or archived) the study, or it is still importing."""
    if study.status == study.Status.IMPORTING:
        return render(
            request,
            "annotation/rater_message.html",
            {
                "study": study,
                "title": _("Not open yet"),
                "message": _("This study is still being set up; please come back later through the same link."),
            },
            status=503,
        )
    return render(
        request,
        "annotation/rater_message.html",
        {
            "study": study,
            "title": _("Rating is paused"),
            "message": _(
                "The researcher has paused this study. Your answers so far are saved; please come back later "
                "through the same link."
            ),
        },
        status=503,
    )


def _start(request: RaterRequest, rater: Rater, token: str) -> HttpResponse:
    """The rater's next assignment (their first pair), or a page that says why there is none; first the consent
    step and the practice round when the study has them and the rater has not done them."""
    if not rater.study.accepts_raters:
        return paused_message(request, rater.study)
    if consent.needed(rater):
        return redirect("rater_consent", token=token)
    if practice.due(rater):
        return redirect("rater_practice", token=token)
    if rater.study.is_arena:  # a battle starts from the rater's own prompt
        return redirect("arena_home", token=token)
    try:
        assignment = allocation.do_start_assignment(rater)
    except AllocationBusy as exc:
        return render(
            request,
            "annotation/rater_message.html",
            {"study": rater.study, "title": _("Busy"), "message": str(exc)},
            status=503,
        )
    except (RaterScreenedOut, RaterLimitReached) as exc:
        return render(
            request,
            "annotation/rater_message.html",
            {"study": rater.study, "title": _("No more work for you here"), "message": str(exc)},
        )
    except NetworkHoldsEnough as exc:
        response = render(
            request,
            "annotation/rater_message.html",
            {"study": rater.study, "title": _("Please wait a moment"), "message": str(exc)},
            status=429,
        )
        response["Retry-After"] = "60"
        return response
    if assignment is None:
        return render(
            request,
            "annotation/rater_message.html",
            {
                "study": rater.study,
                "title": _("Nothing left to rate"),
                "message": _("There are no more pairs for you in this study. Thank you for your help!"),
            },
        )
    return redirect("rate", token=token, assignment_id=assignment.pk)


@access.rater_page
def open_link(request: RaterRequest, token: str) -> HttpResponse:
    study = access.access_open_link(token)
    access.speak_to_raters(request, study)
    refused = refuse_posts(request, "open-link", 30, 3600, study)  # each POST creates an anonymous rater
    if refused is not None:
        return refused
    if not study.accepts_raters:
        return paused_message(request, study)
    rater = access.open_link_rater(request, study)
    if rater is not None:
        return redirect("rater_home", token=rater.token())
    asks_consent = consent.required(study)
    if asks_consent:  # agreeing is joining: a visitor who declines leaves nothing behind
        choice = request.POST.get("consent") if request.method == "POST" else None
        if choice == consent.DECLINE:
            return declined(request, study)
        if choice != consent.AGREE:
            return render(request, "annotation/consent.html", {"study": study, "action": request.path})
    if request.method == "POST":  # joining (or the consent page) has shown the instructions: to the first pair
        rater = enrolment.do_join_open_link(study, client_key(client_ip(request)))
        access.remember_open_link_rater(request, rater)
        if asks_consent:
            consent.do_record_consent(rater)
        return _start(request, rater, rater.token())
    return render(request, "annotation/open_link.html", {"study": study})


def declined(request: RaterRequest, study, crowd: bool = False, known: bool = False) -> HttpResponse:
    """The page after "I do not agree". ``known``: the rater existed before (their own link, or consent added while
    they were rating): what they answered before stays, so the page does not say nothing was stored."""
    message = (
        _("You did not agree, so you will not rate anything.")
        if known
        else _("You did not agree, so you will not rate anything and nothing about you was stored.")
    )
    message += " " + (
        _("Please return the task on the site that sent you, so that someone else can take it.")
        if crowd
        else _("You can close this page.")
    )
    return render(
        request,
        "annotation/rater_message.html",
        {"study": study, "title": _("Thank you for considering this study"), "message": message},
    )


@access.frameable
@csrf_exempt  # see rater_start
@access.rater_page
def rater_consent(request: RaterRequest, token: str) -> HttpResponse:
    """The study's consent text and its two answers, before the rater's first pair."""
    rater = access.access_rater(token)
    access.speak_to_raters(request, rater.study)
    if not consent.needed(rater):
        return redirect("rater_home", token=token)
    choice = request.POST.get("consent") if request.method == "POST" else None
    if choice == consent.DECLINE:
        return declined(request, rater.study, crowd=rater.source == Rater.Source.EXTERNAL, known=True)
    if choice == consent.AGREE:
        consent.do_record_consent(rater)
        return _start(request, rater, token)
    return render(request, "annotation/consent.html", {"study": rater.study, "action": request.path})


@access.frameable
@csrf_exempt  # see rater_start
@access.rater_page
def rater_practice(request: RaterRequest, token: str) -> HttpResponse:
    """The practice round: a practice pair (GET), its answer (POST), then the feedback on it (GET ?feedback=)."""
    rater = access.access_rater(token)
    access.speak_to_raters(request, rater.study)
    if not rater.study.accepts_raters:
        return paused_message(request, rater.study)
    if consent.needed(rater):
        return redirect("rater_consent", token=token)
    if rater.study.practice_pairs == 0 and whole_number(request.GET.get("feedback")) is None:
        return redirect("rater_home", token=token)  # nothing to practise in this study (feedback stays readable)
    after = sites.entry_return(request.POST.get("next") or request.GET.get("next"))
    form = PracticeForm(request.POST or None)
    error = None
    if request.method == "POST":
        if not form.is_valid():
            error = _("The submission was incomplete; please answer again.")
        else:
            try:
                step = practice.do_answer(
                    rater, form.cleaned_data["gold"], rater.study.elicitation_mode.read(request.POST)
                )
            except ServiceError as exc:
                error = str(exc)
            else:
                if not request.htmx:  # post/redirect/get
                    return redirect(practice_url(token, after, feedback=step.gold.pk))
                return _render_practice(request, rater, token, after, feedback=step)
    feedback = whole_number(request.GET.get("feedback"))
    if error is None and feedback is not None:
        answered = practice.answered(rater, feedback)
        if answered is not None:
            return _render_practice(request, rater, token, after, feedback=answered)
    given = request.POST if error is not None else None
    response = _render_practice(request, rater, token, after, error=error, given=given)
    if error is not None and not request.htmx:
        response.status_code = 400
    return response


def practice_url(token: str, after: str = "", **params) -> str:
    """The practice page, with where a crowd worker goes back to afterwards (``after``)."""
    query = urlencode({**params, **({"next": after} if after else {})})
    return reverse("rater_practice", args=[token]) + (f"?{query}" if query else "")


def _render_practice(
    request: RaterRequest,
    rater: Rater,
    token: str,
    after: str,
    feedback=None,
    error: str | None = None,
    given=None,
) -> HttpResponse:
    """A practice pair (``given``: a refused answer, shown again as it was selected), its feedback, or the end."""
    study = rater.study
    mode = study.elicitation_mode
    context = {
        "study": study,
        "rater": rater,
        "token": token,
        "practice": True,
        "after": after,
        "error": error,
        "next_practice_url": practice_url(token, after),
        "mode": mode,
    }
    if feedback is not None:
        input_, first, second = feedback.shown
        context.update(
            practice_feedback=feedback,
            shown=Shown(input_, first, second),
            rule=practice.RULE,
            answer_words=practice.in_words(feedback.answer.answer, study),
            expected_words=_("Output 1") if feedback.expected == "first" else _("Output 2"),
        )
    else:
        step = practice.current(rater)
        if step is None:  # the round is over, or the study has no practice (then nothing is marked)
            if practice.needed(rater):
                practice.do_finish(rater)
            context["practice_over"] = True
        else:
            input_, first, second = step.shown
            context.update(
                step=step,
                shown=Shown(input_, first, second),
                number=step.number,
                total=step.total,
                done=step.number - 1,
                percent=round(100 * (step.number - 1) / step.total),
                fieldsets=elicitation.selected(mode.fieldsets(study), given),
                key=uuid.uuid4().hex,
            )
    template = "annotation/rate.html#rating" if request.htmx else "annotation/rate.html"
    return render(request, template, context)


@access.frameable
@access.rater_page
def rate(request: RaterRequest, token: str, assignment_id: int) -> HttpResponse:
    rater, assignment, rows = access.access_rater_assignment_rows(token, assignment_id, _PAGE)
    access.speak_to_raters(request, assignment.study)
    if consent.needed(rater, assignment.study):  # e.g. the study asked for consent after this rater started
        return _to_consent(request, token)
    return _render_rating(request, rater, token, assignment, rows, revise=_revisable(rows, request.GET.get("revise")))


def _to_consent(request: RaterRequest, token: str) -> HttpResponse:
    """Nobody gets or answers a pair before agreeing: to the consent page (a whole page, also from htmx)."""
    url = reverse("rater_consent", args=[token])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _revisable(rows: list[dict], pair_id) -> dict | None:
    """The row of an answered study pair of the assignment (one the rater may change), or None."""
    try:
        pair_id = int(pair_id)
    except (TypeError, ValueError):
        return None
    return next((r for r in rows if r["id"] == pair_id and r["judgment__id"] is not None), None)


@access.frameable
@csrf_exempt  # see rater_start
@require_POST
@access.rater_page
def rate_submit(request: RaterRequest, token: str, assignment_id: int) -> HttpResponse:
    # One read: the rater, the assignment with its study, and all its pairs (the one answered, and the next
    # one to show); then the answer's UPDATE and INSERT, and the next pair's first view.
    rater, assignment, rows = access.access_rater_assignment_rows(token, assignment_id, _PAGE)
    access.speak_to_raters(request, assignment.study)
    if consent.needed(rater, assignment.study):
        return _to_consent(request, token)
    form = RatingForm(request.POST)
    error = None
    if not form.is_valid():
        error = _("The submission was incomplete; please answer again.")
    elif (pair := access.rater_pair(assignment, rows, form.cleaned_data["pair"])) is None:
        error = _("That pair is not part of your assignment.")
    else:
        skip = request.POST.get("skip") == "1"
        recorded: recording.Recorded | None
        try:
            if assignment.study.ranks and pair.gold_id is None and not skip:
                # a screen of several outputs: read against what it shows (the same draw as when it was shown)
                row = next(r for r in rows if r["id"] == pair.pk)
                screen = rankings.screen(assignment.study, pair.pk, row["pair__item_id"])
                try:
                    answer = rankings.read_answer(screen, request.POST)
                except AnswerError as exc:
                    raise ServiceError(str(exc)) from None
                recorded = recording.do_record_ranking_answer(
                    pair,
                    idempotency_key=form.cleaned_data["key"],
                    answer=answer,
                    client_time_ms=form.cleaned_data["client_ms"],
                    comment=form.cleaned_data["comment"],
                )
            else:
                recorded = recording.do_submit(
                    pair,
                    recording.Submission(
                        key=form.cleaned_data["key"],
                        revise=request.POST.get("revise") == "1",
                        answer=None if skip else assignment.study.elicitation_mode.read(request.POST),
                        further={} if skip else questions.read(assignment.study, request.POST),
                        skip_reason=request.POST.get("skip_reason", ""),
                        client_time_ms=form.cleaned_data["client_ms"],
                        comment=form.cleaned_data["comment"],
                    ),
                )
        except ServiceError as exc:
            error = str(exc)
        except (OperationalError, InterfaceError):
            # The database is briefly unavailable: nothing was stored. Show the same pair with the
            # same submission key, so the retry is recorded once.
            response = _render_rating(
                request,
                rater,
                token,
                assignment,
                rows,
                key=form.cleaned_data["key"],
                error=_(
                    "Your answer could not be saved just now. Please submit it again "
                    "in a moment; it will be counted once."
                ),
                revise=_changed(rows, request),
                given=request.POST,  # the same answers, to send again
            )
            response.status_code = 503
            response["Retry-After"] = "2"
            return response
        else:
            # a skip (every skipped pair) or an answer that took the assignment's next task (claimed as shown)
            if recorded is None or assignment.n_pairs > len(rows):
                rows = _PAGE.rows(assignment=assignment.pk, rater=assignment.rater_id)
            else:
                _mark_answered(rows, pair.pk, recorded)
    if error is None and not request.htmx:
        return redirect("rate", token=token, assignment_id=assignment.pk)  # post/redirect/get
    # a refused answer is shown again as given, on the same pair: a refused change of an answer stays that change
    response = _render_rating(
        request,
        rater,
        token,
        assignment,
        rows,
        error=error,
        revise=_changed(rows, request) if error is not None else None,
        given=request.POST if error is not None else None,
    )
    if error is not None and not request.htmx:
        response.status_code = 400
    return response


def _changed(rows: list[dict], request: RaterRequest) -> dict | None:
    """The row of the pair whose answer a submitted form changes ("change my answer"), or None."""
    return _revisable(rows, request.POST.get("pair")) if request.POST.get("revise") == "1" else None


def _mark_answered(rows: list[dict], pair_id: int, recorded: recording.Recorded) -> None:
    """The page's rows as the submit left them: the answered pair now has its judgment or gold answer."""
    for row in rows:
        if row["id"] == pair_id:
            if recorded.judgment is not None:
                row["judgment__id"] = recorded.judgment.pk
            elif recorded.gold_answer is not None:
                row["gold_answer__id"] = recorded.gold_answer.pk
            elif recorded.ranking is not None:
                row["ranking__id"] = recorded.ranking.pk


def skip_reasons() -> list[tuple[str, str]]:
    """The reasons a rater may skip an item for (``Skip.Reason``'s values), in the raters' language."""
    words: dict[str, str] = {
        Skip.Reason.CANNOT_JUDGE: _("I cannot judge this (outside what I know)"),
        Skip.Reason.UNREADABLE: _("The input or an output is unreadable or broken"),
        Skip.Reason.OFFENSIVE: _("The content is offensive or disturbing"),
        Skip.Reason.OTHER: _("Another reason"),
    }
    return [(value, words.get(value, label)) for value, label in Skip.Reason.choices]


@dataclasses.dataclass
class Shown:
    """What the rating page shows for one pair, study pair or attention check alike."""

    input: str
    first: str
    second: str
    messages: list | None = None  # a conversation item's turns (annotation/conversations.py): the input as a chat


# What the rating page reads of an assignment's pairs: flat columns, no model objects. This is the hot
# path under load, and the ORM's cost grows with the number of columns and objects it handles.
PAIR_COLUMNS = (
    *model_columns(AssignmentPair),
    "judgment__id",
    "gold_answer__id",
    "skip__id",
    "ranking__id",
    "pair__item_id",
    "pair__item__input",
    "pair__item__messages",
    "pair__generation_a__text",
    "pair__generation_b__text",
    "gold__input",
    "gold__good_output",
    "gold__bad_output",
)


# The rating page: its pairs, each with the assignment, rater and study (one query instead of two).
_PAGE = CompiledQuery(
    lambda assignment, rater: (
        AssignmentPair.objects.filter(assignment_id=assignment, assignment__rater_id=rater)
        .order_by("position")
        .values(*PAIR_COLUMNS, *access.assignment_columns())
    ),
    assignment=int,
    rater=int,
)


def _shown(row: dict) -> Shown:
    """Both outputs in display order, study pair or attention check alike."""
    if row["gold_id"] is not None:
        good, bad = row["gold__good_output"], row["gold__bad_output"]
        return Shown(row["gold__input"], *orientation.in_display_order(good, bad, row["a_shown_first"]))
    a, b = row["pair__generation_a__text"], row["pair__generation_b__text"]
    return Shown(
        row["pair__item__input"],
        *orientation.in_display_order(a, b, row["a_shown_first"]),
        messages=row["pair__item__messages"],
    )


def _stored_answer(study, row: dict):
    """The current answer to an answered pair as its form (what "change my answer" starts from)."""
    judgment = (
        Judgment.objects.filter(pk=row["judgment__id"])
        .values("choice", "response_set", "strength", "answers", "comment")
        .first()
    )
    return None if judgment is None else questions.stored_form(study, judgment, row["a_shown_first"])


def ranking_rows(screen: rankings.Screen, given) -> list[dict[str, Any]]:
    """Each output of a ranking screen with what a refused answer gave it (its place, best, worst), shown again."""
    given = given or {}

    def place(generation: int) -> int | None:
        value = str(given.get(f"place_{generation}", ""))
        return int(value) if value.isdigit() else None

    return [
        {
            "output": o,
            "place": place(o.generation),
            "best": given.get("best") == str(o.generation),
            "worst": given.get("worst") == str(o.generation),
        }
        for o in screen.outputs
    ]


def _answered(row: dict) -> bool:
    return (
        row["judgment__id"] is not None
        or row["gold_answer__id"] is not None
        or row["skip__id"] is not None
        or row["ranking__id"] is not None
    )


def _render_rating(
    request: RaterRequest,
    rater: Rater,
    token: str,
    assignment: Assignment,
    rows: list[dict],
    error: str | None = None,
    key: str | None = None,
    revise: dict | None = None,
    given=None,
) -> HttpResponse:
    """The rating page (or its fragment). ``given``: a refused answer's form, every answer of which is shown again
    (the main choice, each further question, the comment: nothing given is lost); ``revise``: the answered pair whose
    answer the rater changes, shown with that answer (or ``given``)."""
    study = assignment.study
    current = next((r for r in rows if not _answered(r)), None)
    if current is None and assignment.unclaimed and assignment.status == Assignment.Status.ACTIVE and rows:
        recording.do_claim_next(assignment)  # its next task could not be claimed when the last pair was answered
        rows = _PAGE.rows(assignment=assignment.pk, rater=assignment.rater_id)
        current = next((r for r in rows if not _answered(r)), None)
    done = sum(1 for r in rows if _answered(r))
    # the latest answered study pair: the rater may change that answer while the assignment is open
    previous = next((r for r in reversed(rows) if r["judgment__id"] is not None), None)
    if revise is not None and assignment.status == Assignment.Status.ACTIVE:
        current = revise
    external = sites.session_for(assignment) if rater.source == Rater.Source.EXTERNAL else None
    total = len(rows) + assignment.unclaimed
    context: dict[str, Any] = {
        "study": study,
        "rater": rater,
        "token": token,
        "assignment": assignment,
        "error": error,
        "total": total,
        "done": done,
        "external": external,
    }
    if assignment.status == Assignment.Status.EXPIRED:
        context["expired"] = True
    elif current is not None and not study.accepts_raters:
        context["paused"] = True  # an answer to the pair shown before the pause was stored; nothing more now
    elif current is None and assignment.status == Assignment.Status.ACTIVE and assignment.unclaimed:
        # its next item could not be claimed just now (paused, or every open item taken this moment by other
        # starts): never the completion code while the assignment is open
        context["paused" if not study.accepts_raters else "waiting"] = True
    elif current is None:
        rater.refresh_from_db(fields=["screened_out"])
        context["completed"] = True
        context["next_size"] = allocation.next_assignment_pairs(rater)  # what "Rate more" starts; 0: nothing left
        if external is not None:
            context.update(sites.completion(external, rater))
    else:
        pair = AssignmentPair(pk=current["id"], shown_at=current["shown_at"])
        allocation.do_mark_shown(pair)
        if given is not None and given.get("pair") != str(current["id"]):
            given = None  # answers given for another pair are never put on this one
        mode = study.elicitation_mode
        if revise is not None:
            context["revising"] = rows.index(revise) + 1
            if given is None:
                given = _stored_answer(study, revise)
        elif previous is not None:
            context["previous"] = {"pk": previous["id"], "number": rows.index(previous) + 1}
        if study.ranks and current["gold_id"] is None:  # several outputs of the item at once, with their form
            screen = rankings.screen(study, current["id"], current["pair__item_id"])
            context.update(
                screen=screen, ranking_rows=ranking_rows(screen, given), places=range(1, len(screen.outputs) + 1)
            )
        context.update(
            current=pair,
            shown=_shown(current),
            number=rows.index(current) + 1,
            key=key or uuid.uuid4().hex,
            percent=round(100 * done / total),
            mode=mode,
            **questions.page(study, given),
            comment_max=COMMENT_MAX_CHARS,
            skip_reasons=skip_reasons(),
            minutes_left=max(1, round((total - done) * assignment.seconds_per_pair / 60)),
        )
    template = "annotation/rate.html#rating" if request.htmx else "annotation/rate.html"
    response = render(request, template, context)
    if context.get("waiting"):
        response.status_code = 503
        response["Retry-After"] = "2"
    return response
