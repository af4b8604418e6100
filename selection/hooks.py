"""What selection plugs into annotation (``annotation/extensions.py``), registered by ``SelectionConfig.ready``:
the plan's item chooser (the study's strategy: a static method's choice or the live loop's first representatives),
the background jobs of embedding and separability, and what the study and settings pages show of selection."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from decimal import Decimal
from typing import TypedDict, cast

from django.db.models import Case, Count, F, Value, When

from annotation import extensions
from annotation.compiled import CompiledQuery, instance, model_columns
from annotation.models import Assignment, AssignmentTask, Comparison, Item, Study, Task
from annotation.rating.allocation import pairs_per_bundle
from selection import arena, live, rating_sets, services
from selection.core import decisions, designs, group_sequential, racing
from selection.models import PairDecision, error_words
from selection.strategies import STRATEGIES, is_live, needs_embeddings, strategy_parameters


def do_choose(study: Study, comparison: Comparison, candidates: list[Item]) -> list[Item]:
    chosen = study.selection_settings
    if is_live(chosen.selection_method):
        return live.do_start(study, comparison, candidates)
    items, _ = services.do_run_selection(
        study,
        comparison,
        chosen.selection_method,
        chosen.budget,
        study.seed,
        strategy_parameters(study),
        items=candidates,
    )
    return items


def needs_worker(study: Study) -> bool:
    stored = study.selection_settings
    if not needs_embeddings(stored.selection_method, stored.budget, stored.separability_metric):
        return False
    done, total = services.embedding_coverage(study)
    return done < total


def do_prepare(study: Study, progress: extensions.Progress) -> None:
    services.do_embed_study(study, progress=progress)


def do_decide(study: Study, assignment) -> tuple[set[int], set[int]] | None:
    """The decision step after an assignment completed: each system pair it held brought up to date
    (``PairDecision``), then the pairs the study no longer buys closed. An arena decides its pairs whatever its
    settings -- its pair choice reads the decisions (``arena.pair_weights``, docs/arena.md#which-two-systems) --
    always after every vote (a betting sequence: an arena has no planned pool of items to plan looks over), and
    never closes a pair: a decided pair still gets battles, fewer of them."""
    settings = study.selection_settings
    arena_study = study.is_arena
    if not settings.stops_buying() and not arena_study:
        return None
    if arena_study:
        arena.do_observe_vote(settings, assignment)
        return set(), set()
    decided_now = set()
    # each pair's share of the study's error rate (docs/decisions.md#study-wide-error), counted only when a pair
    # starts a sequence: the submit's decision step stays at its four queries (five while pairs race)
    pair_alpha = functools.cache(settings.pair_alpha)
    race = False
    locked: dict[int, PairDecision] = {}

    def lock(comparison_ids: list[int]) -> None:  # before the judgments are read (rating_sets.assignment_reads)
        locked.update((pk, _locked_decision(pk)) for pk in comparison_ids)

    for comparison_id, reads in sorted(rating_sets.assignment_reads(assignment, study, lock).items()):
        stored = locked[comparison_id]
        before = stored.items
        _observe(study, settings, stored, reads, pair_alpha)
        if stored.decision != decisions.UNDECIDED or stored.stopped:  # decided, or stopped for futility
            decided_now.add(comparison_id)
        # the race moves when a pair in it (seen on WARMUP items, before or after) or leaving it completed an item
        race |= stored.items != before and (max(before, stored.items) >= racing.WARMUP or comparison_id in decided_now)
    if arena_study:
        return set(), set()
    if not settings.ranks_only():
        if race:
            do_mark_behind(study, settings)
        return decided_now, set()  # a decided pair stays decided (the intervals are nested): nothing reopens
    closed = not_bought(study, settings)
    now = dict(study.comparisons.values_list("pk", "closed"))
    return (
        {pk for pk in closed if not now.get(pk, True)},
        {pk for pk, is_closed in now.items() if is_closed and pk not in closed},
    )


_DECISION = CompiledQuery(  # compiled once per thread: the decision step runs inside the rater's submit
    lambda comparison: (
        PairDecision.objects.select_for_update().filter(comparison_id=comparison).values(*model_columns(PairDecision))
    ),
    comparison=int,
)


def _locked_decision(comparison_id: int) -> PairDecision:
    """The pair's stored decision, its row locked until the submit commits (created, undecided, the first time)."""
    rows = _DECISION.rows(comparison=comparison_id)
    if rows:
        return cast(PairDecision, instance(PairDecision, rows[0]))  # an instance of the model it is given
    stored, _ = PairDecision.objects.select_for_update().get_or_create(
        comparison_id=comparison_id,
        defaults={"decision": decisions.UNDECIDED, "low": 0.0, "high": 1.0, "items": 0, "judgments": 0},
    )
    return stored


def first_raters(study: Study) -> int:
    return 1 if study.selection_settings.one_first() else study.raters_per_item


def _observe(
    study: Study, settings, stored: PairDecision, reads: rating_sets.PairReads, pair_alpha: Callable[[], float]
) -> None:
    """Bring one pair's stored decision up to date with the items the assignment may have completed: one observation
    per item once its raters are in (one rater in phase 1 of "one rater per item first", all of them otherwise);
    once no item of a pair still undecided lacks its first rater, phase 2 starts -- the pair's tasks ask for all
    their raters, and a new sequence observes whole items -- each phase at half the pair's error rate.

    ``pair_alpha()``: the pair's error rate (``SelectionSettings.pair_alpha``: the study's share for one pair when the
    error is held study-wide; by the union bound the two phases hold the pair's share, and the pairs the study's
    rate). A stored sequence keeps the rate it started with: the rate, its control, one rater first and the
    study's pairs all freeze once raters start (``freezes=PLAN``; ``do_rebuild_plan`` refuses), and a pair's first
    sequence starts at a rater's submit, so it is the study's rate."""
    if settings.looks():
        _observe_looks(study, settings, stored, reads, pair_alpha)
        return
    comparison = reads.comparison
    split = settings.one_first()
    raters = 1 if split and stored.phase == 1 else study.raters_per_item
    sequence = decisions.BettingSequence.from_bytes(bytes(stored.state)) if stored.state else None
    if sequence is None:  # the first time (and the pair's pool, which the race reads: do_mark_behind)
        scored, stored.judgments = rating_sets.pair_item_scores(comparison, raters=raters)
        stored.pool = stored.pool or Task.objects.buyable().filter(comparison_id=comparison.pk).count()
        sequence, stored.counted = decisions.BettingSequence(pair_alpha() / 2 if split else pair_alpha()), []
    else:  # the items this assignment may have completed, one observation each
        new = reads.items - set(stored.counted)
        by_item, _ = rating_sets.ratings_from_rows(comparison, [row for row in reads.rows if row[0] in new])
        scored = rating_sets.whole_item_scores(study, by_item, reads.held, raters)
        stored.judgments += reads.judged
    for item_id, score in scored:
        sequence.update(score)
        stored.counted.append(item_id)
    low, high = sequence.interval
    stored.decision = decisions.decide(low, high, settings.decision_margin) if sequence.n else decisions.UNDECIDED
    if sequence.n:
        stored.mean = sequence.total / sequence.n
    if split and stored.phase == 1 and stored.decision == decisions.UNDECIDED and _first_raters_done(comparison.pk):
        # no item is left without its first rater (an item whose only rater was screened out included) and the
        # pair is open: buy the others, observe whole items afresh (the ranking keeps phase 1's estimate meanwhile)
        Task.objects.filter(comparison_id=comparison.pk).update(raters_required=study.raters_per_item)
        stored.phase, stored.counted = 2, []
        sequence = decisions.BettingSequence(sequence.alpha)  # the second half of the pair's error rate
        low, high = sequence.interval
    stored.low, stored.high, stored.items, stored.state = low, high, sequence.n, sequence.to_bytes()
    stored.save()


def _first_raters_done(comparison_id: int) -> bool:
    """Whether no item of the pair is left without its first rater (an item whose only rater was screened out
    included): phase 1 of one rater first has nothing more to observe."""
    return not Task.objects.buyable().filter(comparison_id=comparison_id, taken__lt=F("raters_required")).exists()


def _observe_looks(
    study: Study, settings, stored: PairDecision, reads: rating_sets.PairReads, pair_alpha: Callable[[], float]
) -> None:
    """``_observe`` with planned looks (``settings.looks()`` > 0; docs/decisions.md#group-sequential-looks): the
    items' scores are stored in arrival order, and the pair stands where ``group_sequential.standing`` puts those
    scores -- the same function, on the same scores in the same order, as ``simulate --replay`` -- looking at
    ``look_sizes(pool, K)`` items, the pool being the pair's items the plan can buy. A look whose conditional power
    is below the futility threshold ends the phase undecided: with one rater first, phase 2 (whole items) starts at
    once; otherwise the pair is stopped (``stopped``: no longer bought). With one rater first the phases spend
    ``designs.first_share`` and the rest of the pair's error rate, stored when its first look was planned."""
    comparison = reads.comparison
    split = settings.one_first()
    looks = settings.looks()
    raters = 1 if split and stored.phase == 1 else study.raters_per_item
    if not stored.alpha:  # the first look planned: the judgments so far, the pool the looks are over, the rate
        scored, stored.judgments = rating_sets.pair_item_scores(comparison, raters=raters)
        stored.pool = Task.objects.buyable().filter(comparison_id=comparison.pk).count()
        stored.alpha, stored.counted, stored.scores = pair_alpha(), [], []
    else:  # the items this assignment may have completed, one score each
        new = reads.items - set(stored.counted)
        by_item, _ = rating_sets.ratings_from_rows(comparison, [row for row in reads.rows if row[0] in new])
        scored = rating_sets.whole_item_scores(study, by_item, reads.held, raters)
        stored.judgments += reads.judged
    for item_id, score in scored:
        stored.counted.append(item_id)
        stored.scores.append(score)
    share = designs.first_share(looks)
    level = (stored.alpha * (share if stored.phase == 1 else 1 - share)) if split else stored.alpha
    now = group_sequential.standing(
        stored.scores, looks, level, settings.decision_margin, pool=stored.pool, futility=settings.futility()
    )
    if stored.scores:
        stored.mean = sum(stored.scores) / len(stored.scores)
    if (
        split
        and stored.phase == 1
        and now.decision == decisions.UNDECIDED
        and (now.futile or _first_raters_done(comparison.pk))
    ):
        # phase 1 cannot decide (stopped for futility, or no item is left without its first rater): buy the
        # others and observe whole items afresh, at the rest of the pair's rate
        Task.objects.filter(comparison_id=comparison.pk).update(raters_required=study.raters_per_item)
        stored.phase, stored.counted, stored.scores = 2, [], []
        now = group_sequential.standing([], looks)
    stored.decision, stored.stopped = now.decision, now.futile
    stored.low, stored.high, stored.items = now.low, now.high, len(stored.scores)
    stored.spread = racing.spread(stored.scores)  # what the race reads (do_mark_behind), kept with the scores
    stored.save()


_RACE = CompiledQuery(  # compiled once per thread, as _DECISION: it runs inside the rater's submit
    lambda study: Comparison.objects.filter(study_id=study).values(
        "pk",
        "closed",
        "behind",
        *(f"decision__{f}" for f in ("decision", "stopped", "items", "mean", "pool", "alpha", "spread")),
    ),
    study=int,
)


def do_mark_behind(study: Study, settings) -> None:
    """Mark the study's open system pairs that are behind in the race (``Comparison.behind``,
    docs/decisions.md#racing-across-pairs): ``racing.behind`` over the pairs neither decided nor stopped, each at
    its stored items, mean, pool and -- with planned looks -- the spread of its scores, at the pairs' error rate and
    the study's margin; a pair not yet observed is at 0 items (never behind). Only while the study stops buying
    decided pairs for every pair (the ranking goal races by its own rule): otherwise no pair is behind. One read;
    where a mark changes, the changed rows locked in pk order and one update."""
    racing_pairs = settings.stops_buying() and not settings.ranks_only()
    looks = settings.looks() > 0
    rows = [tuple(row.values()) for row in _RACE.rows(study=study.pk)]
    states: dict[int, racing.RaceState] = {}
    alpha = 0.0
    for pk, closed, _, decision, stopped, n, mean, pool, stored_alpha, sd in rows if racing_pairs else []:
        if closed or stopped or decision not in (None, decisions.UNDECIDED):
            continue
        alpha = alpha or stored_alpha or 0.0
        # with planned looks the spread stored with the scores; the betting sequence keeps none (the bound stands in)
        states[pk] = racing.RaceState(n or 0, 0.5 if mean is None else mean, pool or 0, sd if looks else None)
    unpooled = [pk for pk, s in states.items() if s.n >= racing.WARMUP and not s.pool]  # stored before pools were
    if unpooled:
        counts = (
            Task.objects.buyable()
            .filter(comparison_id__in=unpooled)
            .values_list("comparison_id")
            .annotate(k=Count("id"))
        )
        for pk, k in counts:
            states[pk] = dataclasses.replace(states[pk], pool=k)
    marked = (
        racing.behind(states, alpha or settings.pair_alpha(len(rows)), settings.decision_margin) if states else set()
    )
    now = {pk for pk, _, behind, *_ in rows if behind}
    changed = sorted(marked ^ now)
    if changed:
        # the rows locked in one order (pk) whichever submit marks them: two submits marking at once wait for each
        # other instead of deadlocking; then one update sets each changed mark
        list(Comparison.objects.select_for_update().filter(pk__in=changed).order_by("pk").values_list("pk"))
        Comparison.objects.filter(pk__in=changed).update(
            behind=Case(When(pk__in=sorted(marked), then=Value(True)), default=Value(False))
        )


def not_bought(study: Study, settings) -> set[int]:
    """The system pairs the study no longer buys: the decided ones, and with the ranking as the goal every pair the
    ranking does not need now (``decisions.ranking_needs``). A pair is exhausted once no place of it is free nor held
    by an assignment under way (a held place comes back if its assignment expires)."""
    stored = {
        d["comparison_id"]: d
        for d in PairDecision.objects.filter(comparison__study=study).values(
            "comparison_id", "decision", "mean", "stopped"
        )
    }
    if not settings.ranks_only():  # decided, or stopped for futility at a planned look
        return {pk for pk, d in stored.items() if d["decision"] != decisions.UNDECIDED or d["stopped"]}
    comparisons = list(study.comparisons.values_list("pk", "system_a_id", "system_b_id"))
    with_work = set(
        Task.objects.buyable()
        .filter(study=study, taken__lt=F("raters_required"))
        .values_list("comparison_id", flat=True)
        .distinct()
    )
    with_work |= set(
        AssignmentTask.objects.filter(
            task__study=study, slot__isnull=False, assignment__status=Assignment.Status.ACTIVE
        )
        .values_list("task__comparison_id", flat=True)
        .distinct()
    )
    states = {
        (a, b): decisions.PairState(
            stored[pk]["decision"] if pk in stored else decisions.UNDECIDED,
            stored[pk]["mean"] if pk in stored else 0.5,
            pk not in with_work,
        )
        for pk, a, b in comparisons
    }
    # the plan keys a pair's systems by id (the core reads them only as keys and in order)
    needed = decisions.ranking_needs(states)
    return {pk for pk, a, b in comparisons if (a, b) not in needed}


def do_reconsider_decisions(study: Study) -> set[int]:
    """After the study's settings changed: the system pairs it no longer buys; the stored decisions are forgotten
    when it stops buying decided pairs."""
    settings = study.selection_settings
    if study.is_arena:  # its decisions are kept whatever the settings, and no pair is ever closed (do_decide)
        return set()
    do_mark_behind(study, settings)  # none behind when off or ranking; else the race as the decisions stand
    if not settings.stops_buying():
        # nothing is kept while off: items finished meanwhile would be missing from a sequence resumed later, so
        # the next completion of each pair after it is turned on again reads the pair's judgments afresh
        PairDecision.objects.filter(comparison__study=study).delete()
        return set()
    return not_bought(study, settings)


def do_recount_decisions(study: Study, item_ids: list[int]) -> set[int]:
    """After the data manager excluded items or included them again (``Item.excluded``): each system pair with a task
    on one of them that has a stored decision is decided again from the start over the judgments that count now (a
    betting sequence takes no observation back, and a look's scores are fixed), at its phase and its error rate; an
    arena's pairs are decided again over the votes that count (``arena.do_recount_decisions``). Returns the pairs the
    study no longer buys (none when it does not stop buying decided pairs)."""
    settings = study.selection_settings
    if study.is_arena:
        arena.do_recount_decisions(study)
        return set()
    if not settings.stops_buying():
        return set()
    pair_alpha = functools.cache(settings.pair_alpha)
    touched = Task.objects.filter(study=study, item_id__in=item_ids).values("comparison_id")
    for comparison in Comparison.objects.filter(pk__in=touched, decision__isnull=False).order_by("pk"):
        stored = _locked_decision(comparison.pk)
        stored.state, stored.counted, stored.scores, stored.alpha, stored.pool = b"", [], [], 0.0, 0  # pool: afresh
        stored.decision, stored.stopped, stored.items, stored.judgments = decisions.UNDECIDED, False, 0, 0
        stored.recounted = True
        comparison.study = study
        _observe(study, settings, stored, rating_sets.PairReads(comparison, set(), [], 0), pair_alpha)
    do_mark_behind(study, settings)
    return not_bought(study, settings)


CHOOSER = extensions.ItemChooser(
    do_choose=do_choose,
    do_advance=live.do_advance,
    needs_worker=needs_worker,
    do_prepare=do_prepare,
    do_decide=do_decide,
    fills_items_first=lambda study: study.selection_settings.stops_buying(),
    do_reconsider_decisions=do_reconsider_decisions,
    do_recount_decisions=do_recount_decisions,
    first_raters=first_raters,
    pair_weights=arena.pair_weights,
    draw_pair=arena.draw_pair,
)


WORDS = {
    decisions.A_BETTER: "{a} better",
    decisions.B_BETTER: "{b} better",
    decisions.EQUIVALENT: "equivalent",
    decisions.UNDECIDED: "undecided",
}


STOPPED_WORDS = "stopped: cannot be decided within the pool"  # a pair stopped for futility at a planned look
# an open pair behind in the race (Comparison.behind, do_mark_behind): the page tags the row "behind", then these
BEHIND_WORDS = "far from a decision: its items go out only once the pairs nearer a decision have none left for a rater"


class DecisionRow(TypedDict):
    """One system pair's row of ``decision_rows``."""

    label: str
    closed: bool
    why: str
    decision: str
    low: float
    high: float
    items: int
    judgments: int
    planned: int
    saved: int
    money: Decimal | None  # None without a pay per assignment
    first_look: int | None  # with planned looks, the items the first one reads (look_sizes(pool, K)[0]); else None
    recounted: bool  # decided again after the data manager excluded or re-opened items (PairDecision.recounted)


def decision_rows(study: Study) -> list[DecisionRow]:
    """Per system pair: its stored decision in words, the interval, the items and judgments it rests on, the plan's
    judgments, those no longer bought and what they would have cost (at the study's pay per assignment); with the
    ranking as the goal, why a pair is not bought now (decided, its order implied by decided pairs, or not next to
    each other in the current ranking); of an open pair, whether it is behind in the race."""
    planned: dict[int, int] = {}
    pools: dict[int, int] = {}  # the pair's items the plan can buy (its tasks): the pool its looks are planned over
    for comparison_id, pairs in (
        Task.objects.buyable().filter(study=study).annotate(p=Count("task_pairs")).values_list("comparison_id", "p")
    ):
        # the study's raters per item, not the task's current ask (one rater first asks for the others later)
        planned[comparison_id] = planned.get(comparison_id, 0) + pairs * study.raters_per_item
        pools[comparison_id] = pools.get(comparison_id, 0) + 1
    looks = study.selection_settings.looks()
    stored = {d.comparison_id: d for d in PairDecision.objects.filter(comparison__study=study)}
    pay = study.crowd_settings.pay_per_assignment
    comparisons = list(study.comparisons.select_related("system_a", "system_b"))
    implied: dict[tuple[int, int], str] = {}
    if study.selection_settings.ranks_only():
        states = {
            (c.system_a_id, c.system_b_id): decisions.PairState(
                stored[c.pk].decision if c.pk in stored else decisions.UNDECIDED, 0.5
            )
            for c in comparisons
        }
        implied = decisions.implied(states)
    rows: list[DecisionRow] = []
    for c in comparisons:
        d = stored.get(c.pk)
        call = d.decision if d else decisions.UNDECIDED
        names = {"a": c.system_a.name, "b": c.system_b.name}
        why = (
            (BEHIND_WORDS if c.behind else "")
            if not c.closed
            else "decided"
            if call != decisions.UNDECIDED
            else STOPPED_WORDS
            if d is not None and d.stopped
            else "order implied by decided pairs: {} above {}".format(
                *(
                    (names["a"], names["b"])
                    if implied[(c.system_a_id, c.system_b_id)] == decisions.A_BETTER
                    else (names["b"], names["a"])
                )
            )
            if (c.system_a_id, c.system_b_id) in implied
            else "not needed by the ranking now"
        )
        saved = max(0, planned.get(c.pk, 0) - (d.judgments if d else 0)) if c.closed else 0
        rows.append(
            {
                "label": str(c),
                "closed": c.closed,
                "why": why,
                "decision": WORDS[call].format(**names),
                "low": d.low if d else 0.0,
                "high": d.high if d else 1.0,
                "items": d.items if d else 0,
                "judgments": d.judgments if d else 0,
                "planned": planned.get(c.pk, 0),
                "saved": saved,
                # the judgments not bought at the study's pay per assignment (whole items' pairs, as bundled)
                "money": None if pay is None else (pay * saved / pairs_per_bundle(study)).quantize(Decimal("0.01")),
                "first_look": group_sequential.look_sizes(pools[c.pk], looks)[0] if looks and pools.get(c.pk) else None,
                "recounted": bool(d and d.recounted),
            }
        )
    return rows


def study_page(study: Study) -> dict:
    settings = study.selection_settings
    shown = settings.stops_buying()  # the decisions' card, and the error rate it names
    pairs = settings.compared_pairs() if shown else 0
    return {
        "decisions": decision_rows(study) if shown else None,
        "decision_error": error_words(
            settings.decision_alpha, settings.pair_alpha(pairs), settings.control_in_force(pairs)
        )
        if shown
        else "",
        "ranking_goal": settings.ranks_only(),
        "live_statuses": live.statuses(study),
        "embedded": services.embedding_coverage(study),
        "settings": settings,
        "strategy": STRATEGIES.get(settings.selection_method),
    }


def settings_page(study: Study) -> dict:
    stored = study.selection_settings
    # what the stored settings become, through the same function the plan, select, simulate and the report call
    return {
        "strategies": STRATEGIES.values(),
        "strategy_parameters": {
            "method": stored.selection_method,
            "budget": stored.budget or "every item",
            "seed": study.seed,
            **strategy_parameters(study),
        },
    }
