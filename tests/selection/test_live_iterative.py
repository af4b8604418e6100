"""Iterative DiffUse live: a simulated rater judges what is released until the stopping rule stops
the loop; the released items must be exactly those of Algorithm 1 run offline on the same tree."""

from __future__ import annotations

import json

import numpy as np
import pytest

from annotation.elicitation import Answer
from annotation.models import Assignment, Judgment, Task
from annotation.rating import allocation, recording
from annotation.studies import creation, enrolment, lifecycle
from selection import live
from selection.core.diffuse import Dendrogram, IterativeDiffUse
from selection.models import IterativeRun
from selection.services import do_build_selection_context

TOPICS = [
    "market",
    "falcon",
    "ferry",
    "library",
    "bakery",
    "river",
    "solar farm",
    "museum",
    "hedgehog",
    "flood",
    "vaccine",
    "sunset",
    "climate",
    "interest rate",
    "autumn leaves",
    "kitchen fire",
    "bike share",
    "battery",
    "sleep study",
    "lead sensor",
    "council vote",
    "bronze artefacts",
    "peregrine",
    "food bank",
]
STYLES = [
    "A short note on the {t}.",
    "Everything you need to know about the {t}, in detail.",
    "The {t}: a story in three parts.",
    "Why the {t} matters to the town.",
]


@pytest.fixture
def iterative_study(researcher):
    lines = []
    for i, t in enumerate(TOPICS):
        lines.append(
            json.dumps(
                {
                    "id": f"it{i:02d}",
                    "input": f"Describe the {t}.",
                    "outputs": {
                        "alpha": [STYLES[i % 4].format(t=t), STYLES[(i + 1) % 4].format(t=t)],
                        "beta": [f"{t}?", f"I do not know much about the {t}, sorry."],
                    },
                }
            )
        )
    study = creation.do_create_study(researcher, "live", ("\n".join(lines) + "\n").encode(), "l.jsonl")
    lifecycle.do_update_settings(
        study,
        {
            "selection_method": "diffuse-iterative",
            "risk": 0.05,
            "min_n": 3,
            "budget": 14,
            "raters_per_item": 1,
            "pairs_per_assignment": 2,
            "judgments_per_assignment": 2,
        },
        None,
    )  # an item each
    return study


def oracle_of(external_id: str) -> str:
    return "b" if int(external_id[2:]) % 4 == 0 else "a"  # alpha wins three items in four


def judge_like_the_oracle(assignment: Assignment) -> None:
    for n, pair in enumerate(assignment.pairs.select_related("pair__item")):
        assert pair.pair is not None  # a study pair (an attention check has a gold pair instead)
        label = oracle_of(pair.pair.item.external_id)
        shown = "first" if (label == "a") == pair.a_shown_first else "second"
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key=f"{assignment.pk}-{n}", answer=Answer(choice=shown))


def test_the_live_loop_releases_what_algorithm_1_releases_and_stops(iterative_study):
    run = IterativeRun.objects.get(study=iterative_study)
    assert Task.objects.filter(study=iterative_study).count() == 3  # min_n representatives first

    rater_number = 0
    while True:
        rater_number += 1
        rater = enrolment.do_create_rater_link(iterative_study, f"r{rater_number}")
        assignment = allocation.do_start_assignment(rater)
        if assignment is None:
            break
        judge_like_the_oracle(assignment)
        assert rater_number < 40, "the loop should have stopped"

    # The same algorithm offline, with the oracle as labels, on the stored tree.
    items = [iterative_study.items.get(pk=pk) for pk in run.item_ids]
    vectors = do_build_selection_context(iterative_study, run.comparison, items).vectors
    offline = IterativeDiffUse(Dendrogram(vectors, run.linkage_matrix()), risk=0.05, min_n=3, budget=14)
    while True:
        for i in offline.to_annotate():
            offline.record(i, oracle_of(items[i].external_id))
        if not offline.advance():
            break
    released = list(
        Task.objects.filter(study=iterative_study).order_by("position").values_list("item__external_id", flat=True)
    )
    assert released == [items[i].external_id for i in offline.released]

    run.refresh_from_db()
    assert run.outcome == offline.outcome
    status = live.live_status(run)
    assert status.state == offline.outcome and status.labelled == len(offline.labels)
    if offline.outcome == "decided":
        assert status.leader == "alpha" and status.risk <= 0.05
    superseded = set(
        Judgment.objects.filter(study=iterative_study, superseded=True).values_list(
            "pair__item__external_id", flat=True
        )
    )
    assert superseded == {items[i].external_id for i in offline.superseded}


def answer(assignment: Assignment, labels: list[str]) -> None:
    """Answer the assignment's pairs with these model-coordinate labels ("a", "b", "tie")."""
    for n, (pair, label) in enumerate(zip(assignment.pairs.all(), labels, strict=True)):
        shown = "tie" if label == "tie" else ("first" if (label == "a") == pair.a_shown_first else "second")
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key=f"{assignment.pk}-{n}", answer=Answer(choice=shown))


def test_the_live_loop_and_the_report_name_the_same_winner(iterative_study):
    from analytics.report.assembly import study_report

    lifecycle.do_update_settings(iterative_study, {"raters_per_item": 3}, None)
    run = IterativeRun.objects.get(study=iterative_study)
    starts = [
        allocation.do_start_assignment(enrolment.do_create_rater_link(iterative_study, n))
        for n in [f"r{i}" for i in range(9)]
    ]
    first_task = [a for a in starts if task_of(a) == task_of(starts[0])]
    assert len(first_task) == 3
    # Rater 1 prefers alpha on both pairs; raters 2 and 3 prefer beta once and see no difference once.
    # By rater (sign of Eq. 7 per rating set): alpha, beta, beta -> beta. Summing every rating instead
    # (-2 + 1 + 1 = 0) would call it a tie.
    for assignment, labels in zip(first_task, (["a", "a"], ["b", "tie"], ["tie", "b"]), strict=True):
        answer(assignment, labels)
    item = first_task[0].places.get().item
    assert live.item_labels(run.comparison) == {item.pk: "b"}
    [stopping] = study_report(iterative_study).stopping
    assert stopping.items == {item.external_id: "beta"}
    assert stopping.pool == len(run.item_ids) == 24  # the candidates the selection drew from


def test_an_item_is_labelled_only_when_all_its_raters_are_done(iterative_study):
    lifecycle.do_update_settings(iterative_study, {"raters_per_item": 2}, None)
    run = IterativeRun.objects.get(study=iterative_study)
    starts = [
        allocation.do_start_assignment(enrolment.do_create_rater_link(iterative_study, n)) for n in ("x", "y", "z")
    ]
    first = starts[0]
    assert len({task_of(a) for a in starts}) == 3  # one rater on each representative first
    judge_like_the_oracle(first)
    assert live.item_labels(run.comparison) == {}
    tasks_before = Task.objects.count()
    second = allocation.do_start_assignment(enrolment.do_create_rater_link(iterative_study, "w"))
    assert task_of(second) == task_of(first)  # every task has one rater: the first open place comes next
    judge_like_the_oracle(second)
    item = first.places.get().item
    assert live.item_labels(run.comparison) == {item.pk: oracle_of(item.external_id)}
    assert Task.objects.count() == tasks_before  # other representatives still wait for their judgments
    assert np.isfinite(live.live_status(run).risk)


def test_a_completed_assignment_advances_the_loop_without_vectors_or_a_tree(iterative_study, monkeypatch):
    # The schedule is stored at plan time: completing an assignment reads labels and counts only.
    def no_vectors(*args, **kwargs):
        raise AssertionError("the live loop rebuilt the difference vectors")

    monkeypatch.setattr(live, "do_build_selection_context", no_vectors)
    run = IterativeRun.objects.get(study=iterative_study)
    assert run.schedule["initial"] and run.schedule["n_items"] == 24
    tasks = Task.objects.filter(study=iterative_study).count()
    for n in range(3):  # the three first representatives
        assignment = allocation.do_start_assignment(enrolment.do_create_rater_link(iterative_study, f"s{n}"))
        judge_like_the_oracle(assignment)
    assert Task.objects.filter(study=iterative_study).count() > tasks  # the next split was released
    assert live.live_status(run).labelled == 3


def test_a_run_stored_before_schedules_computes_its_schedule_once(iterative_study):
    run = IterativeRun.objects.get(study=iterative_study)
    stored = run.schedule
    IterativeRun.objects.filter(pk=run.pk).update(schedule={})
    run.refresh_from_db()
    assert live.live_status(run).released == 3
    run.refresh_from_db()
    assert run.schedule == stored


def task_of(assignment: Assignment) -> int:
    return assignment.places.get().task_id


def test_a_bundled_assignment_labels_each_of_its_items(iterative_study):
    lifecycle.do_update_settings(iterative_study, {"judgments_per_assignment": 6}, None)
    run = IterativeRun.objects.get(study=iterative_study)
    assignment = allocation.do_start_assignment(enrolment.do_create_rater_link(iterative_study, "b"))
    items = list(assignment.places.select_related("item").order_by("id"))
    assert len(items) == 3  # the three first representatives, two pairs each, in one assignment
    judge_like_the_oracle(assignment)
    assert live.item_labels(run.comparison) == {p.item.pk: oracle_of(p.item.external_id) for p in items}
