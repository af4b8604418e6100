"""What analytics shows on annotation's pages (``annotation/extensions.py``), registered by
``AnalyticsConfig.ready``."""

from __future__ import annotations

import dataclasses

from analytics import budgeting
from analytics.budgeting import percent
from selection.core import multiplicity


def budget_panel(study) -> dict:
    """The settings page's budget planner: the job planning now (or the last one), the latest plan, its advice (in
    words, and the advised plan's items, judgments and cost per margin), its curve and the whole study's items,
    judgments and cost per margin and raters per item (a summary before the per-pair rows)."""
    latest = budgeting.latest(study)
    job = study.jobs.filter(kind=budgeting.KIND).first()
    panel = {"job": job, "plan": latest, "defaults": budgeting.DEFAULTS}
    if latest is None:
        return panel
    rows = latest.result["rows"]
    totals = []
    for m in dict.fromkeys(r["raters"] for r in rows):
        for margin in dict.fromkeys(r["margin"] for r in rows):
            cell = [r for r in rows if r["raters"] == m and r["margin"] == margin]
            short = [r["pair"] for r in cell if r["items"] is None or r["items"] > r["items_in_pool"]]
            judgments = None if any(r["judgments"] is None for r in cell) else sum(r["judgments"] for r in cell)
            totals.append(
                {
                    "raters": m,
                    "margin": margin,
                    "win_percent": percent(margin),
                    "items": None if judgments is None else sum(r["items"] for r in cell),
                    "judgments": judgments,
                    "assignments": None if judgments is None else sum(r["assignments"] for r in cell),
                    "cost": budgeting.total_cost(cell) if judgments is not None else None,
                    "hours": None if judgments is None else round(sum(r["rater_hours"] for r in cell), 1),
                    "short": short,
                }
            )
    rows = [{**r, "win_percent": percent(r["margin"])} for r in rows]
    if rows and "advice" in rows[0]:  # (plans stored before the advice have none)
        # the plan's error rate is a share of a study-wide one: fewer pairs would leave each a larger share
        settings = study.selection_settings
        split = multiplicity.in_force(settings.error_control, settings.compared_pairs()) == "study_wide"
        pairs = len({r["pair"] for r in rows})
        advised = [
            {
                **a,
                "win_percent": percent(a["margin"]),
                "no_plan": "" if a["pairs"] else budgeting.no_plan_at_win_rate_words(pairs, split),
            }
            for a in budgeting.advised(rows)
        ]
        # no pair fits at any margin: what to change, in words, instead of a table of dashes
        max_items = latest.result["request"]["max_items"]
        no_plan = "" if any(a["pairs"] for a in advised) else budgeting.no_plan_words(rows, max_items, split)
        panel.update(advice=budgeting.advice_words(rows), advised=advised, no_plan=no_plan)
    panel.update(
        rows=rows,
        totals=totals,
        svg=budgeting.curve_svg(rows),
        caption=budgeting.curve_caption(rows),
        pairs=len({r["pair"] for r in rows}),
        result=latest.result,
    )
    return panel


def settings_page(study) -> dict:
    # what the stored settings become, through the same function the report calls
    from analytics.report.data import analysis_parameters  # imported when used: the report's imports are heavy

    return {"analysis_parameters": dataclasses.asdict(analysis_parameters(study)), "budget": budget_panel(study)}


def study_page(study) -> dict:
    """An arena's study page links its leaderboard (the board page, ``analytics.views.arena_board``)."""
    from django.urls import reverse

    return {"arena_board_url": reverse("arena_board", args=[study.pk])} if study.is_arena else {}


def item_page(item) -> dict:
    """An item's page: every judged pair with all its verdicts, judges' replies, disagreements and rulings."""
    from analytics import review

    return {"reviews": review.item_review(item)}
