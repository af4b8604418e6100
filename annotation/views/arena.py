"""An arena's rater pages (docs/arena.md): the prompt box, a battle (two anonymous replies streamed side by side, the
follow-up turns, the vote, the names after it) and its streams. Thin: ``annotation/arena/battles.py`` decides and
stores, ``annotation/arena/streaming.py`` streams; authority is the signed rater link in the URL, as on the rating
page."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from annotation import access, elicitation, questions, rater_words
from annotation.arena import abuse, battles, streaming
from annotation.arena.setup import MAX_PROMPT_CHARS
from annotation.errors import ServiceError
from annotation.exchange.judgment_files import COMMENT_MAX_CHARS
from annotation.http import RaterRequest
from annotation.models import Battle, BattleReply, SystemEndpoint
from annotation.models.arena import NOT_ASKED
from annotation.ratelimit import client_ip, client_key
from annotation.rating import consent, recording
from annotation.views.forms import RatingForm
from annotation.views.raters import paused_message


@access.frameable
@csrf_exempt  # authority is the signed rater token in the URL, never a cookie (see raters.rater_start)
@access.rater_page
def arena_home(request: RaterRequest, token: str) -> HttpResponse:
    """The prompt box (GET); a new battle on the prompt (POST), or the box again with the prompt and why not."""
    rater = access.access_rater(token)
    study = rater.study
    access.speak_to_raters(request, study)
    if not study.accepts_raters:
        return paused_message(request, study)
    if consent.needed(rater):
        return redirect("rater_consent", token=token)
    settings = study.arena
    prompt, category, error = request.GET.get("prompt", ""), request.GET.get("category", ""), None
    if request.method == "POST":
        prompt, category = request.POST.get("prompt", ""), request.POST.get("category", "")
        starter = request.POST.get("starter")
        if starter is not None and starter.isdigit() and int(starter) < len(settings.starters):
            prompt = settings.starters[int(starter)]
        try:
            battle = battles.do_start_battle(rater, prompt, category=category, client=client_key(client_ip(request)))
        except ServiceError as exc:
            error = str(exc)
        else:
            return redirect("arena_battle", token=token, battle_id=battle.pk)
    response = render(
        request,
        "annotation/arena/home.html",
        {
            "study": study,
            "token": token,
            "arena": settings,
            "instructions": rater_words.shown(study.instructions),
            "prompt": prompt,
            "max_prompt_chars": MAX_PROMPT_CHARS,
            "category": category,
            "error": error,
            "battles": rater.battles.count(),
        },
    )
    if error is not None:
        response.status_code = 400
    return response


@access.frameable
@access.rater_page
def arena_battle(request: RaterRequest, token: str, battle_id: int) -> HttpResponse:
    """A battle: its turns, each with the two replies (streaming ones fed by ``arena_stream``; without JavaScript,
    ``?wait=1`` waits for them whole), and what comes next: the vote and a follow-up, the names, or a new battle."""
    rater, battle = access.access_rater_battle(token, battle_id)
    access.speak_to_raters(request, battle.study)
    if request.GET.get("wait") == "1":
        streaming.do_complete(battle)
        battle.refresh_from_db()
    return _render_battle(request, token, battle)


@access.frameable
@access.rater_page
def arena_stream(request: RaterRequest, token: str, battle_id: int, side: str) -> HttpResponseBase:
    """The reply of the side shown ``side`` (left / right) in the current turn, as server-sent events."""
    rater, battle = access.access_rater_battle(token, battle_id)
    try:
        events = streaming.do_stream(battle, streaming.model_side(battle, side))
        first = next(events)  # the reply is looked up (and claimed) now, inside the request's checks
    except ServiceError as exc:
        return HttpResponse(str(exc), status=404, content_type="text/plain")

    def body():
        yield b"retry: 1000\n\n"
        yield first.encoded()
        for event in events:
            yield event.encoded()

    response = StreamingHttpResponse(body(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy (nginx) passes each event on at once
    return response


@access.frameable
@csrf_exempt  # see arena_home
@require_POST
@access.rater_page
def arena_turn(request: RaterRequest, token: str, battle_id: int) -> HttpResponse:
    """A follow-up message: the next turn of both replies."""
    rater, battle = access.access_rater_battle(token, battle_id)
    access.speak_to_raters(request, battle.study)
    try:
        battles.do_add_turn(battle, request.POST.get("prompt", ""))
    except ServiceError as exc:
        return _render_battle(request, token, battle, turn_error=str(exc), status=400)
    if request.htmx:
        return _render_battle(request, token, Battle.objects.get(pk=battle.pk))
    return redirect("arena_battle", token=token, battle_id=battle.pk)


@access.frameable
@csrf_exempt  # see arena_home
@require_POST
@access.rater_page
def arena_vote(request: RaterRequest, token: str, battle_id: int) -> HttpResponse:
    """The vote: the rating page's answer (main question, further questions, comment), recorded as the battle's
    judgment; then the names."""
    rater, battle = access.access_rater_battle(token, battle_id)
    study = battle.study
    access.speak_to_raters(request, study)
    form = RatingForm(request.POST)
    if not form.is_valid() or form.cleaned_data["pair"] != battle.pk:
        return _render_battle(
            request, token, battle, vote_error=_("The vote was incomplete; please vote again."), status=400
        )
    submission = recording.Submission(
        key=form.cleaned_data["key"],
        answer=study.elicitation_mode.read(request.POST),
        further=questions.read(study, request.POST),
        client_time_ms=form.cleaned_data["client_ms"],
        comment=form.cleaned_data["comment"],
    )
    try:
        result = battles.do_vote(battle, submission)
    except ServiceError as exc:
        battle.refresh_from_db()
        if battle.status == Battle.Status.REFUSED:  # refused for good (a reply named its model): the battle's state
            if not request.htmx:
                return redirect("arena_battle", token=token, battle_id=battle.pk)
            return _render_battle(request, token, battle)
        return _render_battle(request, token, battle, vote_error=str(exc), given=request.POST, status=400)
    if not request.htmx:
        return redirect("arena_battle", token=token, battle_id=battle.pk)
    return _render_battle(request, token, Battle.objects.get(pk=battle.pk), result=result)


@dataclasses.dataclass
class Pane:
    """One reply as a pane shows it: left or right, labelled A or B for the rater."""

    shown: str  # left | right
    label: str
    reply: BattleReply | None
    stream_url: str = ""
    name: str = ""  # the system's, once the vote revealed it

    @property
    def streaming(self) -> bool:
        return self.reply is not None and self.reply.status == BattleReply.Status.STREAMING

    @property
    def failed(self) -> bool:
        return self.reply is not None and self.reply.status == BattleReply.Status.FAILED

    @property
    def not_asked(self) -> bool:
        """Failed without being asked: the other model failed first (not this model's failure)."""
        return self.failed and self.reply is not None and self.reply.problem == NOT_ASKED


def _labels() -> tuple[str, str]:
    return _("Model A"), _("Model B")


def named_model(battle: Battle) -> str:
    """The name a reply of the battle gave its own system by (``abuse.names_own_model``: its label or its model's
    name), or "": a vote on the battle will be refused (``battles.do_vote``)."""
    comparison = battle.comparison
    if comparison is None or battle.gold_id is not None:
        return ""
    names = {}
    for side, system in (("a", comparison.system_a), ("b", comparison.system_b)):
        try:
            names[side] = [system.name, system.endpoint.model]
        except SystemEndpoint.DoesNotExist:
            names[side] = [system.name]
    for reply in battle.replies.all():
        named = abuse.names_own_model(reply.text, names[reply.side])
        if named:
            return named
    return ""


def _turns(token: str, battle: Battle) -> list[dict[str, Any]]:
    """Each turn: the rater's message and the two panes (left, right)."""
    replies = {(r.turn, r.side): r for r in battle.replies.all()}
    left_side, right_side = ("a", "b") if battle.a_shown_first else ("b", "a")
    last = max((turn for turn, _ in replies), default=0)
    label_left, label_right = _labels()
    turns = []
    for turn, prompt in enumerate(battle.prompts or [battle.item.input]):
        panes = []
        for shown, side, label in (("left", left_side, label_left), ("right", right_side, label_right)):
            reply = replies.get((turn, side))
            url = ""
            if turn == last and reply is not None and reply.status == BattleReply.Status.STREAMING:
                url = reverse("arena_stream", args=[token, battle.pk, shown])
            panes.append(Pane(shown, label, reply, url))
        turns.append({"number": turn + 1, "prompt": prompt, "panes": panes})
    return turns


def _vote_fieldsets(study, given) -> tuple[elicitation.Fieldset, ...]:
    """The rating page's main question, its first and second options named after the panes (Model A, Model B); the
    question and the other options' labels as the elicitation mode gives them (SepLab's defaults in the raters'
    language: ``rater_words``)."""
    label_left, label_right = _labels()
    names = {elicitation.FIRST: label_left, elicitation.SECOND: label_right}
    fieldsets = questions.page(study, given)["fieldsets"]
    return tuple(
        dataclasses.replace(
            fieldset,
            options=tuple(
                dataclasses.replace(o, label=names[o.value]) if o.name == "choice" and o.value in names else o
                for o in fieldset.options
            ),
        )
        for fieldset in fieldsets
    )


def _key_help(study, fieldsets) -> list[tuple[tuple[str, ...], str]]:
    """The rating page's keys help (``questions.key_help``), each option of the main question named as shown."""
    help_ = questions.key_help(study)
    options = [o for fieldset in fieldsets for o in fieldset.options]
    return [(keys, o.label) for (keys, _what), o in zip(help_, options, strict=False)] + help_[len(options) :]


def _render_battle(
    request: RaterRequest,
    token: str,
    battle: Battle,
    *,
    result: battles.VoteResult | None = None,
    vote_error: str | None = None,
    turn_error: str | None = None,
    given=None,
    status: int = 200,
) -> HttpResponse:
    study = battle.study
    settings = study.arena
    turns = _turns(token, battle)
    panes = turns[-1]["panes"] if turns else []
    answering = any(p.streaming for p in panes)
    # the models that failed (not one never asked because the other failed first); all of them when that is none
    failed = []
    if battle.status == Battle.Status.FAILED:
        failed = [p.label for p in panes if p.failed and not p.not_asked] or [p.label for p in panes if p.failed]
    named = named_model(battle) if battle.status == Battle.Status.READY and not answering else ""
    context: dict[str, Any] = {
        "study": study,
        "token": token,
        "max_prompt_chars": MAX_PROMPT_CHARS,
        "battle": battle,
        "turns": turns,
        "answering": answering,
        "failed": failed,
        "named": named,
        "vote_error": vote_error,
        "turn_error": turn_error,
        # the prompt the rater typed: an attention check showed a known one instead, and gives theirs back after
        "prompt_again": (battle.item.metadata or {}).get("typed", "")
        if battle.gold_id is not None
        else (battle.prompts[0] if battle.prompts else battle.item.input),
        "home_url": reverse("arena_home", args=[token]),
    }
    if battle.status in (Battle.Status.VOTED, Battle.Status.REFUSED):
        names = battles.revealed(battle)
        context["revealed"] = names
        left_name, right_name = names or ("", "")
        for turn in turns:
            for pane in turn["panes"]:
                pane.name = left_name if pane.shown == "left" else right_name
        # what the rater is told after the vote (battles.vote_words): never the flag's details, the researcher's
        result = result or battles.outcome(battle)
        context["result"] = result
        context["counted"] = result.counted if result is not None else not battle.flag
    elif battle.status == Battle.Status.READY and not answering and not named:
        page = questions.page(study, given)
        fieldsets = _vote_fieldsets(study, given)
        context.update(
            voting=True,
            mode=study.elicitation_mode,
            fieldsets=fieldsets,
            further=page["further"],
            comment_value=page["comment_value"],
            comment_max=COMMENT_MAX_CHARS,
            key=uuid.uuid4().hex,
            can_follow_up=len(battle.prompts or [None]) < settings.max_turns,
            key_help=_key_help(study, fieldsets),
        )
    template = "annotation/arena/battle.html#battle" if request.htmx else "annotation/arena/battle.html"
    return render(request, template, context, status=status)
