"""What a margin costs, before paying: the budget planner of the settings page, the API and
``manage.py plan_budget`` -- one home for reading a request, planning each system pair from its pilot, turning
judgments into assignments, money and rater-hours, and drawing the curve.

The numbers are ``selection.core.budget``'s (items needed before the pair's anytime-valid decision names the better
system with the stated power); the pilot is the pair's own human judgments so far, else its LLM judges' verdicts as
a prior, else the largest possible variance (``selection.rating_sets.pilot_outcomes``). The plan speaks in items:
judgments = items x raters per item x the pairs an item gives a rater (``pairs_per_item``, the one count of it), and
advises one rater per item first, another rater only where the pool of items runs short and the raters' intra-item
correlation says a second one still tells something (``budget.advise``; docs/decisions.md#budget-planning).
A plan simulates hundreds of studies per margin, so the pages run it as a background job (``budget_job``) and show
the latest stored plan.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from django.db.models import Count

from analytics.columns import plural
from analytics.models import BudgetPlan
from analytics.plots import line_plot
from annotation import jobs
from annotation.models import Generation, Job, Study, Task
from annotation.plan import planning, scheduling
from annotation.rating import allocation
from selection import rating_sets
from selection.core import budget

KIND = "budget"
DEFAULTS = {"margins": "0.05,0.1,0.15", "raters": "1,3", "power": 0.8, "max_items": 2000, "rounds": 200}
FIELDS = ("margins", "raters", "alpha", "power", "max_items", "rounds", "seed", "pair")
MAX_MARGINS, MAX_RATERS = 6, 10  # choices one request may plan (each pair simulates ``rounds`` studies for each)


FIELD_WORDS = {
    "margins": "margins",
    "raters": "raters per item",
    "alpha": "error rate",
    "power": "power",
    "max_items": "most items",
    "rounds": "simulated studies",
    "seed": "seed",
    "pair": "system pair",
}


class BadRequest(ValueError):
    """A budget request refused, naming the field (the API answers {field: [message]}, the page says it with the
    field's words, the command names the option)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


class NoSuchPair(BadRequest):
    """The request names a system pair the study does not compare (the API's 404)."""


# The API's request body as its OpenAPI 3.0 schema: what read_request accepts from JSON (it also takes the form's
# text)
REQUEST_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "margins": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_MARGINS,
            "items": {
                "type": "number",
                "minimum": 0,
                "maximum": 0.5,
                "exclusiveMinimum": True,
                "exclusiveMaximum": True,
            },
            "description": "Win rates above a half to tell (0.05 = 55 %).",
        },
        "raters": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_RATERS,
            "items": {"type": "integer", "minimum": 1, "maximum": 50},
            "description": "Raters per item.",
        },
        "alpha": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "exclusiveMinimum": True,
            "exclusiveMaximum": True,
            "description": "A pair's decision error rate (default: the study's share for one pair).",
        },
        "power": {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMinimum": True, "exclusiveMaximum": True},
        "max_items": {"type": "integer", "minimum": 10, "maximum": 20000},
        "rounds": {"type": "integer", "minimum": 10, "maximum": 2000},
        "seed": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
        "pair": {
            "type": "array",
            "minItems": 2,
            "maxItems": 2,
            "items": {"type": "string", "minLength": 1},
            "description": "One system pair (default: every pair); 404 if the study does not compare it.",
        },
    },
}


@dataclasses.dataclass(frozen=True)
class Request:
    margins: tuple[float, ...]
    raters: tuple[int, ...]
    alpha: float
    power: float = 0.8
    max_items: int = 2000
    rounds: int = 200
    seed: int = 0
    pair: tuple[str, str] | None = None

    def as_dict(self) -> dict:
        return {
            **dataclasses.asdict(self),
            "margins": list(self.margins),
            "raters": list(self.raters),
            "pair": list(self.pair) if self.pair else None,
        }


def _numbers(field: str, text, kind: type) -> tuple:
    parts = [str(v) for v in text] if isinstance(text, list | tuple) else str(text).split(",")
    try:
        values = tuple(kind(v) for v in parts if v.strip())
    except ValueError:
        raise BadRequest(field, f"expected comma-separated numbers, not {text!r}") from None
    if not values:
        raise BadRequest(field, "give at least one number")
    return values


def _number(field: str, text, kind: type, default):
    if text is None or str(text).strip() == "":
        return default
    if kind is int and (isinstance(text, bool) or isinstance(text, float) and not text.is_integer()):
        raise BadRequest(field, f"expected a whole number, not {text!r}")
    try:
        return kind(text)
    except (TypeError, ValueError):
        raise BadRequest(field, f"expected a {'whole ' if kind is int else ''}number, not {text!r}") from None


def read_request(study: Study, values: Mapping[str, object]) -> Request:
    """A budget request from text fields (the form, the API's JSON, the command's options; margins, raters and pair
    also as lists), checked field by field; a missing field takes its default (the study's error rate and seed)."""
    margins = _numbers("margins", values.get("margins") or DEFAULTS["margins"], float)
    raters = _numbers("raters", values.get("raters") or DEFAULTS["raters"], int)
    if any(not 0 < m < 0.5 for m in margins):
        raise BadRequest("margins", "each margin is a win rate above a half: above 0 and below 0.5 (0.05 = 55 %)")
    if any(r < 1 or r > 50 for r in raters):
        raise BadRequest("raters", "raters per item are whole numbers from 1 to 50")
    if len(margins) > MAX_MARGINS or len(raters) > MAX_RATERS:
        raise BadRequest(
            "margins" if len(margins) > MAX_MARGINS else "raters",
            f"at most {MAX_MARGINS} margins and {MAX_RATERS} numbers of raters per plan",
        )
    alpha = _number("alpha", values.get("alpha"), float, study.selection_settings.pair_alpha())  # a pair's share
    power = _number("power", values.get("power"), float, DEFAULTS["power"])
    max_items = _number("max_items", values.get("max_items"), int, DEFAULTS["max_items"])
    rounds = _number("rounds", values.get("rounds"), int, DEFAULTS["rounds"])
    seed = _number("seed", values.get("seed"), int, study.seed)
    if not 0 <= seed < 2**32:
        raise BadRequest("seed", "a whole number from 0 to 4,294,967,295")
    if not 0 < alpha < 1:
        raise BadRequest("alpha", "the error rate is above 0 and below 1 (e.g. 0.05)")
    if not 0 < power < 1:
        raise BadRequest("power", "the power is above 0 and below 1 (e.g. 0.8)")
    if not 10 <= max_items <= 20000:
        raise BadRequest("max_items", "from 10 to 20,000 items")
    if not 10 <= rounds <= 2000:
        raise BadRequest("rounds", "from 10 to 2,000 simulated studies")
    pair = None
    if values.get("pair"):
        given = values["pair"]
        names = [str(p).strip() for p in (given if isinstance(given, list | tuple) else str(given).split(","))]
        if len(names) != 2 or not all(names):
            raise BadRequest("pair", "two system names separated by a comma: SYSTEM_A,SYSTEM_B")
        if (
            any("\x00" in n for n in names)
            or not study.comparisons.filter(system_a__name__in=names, system_b__name__in=names).exists()
        ):
            # (a NUL can be in no system's name, and PostgreSQL refuses it in a query)
            raise NoSuchPair("pair", f"the study does not compare {names[0]} with {names[1]}")
        pair = (names[0], names[1])
    return Request(tuple(margins), tuple(raters), alpha, power, max_items, rounds, seed, pair)


def pairs_per_item(study: Study) -> dict[int, float]:
    """Per system pair (comparison id): the sampled output pairs one rater judges per item -- what the pair's tasks
    hold (their mean), else, before it has tasks, what the plan would draw from each item's samples
    (``scheduling.sample_pairs``: min(N, K_A, K_B) one-to-one, at most N of the K_A x K_B grid). One when each system
    has one output per item, whatever the study's N (``pairs_per_assignment``) says. The one count of "the pairs an
    item gives" for whatever counts judgments: the planner, the budget page, the API."""
    held = {
        c: pairs / tasks
        for c, tasks, pairs in Task.objects.filter(study=study)
        .order_by()
        .values("comparison_id")
        .annotate(tasks=Count("id", distinct=True), pairs=Count("task_pairs"))
        .values_list("comparison_id", "tasks", "pairs")
        if pairs
    }
    comparisons = list(study.comparisons.exclude(pk__in=held).values_list("pk", "system_a_id", "system_b_id"))
    if not comparisons:
        return held
    samples: dict[int, dict[int, int]] = {}  # item -> system -> its samples
    for item, system, k in (
        Generation.objects.filter(item__study=study)
        .order_by()
        .values("item_id", "system_id")
        .annotate(k=Count("id"))
        .values_list("item_id", "system_id", "k")
    ):
        samples.setdefault(item, {})[system] = k
    drawn: dict[tuple[int, int], int] = {}
    for pk, a, b in comparisons:
        sizes = [(k[a], k[b]) for k in samples.values() if a in k and b in k]
        for size in set(sizes) - set(drawn):  # the rule is the scheduler's: count what it draws
            drawn[size] = len(
                scheduling.sample_pairs(*size, study.places_per_task, random.Random(0), study.sample_pairing)
            )
        held[pk] = statistics.fmean(drawn[size] for size in sizes) if sizes else 1.0
    return held


def plan(study: Study, request: Request, progress: Callable[[int, int], None] | None = None) -> dict:
    """Per system pair, margin and raters per item: items, judgments, assignments (HITs), money and rater-hours, and
    the advice (``budget.advise``: the row to follow, ``recommended``, and whether it buys new items or another rater).
    Judgments = items x raters x the pairs an item gives a rater (``pairs_per_item``); an assignment holds whole
    items' pairs up to the study's judgments per assignment (``allocation.bundle``); money is the study's pay per
    assignment."""
    comparisons = list(study.comparisons.select_related("system_a", "system_b"))
    if request.pair:
        comparisons = [c for c in comparisons if {c.system_a.name, c.system_b.name} == set(request.pair)]
    pace, measured = allocation.seconds_per_pair(study)
    per_item = pairs_per_item(study)
    pay = study.crowd_settings.pay_per_assignment
    pay = None if pay is None else Decimal(str(pay))
    pools = planning.pair_pools(study)  # the items each pair's plan holds
    all_items = study.items.count()
    total, done = len(comparisons) * len(request.margins) * len(request.raters), 0
    needed: dict[tuple[float, float], int | None] = {}  # pairs with the same item variance share a simulation
    rows = []
    for c in comparisons:
        source, outcomes = rating_sets.pilot_outcomes(c)
        pilot = budget.pilot_of(outcomes) if outcomes else budget.Pilot(budget.NO_PILOT_VARIANCE, budget.UNKNOWN_RHO)
        pairs = per_item.get(c.pk, 1.0)
        per_assignment = allocation.bundle(max(1, round(pairs)), study.judgments_per_assignment)
        pool = pools.get(c.pk, all_items)
        pair_rows: list[dict[str, Any]] = []
        for m in request.raters:
            for margin in request.margins:
                variance = pilot.item_variance(m)
                key = (margin, round(variance, 6))
                if key not in needed:
                    needed[key] = budget.items_needed(
                        margin, variance, request.alpha, request.power, request.max_items, request.rounds, request.seed
                    )
                items = needed[key]
                judgments = None if items is None else budget.judgments(items, m, pairs)
                assignments = None if judgments is None else -(-judgments // per_assignment)
                pair_rows.append(
                    {
                        "pair": str(c),
                        "system_a": c.system_a.name,
                        "system_b": c.system_b.name,
                        "pilot": source,
                        "outcome_variance": round(pilot.outcome_variance, 4),
                        "rho": round(pilot.rho, 4),
                        "margin": margin,
                        "raters": m,
                        "items": items,
                        "judgments": judgments,
                        "alpha": request.alpha,
                        "power": request.power,
                        "assignments": assignments,
                        "cost": None if pay is None or assignments is None else str(pay * assignments),
                        "rater_hours": None if judgments is None else round(judgments * pace / 3600, 1),
                        "items_in_pool": pool,
                        "pairs_per_item": round(pairs, 4),
                        "rho_seen": pilot.rho_seen,
                        "rho_items": pilot.rho_items,
                        "design_effect": round(budget.design_effect(pilot.rho, m), 4),
                        "second_rater_share": round(budget.rater_share(pilot.rho), 4) if pilot.rho_seen else None,
                    }
                )
                done += 1
                if progress:
                    progress(done, total)
        for margin in request.margins:
            cell = [r for r in pair_rows if r["margin"] == margin]
            advice = budget.advise({r["raters"]: r["items"] for r in cell}, pool)
            for r in cell:
                r.update(advice=advice.buy, recommended=r["raters"] == advice.raters)
        rows += pair_rows
    typical = statistics.median(per_item.values()) if per_item else study.places_per_task
    return {
        "request": request.as_dict(),
        "seconds_per_judgment": round(pace, 1),
        "pace_measured": measured,
        "pay_per_assignment": None if pay is None else str(pay),
        "judgments_per_assignment": allocation.bundle(max(1, round(typical)), study.judgments_per_assignment),
        "rows": rows,
    }


MAX_NAMED = 6  # pairs and margins the advice names before it counts them


def percent(margin: float) -> str:
    """The better system's win rate a margin stands for, as a person reads it (0.05 -> "55 %")."""
    return f"{100 * (0.5 + margin):.3g} %"


def _span(values: list[float]) -> str:
    return f"{values[0]:.2f}" if values[0] == values[-1] else f"{values[0]:.2f}–{values[-1]:.2f}"


def advice_words(rows: list[dict]) -> str:
    """The plan's advice in one paragraph, as the settings page and ``plan_budget`` say it: the raters' intra-item
    correlation rho over the pairs whose pilot saw it, what a second rater on an old item buys per judgment against
    a new item, and what to buy."""
    pairs = {r["pair"]: r for r in rows}
    # how far *people* rating one item agree: a pilot of LLM judges' verdicts (a prior for the variance) does not say
    seen = [r for r in pairs.values() if r["rho_seen"] and r["pilot"] == "humans"]
    if not seen:
        words = (
            "No pilot has items rated by two or more people, so how far raters of one item agree (the intra-item "
            "correlation ρ) is not seen yet: plan one rater per item and buy new items; a second rater on a few "
            "dozen items would show whether one pays."
        )
    else:
        rhos = sorted(r["rho"] for r in seen)
        shares = sorted(r["second_rater_share"] for r in seen)
        words = (
            f"How far raters of one item agree: intra-item correlation ρ = {_span(rhos)} "
            f"({len(seen)} of {len(pairs)} system pair{'s' if len(pairs) != 1 else ''}, one-way ANOVA over the items "
            f"with two or more raters; design effect 1 + (m − 1)ρ). A second rater on an old item buys "
            f"{_span(shares)} of what a new item buys per judgment, so new items come first: one rater per item."
        )
    for buy, say in (
        (budget.ANOTHER_RATER, "Where the pool of items runs short, another rater pays"),
        (budget.MORE_ITEMS, "No planned number of raters per item fits the pool (more items are needed)"),
    ):
        cells = list(dict.fromkeys(f"{r['pair']} at {percent(r['margin'])}" for r in rows if r["advice"] == buy))
        if len(cells) > MAX_NAMED:
            planned = len({(r["pair"], r["margin"]) for r in rows})
            cells = [f"{len(cells)} of {planned} pairs and margins (see per pair)"]
        if cells:
            words += f" {say}: {', '.join(cells)}."
    return words


def advised(rows: list[dict]) -> list[dict]:
    """Per margin, the advised plan for the whole study: each pair's recommended row summed -- items to label,
    judgments, assignments, cost and rater-hours -- with the raters per item it takes per pair and the pairs that
    no planned number of raters fits (``budget.MORE_ITEMS``)."""
    out = []
    for margin in dict.fromkeys(r["margin"] for r in rows):
        chosen = [r for r in rows if r["margin"] == margin and r["recommended"]]
        out.append(
            {
                "margin": margin,
                "pairs": len(chosen),
                "items": sum(r["items"] for r in chosen),
                "judgments": sum(r["judgments"] for r in chosen),
                "assignments": sum(r["assignments"] for r in chosen),
                "cost": total_cost(chosen),
                "hours": round(sum(r["rater_hours"] for r in chosen), 1),
                "raters": sorted({r["raters"] for r in chosen}),
                "another_rater": sorted(r["pair"] for r in chosen if r["advice"] == budget.ANOTHER_RATER),
                "more_items": sorted(
                    {r["pair"] for r in rows if r["margin"] == margin and r["advice"] == budget.MORE_ITEMS}
                ),
            }
        )
    return out


def _listed(words: list[str], conjunction: str = "and") -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {conjunction} {words[-1]}"


def no_plan_words(rows: list[dict], max_items: int, split: bool) -> str:
    """What to change when no planned number of raters per item fits any pair's pool at any margin (where the
    advised table would be a row of dashes per margin): the pools, the fewest items a plan needed (or the most it
    looked at, ``max_items``), and the ways out
    -- more items to rate, a wider margin, fewer system pairs (``split``: the plan's error rate is the pair's share
    of a study-wide one, so fewer pairs leave each a larger share)."""
    pairs = len({r["pair"] for r in rows})
    wins = [percent(m) for m in dict.fromkeys(r["margin"] for r in rows)]
    raters = [str(m) for m in sorted({r["raters"] for r in rows})]
    pools = sorted({r["items_in_pool"] for r in rows})
    pool = (
        f"a pool of {pools[0]:,} items"
        if pairs == 1
        else f"pools of {pools[0]:,} items"
        if pools[0] == pools[-1]
        else f"pools of {pools[0]:,} to {pools[-1]:,} items"
    )
    needed = [r["items"] for r in rows if r["items"] is not None]
    fewest = f"the smallest plan needs {min(needed):,} items" if needed else f"each needs more than {max_items:,}"
    return (
        f"No plan fits: at {'the win rate' if len(wins) == 1 else 'every win rate'} planned ({_listed(wins)}), "
        f"{_everyone(pairs)} more items than its pool holds with {_listed(raters, 'or')} "
        f"rater{'s' if raters != ['1'] else ''} per item ({pool}; {fewest}). To get a plan, {_ways_out(pairs, split)}."
    )


def no_plan_at_win_rate_words(pairs: int, split: bool) -> str:
    """The advised table's row for a win rate no planned number of raters fits: ``no_plan_words`` for one margin,
    in the same words (``pairs``: the system pairs planned; ``split`` as there)."""
    return (
        f"No plan fits at this win rate: {_everyone(pairs)} more items than its pool holds. "
        f"To get a plan, {_ways_out(pairs, split)}."
    )


def _everyone(pairs: int) -> str:
    return "the system pair needs" if pairs == 1 else f"each of the {pairs} system pairs needs"


def _ways_out(pairs: int, split: bool) -> str:
    fewer = ""
    if pairs > 1:
        fewer = ", or compare fewer system pairs" + (
            " (the study-wide error rate is then split fewer ways, so each pair needs fewer items)" if split else ""
        )
    return (
        "add items to the study and the budget to rate them, plan for a wider margin (a win rate further from a "
        f"half needs fewer items){fewer}"
    )


def total_cost(rows: list[dict]) -> Decimal | None:
    costs = [Decimal(r["cost"]) for r in rows if r["cost"] is not None]
    return sum(costs, Decimal(0)) if costs else None


def curve_svg(rows: list[dict]) -> str:
    """Judgments needed against the win rate to tell, one line per number of raters per item: the judgments of every
    pair planned (no point where a pair needs more than the largest plan allows) -- the plot of the settings page
    and of ``plan_budget --plot`` (whose pairs: ``curve_caption``)."""
    series: dict[str, list[tuple[float, float | None]]] = {}
    for m in dict.fromkeys(r["raters"] for r in rows):
        name = f"{m} rater{'s' if m != 1 else ''} per item"
        for margin in dict.fromkeys(r["margin"] for r in rows):
            cell = [r["judgments"] for r in rows if r["raters"] == m and r["margin"] == margin]
            series.setdefault(name, []).append((0.5 + margin, None if None in cell else sum(cell)))
    return line_plot(series, "win rate of the better system to tell from a half", "judgments needed")


def curve_caption(rows: list[dict]) -> str:
    pairs = list(dict.fromkeys(r["pair"] for r in rows))
    who = pairs[0] if len(pairs) == 1 else f"all {len(pairs)} system pairs together"
    return f"Judgments needed ({who}) against the win rate of the better system to tell."


# A plan simulates hundreds of studies per margin: one study plans one request at a time. The same request again
# while it is queued or running returns that job (its result is the one asked for); another request is refused
# until it has finished (``jobs.JobLimit``), so a flood of POSTs queues one plan.
LIMIT = jobs.Limit("budget plans", key=None, coalesce="active", per_study=1)


def do_start_budget(study: Study, request: Request) -> Job:
    """Queue a plan (or return the same plan already queued or running); the settings page polls its progress and
    then shows it (``BudgetPlan``). ``jobs.JobLimit`` while the study plans another request."""
    return jobs.start(study, KIND, params=request.as_dict(), message="Planning the budget")


def budget_job(job: Job, progress: jobs.Progress) -> jobs.Outcome:
    study = job.study
    request = read_request(study, job.params)
    result = plan(study, request, progress)
    BudgetPlan.objects.create(study=study, job=job, result=result)
    return jobs.Outcome(f"Budget planned for {plural(len({r['pair'] for r in result['rows']}), 'system pair')}.")


def latest(study: Study) -> BudgetPlan | None:
    return study.budget_plans.order_by("-created", "-id").first()
