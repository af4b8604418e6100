"""The plan stops buying decided pairs (docs/decisions.md#stop-buying-decided-pairs): once a system pair's anytime-valid
decision is in, no new places of it are given out; raters get the undecided pairs; answers already under way count; the
study page says which pairs are decided and what was not bought; turning the setting off opens them again."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pytest
from django.db.models import Count

from annotation.elicitation import Answer
from annotation.models import AssignmentTask, Comparison, Judgment, Task
from annotation.rating import allocation, recording
from annotation.studies import creation, enrolment, lifecycle
from selection.core import decisions
from selection.models import PairDecision

ITEMS = 60


@pytest.fixture
def three(researcher):
    """sys-a beats sys-b and sys-c on every item; sys-b and sys-c are always level. Every item on every pair, one
    rater per item, one pair per assignment."""
    lines = [
        {
            "id": f"item-{i}",
            "input": f"Question {i}?",
            "outputs": {s: [f"{s} answers question {i}."] for s in ("sys-a", "sys-b", "sys-c")},
        }
        for i in range(ITEMS)
    ]
    study = creation.do_create_study(
        researcher, "three", "".join(json.dumps(x) + "\n" for x in lines).encode(), "t.jsonl"
    )
    return lifecycle.do_update_settings(
        study,
        {
            "scheduling": "no_repeat",
            "raters_per_item": 1,
            "pairs_per_assignment": 1,
            "judgments_per_assignment": 1,
            "selection_method": "random",
            "stop_when_decided": True,
            "decision_margin": 0.0,
            "decision_looks": 0,  # continuous monitoring (planned looks: test_planned_looks.py)
            # the plan's draws fixed: the race tests (test_racing_live.py) follow the order items complete in, and
            # a study's own seed is random (one draw in a CI run left the level pair never behind)
            "seed": 20261128,
        },
        None,
    )


def answer(pair) -> None:
    """sys-a when it is shown, else a tie -- in display coordinates, as the rating page reads them."""
    shown = [pair.pair.generation_a, pair.pair.generation_b]
    first, second = shown if pair.a_shown_first else shown[::-1]
    choice = "first" if first.system.name == "sys-a" else "second" if second.system.name == "sys-a" else "tie"
    allocation.do_mark_shown(pair)
    recording.do_record_judgment(pair, idempotency_key=f"p{pair.pk}", answer=Answer(choice=choice))


def rate_everything(study, names: str = "r") -> int:
    """Raters (named ``names`` and a number) take assignments until the plan has nothing left for anyone; returns how
    many assignments."""
    done = 0
    for n in range(20):
        rater = enrolment.do_create_rater_link(study, f"{names}{n}")
        taken = 0
        while (assignment := allocation.do_start_assignment(rater)) is not None:
            for pair in assignment.pairs.select_related("pair__generation_a__system", "pair__generation_b__system"):
                answer(pair)
            taken += 1
        done += taken
        if not taken:
            return done
    raise AssertionError("the plan never ran out")


def judgments_of(comparison: Comparison) -> int:
    systems = [comparison.system_a_id, comparison.system_b_id]
    return Judgment.objects.filter(
        pair__generation_a__system_id__in=systems, pair__generation_b__system_id__in=systems
    ).count()


def test_a_decided_pair_gets_no_new_places_and_the_undecided_pair_is_bought_whole(three):
    rate_everything(three)
    pairs = {(c.system_a.name, c.system_b.name): c for c in three.comparisons.select_related("system_a", "system_b")}
    level = pairs[("sys-b", "sys-c")]
    level.refresh_from_db()
    assert not level.closed and judgments_of(level) == ITEMS  # never decided: every planned judgment bought
    for key in (("sys-a", "sys-b"), ("sys-a", "sys-c")):
        won = pairs[key]
        won.refresh_from_db()
        stored = PairDecision.objects.get(comparison=won)
        assert won.closed and stored.decision == decisions.A_BETTER and stored.low > 0.5
        # bought until the decision and not one judgment after: the items it rests on are the pair's judgments
        assert judgments_of(won) == stored.judgments == stored.items < ITEMS
        # the decision is the confidence sequence's on those items, every one won by sys-a
        lower, _ = decisions.betting_confidence_sequence([1.0] * stored.items, alpha=0.05 / 3)  # three pairs
        assert lower[-1] > 0.5 and (stored.items == 1 or lower[-2] <= 0.5)
    assert AssignmentTask.objects.filter(task__comparison__closed=True).count() == sum(
        judgments_of(pairs[k]) for k in (("sys-a", "sys-b"), ("sys-a", "sys-c"))
    )


def test_items_with_one_output_a_system_are_scored_whatever_the_pairs_per_task_setting(three):
    """One output per system makes every task one pair, whatever pairs per task (N) says: an item whose rater
    answered its one pair is whole, and the decision observes it. (It once waited for N answers per item, so a study
    with one output per system and N = 5, the default, never decided a pair.)"""
    lifecycle.do_update_settings(three, {"pairs_per_assignment": 5, "judgments_per_assignment": 5}, None)
    assert set(Task.objects.filter(study=three).annotate(n=Count("task_pairs")).values_list("n", flat=True)) == {1}
    rate_everything(three)
    for stored in PairDecision.objects.filter(comparison__study=three).select_related("comparison__system_a"):
        assert stored.items > 0  # every pair observed its answered items
        if stored.comparison.system_a.name == "sys-a":
            assert stored.decision == decisions.A_BETTER and stored.comparison.closed


def test_the_study_page_shows_the_decisions_and_what_was_not_bought(researcher_client, three):
    rate_everything(three)
    page = researcher_client.get(three.get_absolute_url()).content.decode()
    table = page.split('data-testid="decisions"')[1].split("</table>")[0]
    assert table.count("sys-a better") == 2 and "undecided" in table and "not bought: decided" in table
    saved = sum(ITEMS - PairDecision.objects.get(comparison=c).judgments for c in three.comparisons.filter(closed=True))
    assert saved > 0 and f"<td>{ITEMS - PairDecision.objects.filter(decision='a').first().judgments}</td>" in table
    assert "Money saved" not in table  # no pay per assignment set: no money shown


def test_the_money_saved_is_the_judgments_not_bought_at_the_pay_per_assignment(researcher_client, three):
    three.crowd_settings.pay_per_assignment = Decimal("0.35")  # one pair per assignment
    three.crowd_settings.save()
    rate_everything(three)
    table = researcher_client.get(three.get_absolute_url()).content.decode().split('data-testid="decisions"')[1]
    assert "Money saved" in table
    for stored in PairDecision.objects.filter(decision="a"):
        assert f"<td>{ITEMS - stored.judgments}</td><td>{Decimal('0.35') * (ITEMS - stored.judgments)}</td>" in table


def test_stopping_to_stop_opens_the_decided_pairs_again(three):
    rate_everything(three)
    assert three.comparisons.filter(closed=True).count() == 2
    lifecycle.do_update_settings(three, {"stop_when_decided": False}, None)
    assert not three.comparisons.filter(closed=True).exists()
    assert not PairDecision.objects.exists()  # nothing kept while off: items finished meanwhile would be missed
    rater = enrolment.do_create_rater_link(three, "late")
    assignment = allocation.do_start_assignment(rater)  # the rest of the decided pairs can be bought again
    lifecycle.do_update_settings(three, {"stop_when_decided": True}, None)
    assert not three.comparisons.filter(closed=True).exists()
    for pair in assignment.pairs.select_related("pair__generation_a__system", "pair__generation_b__system"):
        answer(pair)  # its pair's decision is read afresh from all its judgments, and it closes again
    comparison = assignment.places.get().task.comparison
    comparison.refresh_from_db()
    assert comparison.closed == (comparison.system_a.name == "sys-a")
    assert PairDecision.objects.get(comparison=comparison).items == judgments_of(comparison)


def test_only_a_random_selection_stops_buying(three):
    """The decision's sequence assumes items in random order with equal chances: with another selection the setting
    does nothing (it sits among the settings not used with the current choices)."""
    lifecycle.do_update_settings(three, {"selection_method": "stratified"}, None)
    rate_everything(three)
    assert not three.comparisons.filter(closed=True).exists() and not PairDecision.objects.exists()


def test_without_the_setting_nothing_is_decided_or_closed(researcher_client, three):
    lifecycle.do_update_settings(three, {"stop_when_decided": False}, None)
    rate_everything(three)
    assert not three.comparisons.filter(closed=True).exists() and not PairDecision.objects.exists()
    assert 'data-testid="decisions"' not in researcher_client.get(three.get_absolute_url()).content.decode()


def test_the_stored_sequence_equals_the_one_recomputed_from_the_judgments(three):
    """What each completed assignment adds to the stored state is what a pass over the pair's judgments gives."""
    from selection import rating_sets

    lifecycle.do_update_settings(three, {"decision_margin": 0.3}, None)  # wide: equivalence stops the level pair
    rate_everything(three)
    for comparison in three.comparisons.select_related("study"):
        stored = PairDecision.objects.get(comparison=comparison)
        scored, judgments = rating_sets.pair_item_scores(comparison)
        lower, upper = decisions.betting_confidence_sequence([s for _, s in scored], alpha=0.05 / 3)
        assert [i for i, _ in scored] == stored.counted and judgments == stored.judgments
        assert (stored.low, stored.high, stored.items) == pytest.approx((lower[-1], upper[-1], len(scored)))
    level = PairDecision.objects.get(comparison__system_a__name="sys-b")
    assert level.decision == decisions.EQUIVALENT and level.items < ITEMS  # within 0.3 of a half: stopped too


def test_with_two_raters_per_item_started_items_are_finished_first_and_observed_whole(three):
    """Depth first while the study stops buying (Study.fill_items_first): two raters taking turns finish each item
    before a new one starts, so the decision observes whole items early and buys no half-rated ones."""
    lifecycle.do_update_settings(three, {"raters_per_item": 2}, None)
    three.refresh_from_db()
    assert three.fill_items_first
    raters = [enrolment.do_create_rater_link(three, f"turn-{n}") for n in range(2)]
    for _ in range(ITEMS * 3):
        progressed = False
        for rater in raters:
            assignment = allocation.do_start_assignment(rater)
            if assignment is None:
                continue
            for pair in assignment.pairs.select_related("pair__generation_a__system", "pair__generation_b__system"):
                answer(pair)
            progressed = True
        if not progressed:
            break
    for comparison in three.comparisons.filter(system_a__name="sys-a"):
        stored = PairDecision.objects.get(comparison=comparison)
        assert comparison.closed and stored.decision == decisions.A_BETTER
        assert judgments_of(comparison) == stored.judgments == 2 * stored.items  # every bought item is whole
    lifecycle.do_update_settings(three, {"stop_when_decided": False}, None)
    three.refresh_from_db()
    assert not three.fill_items_first  # breadth first again


STRENGTH = {"sys-a": 4, "sys-b": 3, "sys-c": 2, "sys-d": 1}


def test_the_ranking_mode_buys_only_the_adjacent_orders_it_needs(researcher, researcher_client):
    """Four systems, the stronger always chosen, created in an order that is not their ranking (c, a, d, b): the
    plan starts with the pairs adjacent in creation order, re-ranks as decisions come in, and stops once every
    adjacent order of the true ranking a > b > c > d is decided; the other three orders are implied by them and
    bought less than a decision of their own would need."""
    lines = [
        {
            "id": f"item-{i}",
            "input": f"Question {i}?",
            "outputs": {s: [f"{s} answers question {i}."] for s in ("sys-c", "sys-a", "sys-d", "sys-b")},
        }
        for i in range(ITEMS)
    ]
    study = creation.do_create_study(
        researcher, "four", "".join(json.dumps(x) + "\n" for x in lines).encode(), "f.jsonl"
    )
    study = lifecycle.do_update_settings(
        study,
        {
            "scheduling": "no_repeat",
            "raters_per_item": 1,
            "pairs_per_assignment": 1,
            "judgments_per_assignment": 1,
            "selection_method": "random",
            "stop_when_decided": True,
            "decision_margin": 0.0,
            "decision_goal": "ranking",
        },
        None,
    )
    assert study.comparisons.filter(closed=False).count() == 3  # the three pairs adjacent in creation order

    def stronger(pair) -> None:
        shown = [pair.pair.generation_a, pair.pair.generation_b]
        first, second = shown if pair.a_shown_first else shown[::-1]
        allocation.do_mark_shown(pair)
        choice = "first" if STRENGTH[first.system.name] > STRENGTH[second.system.name] else "second"
        recording.do_record_judgment(pair, idempotency_key=f"p{pair.pk}", answer=Answer(choice=choice))

    for n in range(40):
        rater = enrolment.do_create_rater_link(study, f"r{n}")
        taken = 0
        while (assignment := allocation.do_start_assignment(rater)) is not None:
            for pair in assignment.pairs.select_related("pair__generation_a__system", "pair__generation_b__system"):
                stronger(pair)
            taken += 1
        if not taken:
            break
    comparisons = {
        frozenset((c.system_a.name, c.system_b.name)): c
        for c in study.comparisons.select_related("system_a", "system_b")
    }
    assert not any(c.closed is False for c in study.comparisons.all())  # the ranking is decided: nothing bought
    # four systems: each pair decides at the study's error rate over its six pairs (docs/decisions.md#study-wide-error)
    lower, _ = decisions.betting_confidence_sequence([1.0] * ITEMS, alpha=study.selection_settings.decision_alpha / 6)
    alone = int(np.argmax(lower > 0.5)) + 1  # the items a pair needs to be decided on its own
    bought = 0
    for pair, c in comparisons.items():
        stored = PairDecision.objects.filter(comparison=c).first()
        judged = judgments_of(c)
        bought += judged
        better = max(pair, key=STRENGTH.get)
        if abs(STRENGTH[min(pair, key=STRENGTH.get)] - STRENGTH[better]) == 1:  # adjacent in the true ranking
            assert stored.decision == ("a" if c.system_a.name == better else "b") and judged == alone
        else:  # implied by the adjacent decisions, bought less than its own decision would need
            assert judged < alone and (stored is None or stored.decision == decisions.UNDECIDED)
    assert bought < 6 * alone  # what deciding every pair would have bought
    table = researcher_client.get(study.get_absolute_url()).content.decode().split('data-testid="decisions"')[1]
    implied = "not bought: order implied by decided pairs: "
    assert f"{implied}sys-a above sys-c" in table and f"{implied}sys-a above sys-d" in table
    assert f"{implied}sys-b above sys-d" in table


def test_one_rater_per_item_first_and_the_others_only_where_the_pair_stays_open(three):
    """Two raters per item, one first: sys-a's pairs are decided on single votes (each item bought once), the level
    pair sys-b vs sys-c is not, so once each of its items has its first rater the plan asks for the second on every
    one of them (phase 2), and observes whole items afresh."""
    three = lifecycle.do_update_settings(three, {"raters_per_item": 2, "one_rater_first": True}, None)
    assert set(Task.objects.filter(study=three).values_list("raters_required", flat=True)) == {1}
    rate_everything(three)
    pairs = {(c.system_a.name, c.system_b.name): c for c in three.comparisons.select_related("system_a", "system_b")}
    # three systems, three pairs: each pair's share of the study's error rate, phase 1 at half of it
    lower, _ = decisions.betting_confidence_sequence([1.0] * ITEMS, alpha=three.selection_settings.decision_alpha / 6)
    alone = int(np.argmax(lower > 0.5)) + 1
    for key in (("sys-a", "sys-b"), ("sys-a", "sys-c")):
        stored = PairDecision.objects.get(comparison=pairs[key])
        assert stored.decision == decisions.A_BETTER and stored.phase == 1
        assert judgments_of(pairs[key]) == stored.items == alone  # one judgment per item, none after
        assert set(Task.objects.filter(comparison=pairs[key]).values_list("raters_required", flat=True)) == {1}
    level = PairDecision.objects.get(comparison=pairs[("sys-b", "sys-c")])
    assert level.phase == 2 and level.decision == decisions.UNDECIDED and level.items == ITEMS
    assert set(Task.objects.filter(comparison=pairs[("sys-b", "sys-c")]).values_list("raters_required", flat=True)) == {
        2
    }
    assert judgments_of(pairs[("sys-b", "sys-c")]) == 2 * ITEMS  # every item's second rater bought


def test_one_rater_first_goes_on_to_the_other_raters_when_a_first_rater_was_screened_out(three):
    """Phase 2 once waited for every item to be observed, and an item whose only rater was screened
    out never is -- the level pair stayed in phase 1 with no place left. Phase 2 now starts once no item is left
    without its first rater."""
    from django.db.models import F

    from annotation.models import Rater

    three = lifecycle.do_update_settings(three, {"raters_per_item": 2, "one_rater_first": True}, None)
    bad = enrolment.do_create_rater_link(three, "bad")
    while True:  # the bad rater's first place in the level pair: screened out (a failed gold check) as they answer
        assignment = allocation.do_start_assignment(bad)
        places = assignment.places.select_related("task__comparison__system_a")
        level = {p.task.comparison.system_a.name for p in places}
        if level == {"sys-b"}:
            Rater.objects.filter(pk=bad.pk).update(screened_out=True)
        for pair in assignment.pairs.select_related("pair__generation_a__system", "pair__generation_b__system"):
            answer(pair)
        if level == {"sys-b"}:
            break
    rate_everything(three)
    comparison = three.comparisons.get(system_a__name="sys-b", system_b__name="sys-c")
    stored = PairDecision.objects.get(comparison=comparison)
    assert stored.phase == 2 and stored.decision == decisions.UNDECIDED
    assert not Task.objects.filter(comparison=comparison, taken__lt=F("raters_required")).exists()
    assert judgments_of(comparison) == 2 * ITEMS  # every item's second rater bought (the screened one counted once)


def test_the_ranking_mode_gives_work_again_when_a_held_place_expires(researcher):
    """A pair whose last places were only held by an assignment under way once counted as exhausted
    and was closed; when that assignment expired its places came back to a closed pair and nobody got work. A pair
    is exhausted only once no place of it is free nor held."""
    from annotation.models import Assignment

    lines = [
        {
            "id": f"item-{i}",
            "input": f"Q {i}?",
            "outputs": {s: [f"{s} answers {i}."] for s in ("sys-a", "sys-b", "sys-c")},
        }
        for i in range(ITEMS)
    ]
    study = creation.do_create_study(researcher, "rk", "".join(json.dumps(x) + "\n" for x in lines).encode(), "r.jsonl")
    study = lifecycle.do_update_settings(
        study,
        {
            "scheduling": "no_repeat",
            "raters_per_item": 1,
            "pairs_per_assignment": 1,
            "judgments_per_assignment": 1,
            "selection_method": "random",
            "stop_when_decided": True,
            "decision_margin": 0.0,
            "decision_goal": "ranking",
        },
        None,
    )
    strength = {"sys-a": 3, "sys-b": 2, "sys-c": 1}
    holder = enrolment.do_create_rater_link(study, "holder")
    held = allocation.do_start_assignment(holder)
    tied = {held.places.get().task.comparison.system_a.name, held.places.get().task.comparison.system_b.name}

    def rate(pair) -> None:  # the held pair's systems tie (it never decides), the others: the stronger wins
        shown = [pair.pair.generation_a, pair.pair.generation_b]
        first, second = shown if pair.a_shown_first else shown[::-1]
        allocation.do_mark_shown(pair)
        choice = (
            "tie"
            if {first.system.name, second.system.name} == tied
            else "first"
            if strength[first.system.name] > strength[second.system.name]
            else "second"
        )
        recording.do_record_judgment(pair, idempotency_key=f"p{pair.pk}", answer=Answer(choice=choice))

    for n in range(60):
        rater = enrolment.do_create_rater_link(study, f"r{n}")
        taken = 0
        while (assignment := allocation.do_start_assignment(rater)) is not None:
            for pair in assignment.pairs.select_related("pair__generation_a__system", "pair__generation_b__system"):
                rate(pair)
            taken += 1
        if not taken:
            break
    held_comparison = held.places.get().task.comparison
    held_comparison.refresh_from_db()
    assert not held_comparison.closed  # its last place is held, not used up: still needed
    Assignment.objects.filter(pk=held.pk).update(
        last_activity=held.created.replace(year=2000), created=held.created.replace(year=2000)
    )
    allocation.do_expire_stale_assignments(study)
    got = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "late"))
    assert got is not None and got.places.get().task.comparison_id == held_comparison.pk


def test_the_decision_step_reads_an_assignment_in_two_queries_and_writes_one(three, monkeypatch) -> None:
    """After a completed assignment, inside its submit: its places with their output pairs, those pairs' judgments
    with their raters' standing, the pair's stored decision (locked) and its update -- four queries, however many
    judgments the pair already has (bench/decision_step.py times them)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotation.plan import planning

    step, counts = planning.do_close_decided_pairs, []

    def counted(assignment):
        with CaptureQueriesContext(connection) as queries:
            step(assignment)
        counts.append((assignment.places.get().task.comparison_id, len(queries)))

    monkeypatch.setattr(planning, "do_close_decided_pairs", counted)
    rater = enrolment.do_create_rater_link(three, "timed")
    for _ in range(6):
        assignment = allocation.do_start_assignment(rater)
        assert assignment is not None
        pair = assignment.pairs.get()
        allocation.do_mark_shown(pair)
        # ties: every pair stays undecided, nothing is closed
        recording.do_record_judgment(pair, idempotency_key=f"t{pair.pk}", answer=Answer(choice="tie"))
    # the first completion of each system pair creates its stored decision from the pair's judgments; each later
    # one reads and writes four times (which pair each assignment holds follows the study's random seed)
    assert len(counts) == 6
    seen: set[int] = set()
    for comparison, queries in counts:
        assert queries > 4 if comparison not in seen else queries == 4, counts
        seen.add(comparison)
    assert len(seen) < 6  # some pair was completed again
    stored = PairDecision.objects.filter(items__gt=0)
    assert sum(d.items for d in stored) == sum(d.judgments for d in stored) == 6


def test_a_depth_first_start_reads_the_open_tasks_index_without_a_sort(three):
    """While the study stops buying decided pairs, raters finish started items first (the most raters first). That
    order is read from the open tasks' own index (``task_fill_order``), so a start neither walks past the full tasks
    nor sorts every open task (the plain index made a start take 0.5 s at 10,000 judgments on PostgreSQL; the bench
    in bench/decision_step.py measures both)."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    three.refresh_from_db()
    assert three.fill_items_first
    rater = enrolment.do_create_rater_link(three, "depth")
    with transaction.atomic():
        with CaptureQueriesContext(connection) as queries:  # the read a start runs, as it runs it
            assert allocation._open_tasks(rater, 1)
        read = [q["sql"] for q in queries if 'FROM "annotation_task"' in q["sql"] and "ORDER BY" in q["sql"]]
        assert len(read) == 1 and '"annotation_task"."taken" DESC' in read[0], read
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":  # whether the index serves the query, whatever a tiny table costs
                cursor.execute("SET LOCAL enable_seqscan = off")
                cursor.execute("SET LOCAL enable_sort = off")
                cursor.execute("SET LOCAL enable_incremental_sort = off")  # the plain index's way, costed apart
                cursor.execute("EXPLAIN " + read[0])
            else:
                cursor.execute("EXPLAIN QUERY PLAN " + read[0])
            plan = "\n".join(str(row) for row in cursor.fetchall())
    assert "task_fill_order" in plan and "Sort" not in plan and "B-TREE" not in plan, plan
