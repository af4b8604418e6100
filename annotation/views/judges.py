"""The researcher's LLM-judge pages: add a judge, its run card (start / stop / resume, progress, tokens and cost:
``views/runs.py``, shared with generated systems), and the replies it could not parse. The work is
``annotation/judges/runner.py``'s."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from annotation import access, elicitation
from annotation.endpoints import EndpointError
from annotation.http import ResearcherRequest
from annotation.judges import prompts, runner
from annotation.models import Judge, JudgeCall, Rater
from annotation.studies import team
from annotation.views.forms import JudgeForm
from annotation.views.runs import run_card

UNPARSEABLE_SHOWN = 5
REPLIES_PER_PAGE = 20


@login_required
def judges(request: ResearcherRequest, study_id: int) -> HttpResponse:
    study = access.access_study(request, study_id)
    if request.method == "POST":
        form = JudgeForm(request.POST)
        if form.is_valid():
            fields = {name: form.cleaned_data[name] for name in JudgeForm.Meta.fields}
            try:
                judge = runner.do_create_judge(study, form.cleaned_data["name"], **fields)
            except EndpointError as exc:
                form.add_error("name", str(exc))
            else:
                team.do_audit(study, request.user, "judge_added", f"added judge {judge} ({judge.model})")
                messages.success(request, f"Judge {judge} added. Start it when ready.")
                return redirect("judge_detail", study_id=study.pk, judge_id=judge.pk)
    else:
        form = JudgeForm(initial={"prompt_template": prompts.DEFAULT_TEMPLATE})
    rows = [run_card(runner.JudgeRun(j)) for j in Judge.objects.filter(study=study).select_related("rater", "study")]
    imported = (
        study.raters.filter(kind=Rater.Kind.JUDGE)
        .exclude(source=Rater.Source.RUN)
        .annotate(verdicts=Count("judgments"))
        .order_by("external_id")
    )
    return render(
        request,
        "annotation/judges.html",
        {
            "study": study,
            "form": form,
            "rows": rows,
            "answer_format": prompts.answer_format(prompts.Offer.of(study)),
            "imported": imported,
        },
    )


@login_required
def judge_detail(request: HttpRequest, study_id: int, judge_id: int) -> HttpResponse:
    judge = access.access_judge(request, study_id, judge_id)
    card = run_card(runner.JudgeRun(judge))
    if request.method == "POST":
        form = JudgeForm(request.POST, instance=judge)
        if card.live:
            messages.error(request, "Stop the judge before changing how it is asked.")
            return redirect("judge_detail", study_id=judge.study_id, judge_id=judge.pk)
        if form.is_valid():
            form.save()
            messages.success(request, "Saved.")
            return redirect("judge_detail", study_id=judge.study_id, judge_id=judge.pk)
    else:
        form = JudgeForm(instance=judge)
    unparseable = (
        JudgeCall.objects.filter(judge=judge, status=JudgeCall.Status.UNPARSEABLE)
        .select_related("pair__item")
        .order_by("-id")[:UNPARSEABLE_SHOWN]
    )
    failed = (
        JudgeCall.objects.filter(judge=judge, status=JudgeCall.Status.FAILED)
        .select_related("pair__item")
        .order_by("-id")[:UNPARSEABLE_SHOWN]
    )
    status = request.GET.get("status", "")
    calls = (
        JudgeCall.objects.filter(judge=judge, **({"status": status} if status in JudgeCall.Status.values else {}))
        .select_related("pair__item", "pair__generation_a__system", "pair__generation_b__system", "judgment")
        .order_by("pair__item__position", "pair_id", "-a_shown_first")
    )
    replies = Paginator(calls, REPLIES_PER_PAGE).get_page(request.GET.get("page"))
    for call in replies:
        call.verdict_words = _verdict_words(call)
    return render(
        request,
        "annotation/judge_detail.html",
        {
            "card": card,
            "judge": judge,
            "study": judge.study,
            "form": form,
            "unparseable": unparseable,
            "failed": failed,
            "answer_format": prompts.answer_format(prompts.Offer.of(judge.study)),
            "replies": replies,
            "reply_status": status if status in JudgeCall.Status.values else "",
            "statuses": JudgeCall.Status.choices,
        },
    )


def _verdict_words(call: JudgeCall) -> str:
    """What the judge's reply was read as, naming the systems (or why it was not read)."""
    if call.judgment is None:
        return call.get_status_display()
    j = call.judgment
    return elicitation.stored_in_words(
        j.choice,
        j.response_set,
        j.strength,
        j.probability_a,
        call.pair.generation_a.system.name,
        call.pair.generation_b.system.name,
    )
