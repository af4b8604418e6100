"""Planned looks in the live plan (docs/decisions.md#group-sequential-looks): a study whose decision is read at K
planned looks stores each pair's item scores in arrival order, and the pair stands where
``group_sequential.standing`` puts those scores -- the function ``simulate --replay`` decides with -- deciding at a
look, or stopping the pair for futility (undecided, no longer bought)."""

from __future__ import annotations

import itertools
import json

import pytest

from annotation.elicitation import Answer
from annotation.models import Task
from annotation.rating import allocation, recording
from annotation.studies import creation, enrolment, lifecycle
from selection import rating_sets
from selection.core import decisions, designs, group_sequential
from selection.hooks import STOPPED_WORDS
from selection.models import PairDecision

ITEMS = 60
ALPHA = 0.05 / 3  # three systems, three pairs: the study-wide error split over them (selection/core/multiplicity.py)


@pytest.fixture
def looked(researcher):
    """Three systems, every item on every pair, one rater per item, one pair per assignment, the study's default
    decision: five planned looks, futility stops below 0.1. sys-a wins three items in four over sys-b and sys-c
    (ties on the others); between sys-b and sys-c the answers alternate, so the level pair's mean is a half at
    every even count."""
    lines = [
        {
            "id": f"item-{i}",
            "input": f"Question {i}?",
            "outputs": {s: [f"{s} answers question {i}."] for s in ("sys-a", "sys-b", "sys-c")},
        }
        for i in range(ITEMS)
    ]
    study = creation.do_create_study(
        researcher, "looked", "".join(json.dumps(x) + "\n" for x in lines).encode(), "l.jsonl"
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
        },
        None,
    )


def rate_everything(study) -> None:
    """Raters take assignments until the plan has nothing left for anyone."""
    level = itertools.count()
    for n in range(40):
        rater = enrolment.do_create_rater_link(study, f"r{n}")
        taken = 0
        while (assignment := allocation.do_start_assignment(rater)) is not None:
            for pair in assignment.pairs.select_related(
                "pair__generation_a__system", "pair__generation_b__system", "pair__generation_a__item"
            ):
                assert pair.pair is not None  # a plan pair, not a gold one
                shown = [pair.pair.generation_a.system.name, pair.pair.generation_b.system.name]
                first, second = shown if pair.a_shown_first else shown[::-1]
                if "sys-a" in shown:
                    won = int(pair.pair.generation_a.item.external_id.split("-")[1]) % 4
                    choice = "tie" if won == 0 else "first" if first == "sys-a" else "second"
                else:  # sys-b, then sys-c, then sys-b ... in the order the level pair's answers arrive
                    choice = "first" if (first == "sys-b") == (next(level) % 2 == 0) else "second"
                allocation.do_mark_shown(pair)
                recording.do_record_judgment(pair, idempotency_key=f"p{pair.pk}", answer=Answer(choice=choice))
            taken += 1
        if not taken:
            return
    raise AssertionError("the plan never ran out")


def standing(stored: PairDecision, alpha: float) -> group_sequential.Look:
    return group_sequential.standing(stored.scores, 5, alpha, 0.0, pool=ITEMS, futility=0.1)


def test_a_clear_pair_is_decided_at_a_look_and_a_level_one_is_stopped_for_futility(looked, researcher_client):
    settings = looked.selection_settings
    assert (settings.decision_looks, settings.decision_futility, settings.looks()) == (5, 0.1, 5)  # a new study's
    rate_everything(looked)
    sizes = group_sequential.look_sizes(ITEMS, 5)
    assert sizes == [12, 24, 36, 48, 60]
    pairs = {(c.system_a.name, c.system_b.name): c for c in looked.comparisons.select_related("system_a", "system_b")}
    for key, c in pairs.items():
        stored = PairDecision.objects.get(comparison=c)
        c.refresh_from_db()
        # the stored scores are the pair's item scores read again from its judgments, in the same order
        scored, judgments = rating_sets.pair_item_scores(c)
        assert [i for i, _ in scored] == stored.counted and [s for _, s in scored] == stored.scores
        assert (stored.pool, stored.alpha, stored.judgments) == (ITEMS, pytest.approx(ALPHA), judgments)
        # the stored decision is the pure function's on those scores, at the look it was taken
        look = standing(stored, ALPHA)
        assert (stored.decision, stored.stopped, stored.low, stored.high) == (
            look.decision,
            look.futile,
            look.low,
            look.high,
        )
        assert c.closed and look.n in sizes and len(stored.scores) == look.n  # nothing bought after the look
        if "sys-a" in key:
            assert stored.decision == (decisions.A_BETTER if key[0] == "sys-a" else decisions.B_BETTER)
            assert not stored.stopped and look.low > 0.5
        else:  # the level pair: its mean a half at the first look, far from any boundary
            assert stored.decision == decisions.UNDECIDED and stored.stopped and look.n == sizes[0]
            assert sum(stored.scores) / look.n == 0.5
    page = researcher_client.get(looked.get_absolute_url()).content.decode()
    assert "read at 5 planned looks" in page and "falls below 0.1 is stopped" in page
    table = page.split('data-testid="decisions"')[1]
    assert f"undecided</strong> · not bought: {STOPPED_WORDS}" in table
    assert table.count("not bought: decided") == 2


def test_one_rater_first_moves_on_to_whole_items_when_its_first_phase_stops_for_futility(looked):
    """Two raters per item, one first: phase 1 spends designs.first_share(5) = 0.3 of the pair's error rate on
    single votes, where the clear pairs are decided; the level pair's futility stop at its first look ends phase 1
    at once -- every task asks for both raters -- and phase 2 looks at whole items with the rest (0.7)."""
    looked = lifecycle.do_update_settings(looked, {"raters_per_item": 2, "one_rater_first": True}, None)
    share = designs.first_share(5)
    rate_everything(looked)
    for c in looked.comparisons.select_related("system_a", "system_b"):
        stored = PairDecision.objects.get(comparison=c)
        wanted = set(Task.objects.filter(comparison=c).values_list("raters_required", flat=True))
        if c.system_a.name == "sys-a":
            assert stored.phase == 1 and wanted == {1}
            assert stored.decision == decisions.A_BETTER == standing(stored, ALPHA * share).decision
        else:
            assert stored.phase == 2 and wanted == {2}
            scored, _ = rating_sets.pair_item_scores(c)  # whole items (both raters), phase 2's observations
            assert {i for i, _ in scored} >= set(stored.counted)
            look = standing(stored, ALPHA * (1 - share))
            assert (stored.decision, stored.stopped, stored.items) == (look.decision, look.futile, len(stored.scores))
            # its whole items are level too: phase 2 stops before its last look, and the pair is no longer bought
            assert (stored.decision, stored.stopped) == (decisions.UNDECIDED, True) and look.n < ITEMS
            c.refresh_from_db()
            assert c.closed


def test_the_looks_are_a_setting_checked_and_frozen_with_the_plan(looked):
    from annotation import study_settings
    from annotation.errors import ServiceError

    for looks, futility in ((0, 0.1), (1, 0.0), (20, 0.99)):
        lifecycle.do_update_settings(looked, {"decision_looks": looks, "decision_futility": futility}, None)
        looked.selection_settings.refresh_from_db()
        assert (looked.selection_settings.decision_looks, looked.selection_settings.decision_futility) == (
            looks,
            futility,
        )
    for wrong in ({"decision_looks": 21}, {"decision_looks": -1}, {"decision_futility": 1.0}):
        with pytest.raises(ServiceError, match=next(iter(wrong))):
            lifecycle.do_update_settings(looked, wrong, None)
    looked.selection_settings.refresh_from_db()
    assert (looked.selection_settings.decision_looks, looked.selection_settings.decision_futility) == (20, 0.99)
    assert {"decision_looks", "decision_futility"} <= set(study_settings.frozen_after_start())
    lifecycle.do_update_settings(looked, {"decision_goal": "ranking"}, None)
    assert looked.selection_settings.looks() == 0  # the ranking goal looks after every item


def test_the_decision_step_with_planned_looks_stays_at_four_queries(looked, monkeypatch) -> None:
    """As with continuous monitoring (test_decided_pairs.py): after a pair's first completion, which reads its
    judgments, its pool and its error rate, each completion reads the assignment twice, the pair's stored decision
    (locked) and writes it -- four queries, whatever the pair's scores so far (bench/decision_step.py)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotation.plan import planning

    step, counts = planning.do_close_decided_pairs, []

    def counted(assignment):
        with CaptureQueriesContext(connection) as queries:
            step(assignment)
        counts.append((assignment.places.get().task.comparison_id, len(queries)))

    monkeypatch.setattr(planning, "do_close_decided_pairs", counted)
    rater = enrolment.do_create_rater_link(looked, "timed")
    for n in range(20):
        assignment = allocation.do_start_assignment(rater)
        assert assignment is not None
        pair = assignment.pairs.get()
        allocation.do_mark_shown(pair)
        choice = "first" if n % 2 else "second"  # no pair decided before its first look (12 items)
        recording.do_record_judgment(pair, idempotency_key=f"t{pair.pk}", answer=Answer(choice=choice))
    seen: set[int] = set()
    for comparison, queries in counts:
        assert queries > 4 if comparison not in seen else queries == 4, counts
        seen.add(comparison)
    assert len(counts) == 20 and len(seen) == 3
    assert sum(len(d.scores) for d in PairDecision.objects.all()) == 20
