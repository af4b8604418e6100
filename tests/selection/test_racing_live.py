"""Racing across pairs in the live plan (docs/decisions.md#racing-across-pairs): after each completed assignment the
decision step marks the open pairs far from a decision (``Comparison.behind``), and a rater's next items come from
the pairs nearer a decision first; a pair behind still gets the items of a rater for whom those have nothing."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterator

import numpy as np
import pytest
from django.db import connection, transaction
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from scipy import stats

from annotation.elicitation import Answer
from annotation.models import AssignmentTask, Comparison, Task
from annotation.rating import allocation, recording
from annotation.studies import enrolment, lifecycle
from selection.core import decisions, racing
from selection.hooks import BEHIND_WORDS
from selection.models import PairDecision
from tests.selection.test_decided_pairs import three  # noqa: F401 (the fixture)
from tests.selection.test_planned_looks import ALPHA, ITEMS, looked  # noqa: F401 (the fixture)


def pairs_of(study) -> dict[str, Comparison]:
    return {f"{c.system_a.name}-{c.system_b.name}": c for c in study.comparisons.select_related("system_a", "system_b")}


def answer(pair, level: Iterator[int]) -> None:
    """sys-a wins three items in four and ties the fourth; between sys-b and sys-c the answers alternate in the order
    they arrive (``level`` counts them), so the level pair's mean is a half at every even count."""
    shown = [pair.pair.generation_a.system.name, pair.pair.generation_b.system.name]
    first, _ = shown if pair.a_shown_first else shown[::-1]
    item = int(pair.pair.generation_a.item.external_id.split("-")[1])
    if "sys-a" in shown:
        choice = "tie" if item % 4 == 0 else "first" if first == "sys-a" else "second"
    else:
        choice = "first" if (first == "sys-b") == (next(level) % 2 == 0) else "second"
    allocation.do_mark_shown(pair)
    recording.do_record_judgment(pair, idempotency_key=f"p{pair.pk}", answer=Answer(choice=choice))


def items_to_decide(stored: PairDecision) -> float:
    """The formula of docs/decisions.md#racing-across-pairs at the pair's error rate, margin 0: (z sd / |m - 1/2|)^2,
    with the spread of the pair's own scores (planned looks store them), else sqrt(m (1 - m))."""
    if stored.scores:
        mean, sd = float(np.mean(stored.scores)), float(np.std(stored.scores, ddof=1)) if stored.items > 1 else 0.0
    else:
        mean, sd = stored.mean, math.sqrt(stored.mean * (1 - stored.mean))
    gap, z = abs(mean - 0.5), stats.norm.isf(ALPHA / 2)
    return math.inf if gap == 0 else (z * sd / gap) ** 2


def open_needs(study) -> dict[int, tuple[int, float]]:
    """Each open pair's items so far and the items it needs in all (0 items: not observed yet)."""
    stored = {d.comparison_id: d for d in PairDecision.objects.filter(comparison__study=study)}
    return {
        c.pk: (stored[c.pk].items, items_to_decide(stored[c.pk])) if c.pk in stored else (0, math.nan)
        for c in study.comparisons.all()
        if not c.closed
        and (c.pk not in stored or (stored[c.pk].decision == decisions.UNDECIDED and not stored[c.pk].stopped))
    }


def expected_behind(study) -> set[int]:
    """The rule worked from the formula: among the open pairs seen on 10 items, those needing more than their pool,
    and the farther half (by items still needed) of the others; none when that would be every open pair."""
    needs = open_needs(study)
    raced = {pk: v for pk, v in needs.items() if v[0] >= racing.WARMUP}
    out = {pk for pk, (_, need) in raced.items() if need > ITEMS}
    reachable = sorted((need - n, pk) for pk, (n, need) in raced.items() if pk not in out)
    out |= {pk for _, pk in reachable[math.ceil(len(reachable) / 2) :]}
    return set() if out == set(needs) else out


def marked(study) -> set[int]:
    return set(study.comparisons.filter(behind=True).values_list("pk", flat=True))


def unseen_open(rater, behind: bool) -> bool:
    seen = AssignmentTask.objects.filter(rater=rater).values("item_id")
    return (
        Task.objects.filter(
            study=rater.study, taken__lt=F("raters_required"), comparison__closed=False, comparison__behind=behind
        )
        .exclude(item_id__in=seen)
        .exists()
    )


def rate_everything_racing(study, level: int) -> list[tuple[dict[int, tuple[int, float]], set[int]]]:
    """Raters take assignments until the plan has nothing left for anyone, the marks checked against the rule after
    each, and each start against the marks; returns the open pairs and the marks whenever ``level`` was behind."""
    answers = itertools.count()
    raced: list[tuple[dict[int, tuple[int, float]], set[int]]] = []
    for r in range(10):
        rater = enrolment.do_create_rater_link(study, f"r{r}")
        taken = 0
        while True:
            ahead_left, behind_left = unseen_open(rater, False), unseen_open(rater, True)
            assignment = allocation.do_start_assignment(rater)
            if assignment is None:
                assert not ahead_left and not behind_left  # nobody is sent away while a pair behind has places
                break
            place = assignment.places.select_related("task__comparison").get()
            # a pair behind only when the pairs ahead have nothing left for this rater
            assert not place.task.comparison.behind or not ahead_left
            for pair in assignment.pairs.select_related(
                "pair__generation_a__system", "pair__generation_b__system", "pair__generation_a__item"
            ):
                answer(pair, answers)
            taken += 1
            assert marked(study) == expected_behind(study)
            if level in marked(study):
                raced.append((open_needs(study), marked(study)))
        if not taken:
            return raced
    raise AssertionError("the plan never ran out")


@pytest.mark.slow(seconds=12)
def test_the_pair_far_from_a_decision_is_behind_and_gets_items_only_when_the_others_have_none(
    looked,  # noqa: F811
    monkeypatch,
):
    from annotation.plan import planning

    step, counts = planning.do_close_decided_pairs, []

    def counted(assignment):
        with CaptureQueriesContext(connection) as queries:
            step(assignment)
        counts.append(len(queries))

    monkeypatch.setattr(planning, "do_close_decided_pairs", counted)
    level = pairs_of(looked)["sys-b-sys-c"].pk
    raced = rate_everything_racing(looked, level)
    assert raced  # the level pair was behind once seen on 10 items
    for needs, _ in raced:
        items, need = needs[level]
        # a mean of exactly a half (5 answers each way at 10 items) no number of items decides; at 11 items, 6 to
        # 5: z = 2.394 at 0.05 / 3, sd 0.522, (2.394 * 0.522 / (1/22))^2 = 756 items, more than the pool of 60
        assert items >= racing.WARMUP and need > ITEMS
        assert items % 2 or need == math.inf
    # while it was behind, a pair of sys-a seen on as many items, needing few, was ahead (not marked)
    assert any(
        n >= racing.WARMUP and need <= ITEMS and pk not in marks
        for needs, marks in raced
        for pk, (n, need) in needs.items()
    )
    # the decision step: its four queries, a fifth (the race: the pairs' stored decisions with their spreads) once a
    # raced pair completed an item, where a mark changed the changed rows locked in pk order and one update, and
    # where a pair was decided the update that closes it: at most 8 -- but for each of the three pairs' first step,
    # which stores the pair's decision row (12; which steps those are depends on the order the items come in)
    first, rest = [c for c in counts if c > 8], [c for c in counts if c <= 8]
    assert first == [12, 12, 12] and 5 in rest and rest.count(4) > 10, counts
    # each stored spread is its scores' standard deviation (ddof 1), kept with them
    for d in PairDecision.objects.filter(comparison__study=looked):
        assert d.spread == (pytest.approx(statistics.stdev(d.scores)) if len(d.scores) > 1 else None)
    # the pairs ahead were decided and the level pair stopped for futility: no open pair, none behind
    assert not marked(looked) and not looked.comparisons.filter(closed=False).exists()


@pytest.mark.slow(seconds=8)
def test_without_planned_looks_the_race_reads_the_spread_bound_and_the_pool_stored_with_the_decision(three):  # noqa: F811
    level = pairs_of(three)["sys-b-sys-c"].pk
    raced = rate_everything_racing(three, level)  # the marks checked against the rule at sd = sqrt(m (1 - m))
    assert raced and all(needs[level][1] > ITEMS for needs, _ in raced)
    assert set(PairDecision.objects.values_list("pool", flat=True)) == {ITEMS}  # each pair's tasks


def test_a_start_takes_the_pairs_ahead_first_and_fills_up_from_those_behind(three):  # noqa: F811
    lifecycle.do_update_settings(three, {"judgments_per_assignment": 4}, None)
    pairs = pairs_of(three)
    Comparison.objects.filter(pk=pairs["sys-b-sys-c"].pk).update(behind=True)
    rater = enrolment.do_create_rater_link(three, "first")
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        tasks = allocation._open_tasks(rater, 4)
    # plenty ahead: one read of the open tasks, all of pairs ahead
    assert len([q for q in queries if 'FROM "annotation_task"' in q["sql"] and "ORDER BY" in q["sql"]]) == 1
    assert len(tasks) == 4 and {t.comparison_id for t in tasks} <= {pairs["sys-a-sys-b"].pk, pairs["sys-a-sys-c"].pk}
    # every place of the pairs ahead is held but two: the start takes them, then fills up from the pair behind
    ahead = Task.objects.filter(comparison__behind=False, study=three).order_by("position")
    left = list(ahead.values_list("pk", flat=True)[:2])
    ahead.exclude(pk__in=left).update(taken=F("raters_required"))
    assignment = allocation.do_start_assignment(rater)
    assert assignment is not None
    got = list(assignment.places.values_list("task_id", "task__comparison__behind", "item_id"))
    assert sorted(pk for pk, behind, _ in got if not behind) == sorted(left)
    assert sum(behind for _, behind, _ in got) == 2 and len({item for *_, item in got}) == 4
    # nothing ahead is left: the next rater gets work from the pair behind, not "nothing left"
    later = allocation.do_start_assignment(enrolment.do_create_rater_link(three, "second"))
    assert later is not None and all(later.places.values_list("task__comparison__behind", flat=True))
    assert later.places.count() == 4


@pytest.mark.slow(seconds=4)
def test_no_pair_is_behind_once_the_study_stops_buying_decided_pairs_or_ranks(three, researcher_client):  # noqa: F811
    level = pairs_of(three)["sys-b-sys-c"]
    Comparison.objects.filter(pk=level.pk).update(behind=True)
    table = researcher_client.get(three.get_absolute_url()).content.decode().split('data-testid="decisions"')[1]
    row = table.split("sys-b vs sys-c")[1].split("</tr>")[0]
    assert f'undecided</strong> <span class="badge behind">behind</span> {BEHIND_WORDS}' in row
    assert BEHIND_WORDS not in table.split("sys-b vs sys-c")[0]
    # the help above the table says it in the same words, with the same tag
    help_text = researcher_client.get(three.get_absolute_url()).content.decode().split('id="decisions"')[1]
    assert f'<span class="badge behind">behind</span> is {BEHIND_WORDS}' in help_text.split("</p>")[0]
    lifecycle.do_update_settings(three, {"stop_when_decided": False}, None)
    assert not marked(three)
    lifecycle.do_update_settings(three, {"stop_when_decided": True}, None)
    Comparison.objects.filter(pk=level.pk).update(behind=True)
    lifecycle.do_update_settings(three, {"decision_goal": "ranking"}, None)
    assert three.selection_settings.ranks_only() and not marked(three)
