"""The study page counts a rater's answers as the report does (a newcomer found a changed answer
counted twice in the raters table, 10 where the report said 9)."""

from __future__ import annotations

from annotation.elicitation import Answer
from annotation.models import Judgment
from annotation.rating import allocation, recording
from annotation.studies import monitoring


def test_a_changed_answer_counts_once(study, rater):
    assignment = allocation.do_start_assignment(rater)
    first, second = assignment.pairs.order_by("position")[:2]
    for index, pair in enumerate((first, second)):
        allocation.do_mark_shown(pair)
        recording.do_record_judgment(pair, idempotency_key=f"k{index}", answer=Answer(choice="first"))
    recording.do_revise_judgment(first, idempotency_key="k0-changed", answer=Answer(choice="second"))
    assert Judgment.objects.filter(rater=rater).count() == 3  # the replaced answer is kept, flagged revised
    counted = {r.external_id: r.n_judgments for r in monitoring.rater_progress(study)}
    assert counted["rater-1"] == Judgment.objects.filter(rater=rater, revised=False).count() == 2
