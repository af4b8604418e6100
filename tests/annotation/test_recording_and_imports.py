"""Services: a study file or a judgments file imported all or nothing, and a rater's answer recorded exactly once, in
model coordinates, completing its assignment once."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connections

from annotation.elicitation import Answer
from annotation.errors import ServiceError
from annotation.exchange import exports
from annotation.exchange.rules import FormatError
from annotation.models import Assignment, AssignmentPair, Item, Judgment, Rater, Study
from annotation.rating import allocation, imports, recording
from annotation.studies import creation, enrolment, lifecycle
from tests.conftest import answer_all, study_jsonl


def test_a_bad_file_creates_nothing(researcher):
    data = study_jsonl() + b'{"id": "item-0", "input": "dup", "outputs": {"sys-a": ["x"], "sys-b": ["y"]}}\n'
    with pytest.raises(FormatError, match="duplicate id 'item-0'"):
        creation.do_create_study(researcher, "broken", data, "b.jsonl")
    assert not Study.objects.exists() and not Item.objects.exists()


def test_study_names_are_unique(study, researcher):
    with pytest.raises(FormatError, match="you already have a study named 'small'"):
        creation.do_create_study(researcher, "small", study_jsonl(), "s.jsonl")


def test_a_judgment_is_recorded_once_per_key(study, rater):
    assignment = allocation.do_start_assignment(rater)
    pair = assignment.pairs.first()
    allocation.do_mark_shown(pair)  # as the rating page does before an answer
    first = recording.do_record_judgment(pair, idempotency_key="k1", answer=Answer(choice="first"))
    allocation.do_mark_shown(pair)  # as the rating page does before an answer
    again = recording.do_record_judgment(pair, idempotency_key="k1", answer=Answer(choice="first"))
    assert first.created and not again.created and again.judgment.pk == first.judgment.pk
    assert Judgment.objects.count() == 1


def test_a_second_answer_to_the_same_pair_does_not_count_twice(study, rater):
    assignment = allocation.do_start_assignment(rater)
    pair = assignment.pairs.first()
    allocation.do_mark_shown(pair)  # as the rating page does before an answer
    recording.do_record_judgment(pair, idempotency_key="k1", answer=Answer(choice="first"))
    allocation.do_mark_shown(pair)  # as the rating page does before an answer
    repeat = recording.do_record_judgment(pair, idempotency_key="k2", answer=Answer(choice="second"))
    assert not repeat.created and repeat.judgment.choice is not None
    assert Judgment.objects.count() == 1


@pytest.mark.parametrize(
    ("a_first", "shown", "model"),
    [(True, "first", "a"), (False, "first", "b"), (True, "second", "b"), (False, "second", "a")],
)
def test_choices_are_stored_in_model_coordinates(study, rater, a_first, shown, model):
    assignment = allocation.do_start_assignment(rater)
    pair = assignment.pairs.first()
    pair.a_shown_first = a_first
    pair.save()
    allocation.do_mark_shown(pair)
    allocation.do_mark_shown(pair)  # as the rating page does before an answer
    judgment = recording.do_record_judgment(
        pair, idempotency_key="k", answer=Answer(choice=shown), client_time_ms=1234
    ).judgment
    assert judgment.choice == model and judgment.a_shown_first is a_first
    assert judgment.client_time_ms == 1234 and judgment.time_on_task_ms is not None
    assert judgment.rater == rater and judgment.assignment == assignment


def test_tie_is_refused_when_the_study_has_no_tie(study, rater):
    lifecycle.do_update_settings(study, {"allow_tie": False}, None)
    pair = allocation.do_start_assignment(rater).pairs.first()
    with pytest.raises(ServiceError, match="not offered"):
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key="k", answer=Answer(choice="tie"))
    with pytest.raises(ServiceError, match="Choose one"):
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key="k", answer=Answer(choice=None))
    assert not Judgment.objects.exists()


def test_response_set_elicitation_stores_the_set(study, rater):
    lifecycle.do_update_settings(study, {"elicitation": "response_set"}, None)
    pair = allocation.do_start_assignment(rater).pairs.first()
    with pytest.raises(ServiceError, match="at least one"):
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key="k", answer=Answer(response=frozenset()))
    both = Answer(response=frozenset(["first", "second"]))
    allocation.do_mark_shown(pair)  # as the rating page does before an answer
    judgment = recording.do_record_judgment(pair, idempotency_key="k", answer=both).judgment
    assert judgment.choice is None and judgment.response_set == ["a", "b"]


def test_paired_elicitation_adds_the_choice_to_the_set(study, rater):
    lifecycle.do_update_settings(study, {"elicitation": "paired"}, None)
    pair = allocation.do_start_assignment(rater).pairs.first()
    pair.a_shown_first = False
    pair.save()
    answer = Answer(choice="first", response=frozenset())
    allocation.do_mark_shown(pair)  # as the rating page does before an answer
    judgment = recording.do_record_judgment(pair, idempotency_key="k", answer=answer).judgment
    assert judgment.choice == "b" and judgment.response_set == ["b"]
    other = allocation.do_start_assignment(rater).pairs.all()[1]
    with pytest.raises(ServiceError, match="no preference"):
        allocation.do_mark_shown(other)  # as the rating page does before an answer
        recording.do_record_judgment(other, idempotency_key="k2", answer=Answer(choice="tie", response=frozenset()))


def test_the_last_answer_completes_the_assignment(study, rater):
    assignment = allocation.do_start_assignment(rater)
    answer_all(assignment)
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.COMPLETED and assignment.completed is not None
    assert len(assignment.completion_code) == 10


def test_the_answer_counter_completes_once_and_only_with_the_last_answer(study, rater):
    assignment = allocation.do_start_assignment(rater)
    pairs = list(assignment.pairs.order_by("position"))
    assert assignment.n_pairs == len(pairs) == 5 and assignment.answered == 0
    for index, pair in enumerate(pairs[:-1]):
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key=f"k{index}", answer=Answer(choice="first"))
        stored = Assignment.objects.get(pk=assignment.pk)
        assert (stored.answered, stored.status) == (index + 1, Assignment.Status.ACTIVE)
    # a repeat (same key, or the same pair again) counts nothing
    allocation.do_mark_shown(pairs[0])  # as the rating page does before an answer
    recording.do_record_judgment(pairs[0], idempotency_key="k0", answer=Answer(choice="first"))
    recording.do_record_judgment(
        Assignment.objects.get(pk=assignment.pk).pairs.order_by("position").first(),
        idempotency_key="other",
        answer=Answer(choice="second"),
    )
    assert Assignment.objects.get(pk=assignment.pk).answered == 4
    allocation.do_mark_shown(pairs[-1])  # as the rating page does before an answer
    last = recording.do_record_judgment(pairs[-1], idempotency_key="k-last", answer=Answer(choice="first"))
    stored = Assignment.objects.get(pk=assignment.pk)
    assert last.created and (stored.answered, stored.status) == (5, Assignment.Status.COMPLETED)
    assert stored.completed == last.judgment.created


@pytest.mark.django_db(transaction=True)
def test_racing_submits_of_the_last_pairs_complete_the_assignment_exactly_once(researcher):
    study = creation.do_create_study(researcher, "race", study_jsonl(1), "r.jsonl")
    rater = enrolment.do_create_rater_link(study, "racer")
    assignment = allocation.do_start_assignment(rater)
    pairs = list(assignment.pairs.order_by("position"))
    for index, pair in enumerate(pairs[:-2]):
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key=f"k{index}", answer=Answer(choice="first"))
    barrier = threading.Barrier(2)
    completed = []

    def submit(pair):
        try:
            barrier.wait()
            fresh = AssignmentPair.objects.select_related("assignment__study").get(pk=pair.pk)
            allocation.do_mark_shown(fresh)  # as the rating page does before an answer
            recorded = recording.do_record_judgment(
                fresh, idempotency_key=f"race-{pair.pk}", answer=Answer(choice="tie")
            )
            completed.append(fresh.assignment.status == Assignment.Status.COMPLETED and recorded.created)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=submit, args=(p,)) for p in pairs[-2:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = Assignment.objects.get(pk=assignment.pk)
    assert (stored.answered, stored.status) == (5, Assignment.Status.COMPLETED)
    assert sorted(completed) == [False, True]  # one of the two saw its answer complete the assignment
    assert Judgment.objects.filter(assignment=assignment).count() == 5


def test_export_then_import_is_lossless(study, researcher):
    rater = enrolment.do_create_rater_link(study, "human-1")
    answer_all(allocation.do_start_assignment(rater), choice="second")
    judge_line = {
        "item": "item-1",
        "system_a": "sys-b",
        "sample_a": 2,
        "system_b": "sys-a",
        "sample_b": 0,
        "shown_first": "sys-a",
        "rater": "gpt-judge",
        "rater_kind": "judge",
        "choice": "tie",
        "response_set": ["sys-a", "sys-b"],
        "probability_a": 0.5,
        "created": "2026-01-01T12:00:00Z",
        "prompt_version": "v2",
    }
    imports.do_import_judgments(study, (json.dumps(judge_line) + "\n").encode(), "j.jsonl")
    exported = list(exports.judgment_lines(study))
    assert len(exported) == 6
    copy = creation.do_create_study(researcher, "copy", study_jsonl(), "s.jsonl")
    data = "".join(json.dumps(line) + "\n" for line in exported).encode()
    assert imports.do_import_judgments(copy, data, "e.jsonl") == imports.ImportSummary(created=6, skipped=0)
    assert list(exports.judgment_lines(copy)) == exported
    assert imports.do_import_judgments(copy, data, "e.jsonl") == imports.ImportSummary(created=0, skipped=6)


def test_csv_export_reimports_identically(study, researcher):
    import csv
    import io

    from annotation.exchange.judgment_files import JUDGMENT_CSV_COLUMNS, judgment_csv_row

    answer_all(allocation.do_start_assignment(enrolment.do_create_rater_link(study, "h")), choice="tie")
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(JUDGMENT_CSV_COLUMNS)
    for line in exports.judgment_lines(study):
        writer.writerow(judgment_csv_row(line))
    copy = creation.do_create_study(researcher, "copy", study_jsonl(), "s.jsonl")
    imports.do_import_judgments(copy, buffer.getvalue().encode(), "e.csv")
    assert list(exports.judgment_lines(copy)) == list(exports.judgment_lines(study))


def test_a_bad_judgments_file_changes_nothing(study):
    good = {
        "item": "item-0",
        "system_a": "sys-a",
        "system_b": "sys-b",
        "shown_first": "sys-a",
        "rater": "j",
        "rater_kind": "judge",
        "choice": "sys-a",
    }
    bad = dict(good, item="item-99")
    data = (json.dumps(good) + "\n" + json.dumps(bad) + "\n").encode()
    with pytest.raises(FormatError, match="line 2, field 'item': unknown item 'item-99'"):
        imports.do_import_judgments(study, data, "j.jsonl")
    assert not Judgment.objects.exists() and not Rater.objects.filter(external_id="j").exists()


def test_a_skipped_pair_takes_no_answer_afterwards(study, rater):
    """A skip, then the old form's answer (a second tab): refused, the pair counted once, no judgment."""
    lifecycle.do_update_settings(study, {"allow_skip": True}, None)
    assignment = allocation.do_start_assignment(rater)
    pair = assignment.pairs.first()
    allocation.do_mark_shown(pair)
    recording.do_skip_item(pair, idempotency_key="skip", reason="cannot_judge")
    skipped = Assignment.objects.get(pk=assignment.pk).answered
    pair = AssignmentPair.objects.select_related("assignment__study").get(pk=pair.pk)
    with pytest.raises(ServiceError, match="You skipped this item"):
        recording.do_record_judgment(pair, idempotency_key="late", answer=Answer(choice="first"))
    assert Assignment.objects.get(pk=assignment.pk).answered == skipped and not Judgment.objects.exists()
