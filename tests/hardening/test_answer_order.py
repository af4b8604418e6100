"""Security pass, M5: only the pair on the rater's screen can be answered, so the minimum time per pair cannot be
skipped by answering pairs further on before they are shown."""

from __future__ import annotations

import datetime as dt
import re

from django.urls import reverse

from annotation.models import AssignmentPair, Judgment
from annotation.rating import allocation
from annotation.studies import lifecycle


def test_pairs_not_yet_shown_cannot_be_answered(client, study, rater):
    lifecycle.do_update_settings(study, {"min_seconds_per_pair": 5}, None)
    assignment = allocation.do_start_assignment(rater)
    url = reverse("rate", args=[rater.token(), assignment.pk])
    shown = int(re.search(r'name="pair" value="(\d+)"', client.get(url).content.decode()).group(1))
    ahead = list(assignment.pairs.order_by("position").values_list("pk", flat=True))[1:4]
    assert ahead == [shown + 1, shown + 2, shown + 3]
    for n, pk in enumerate(ahead):
        refused = client.post(url + "submit/", {"pair": pk, "key": f"ahead{n}", "choice": "first"})
        assert refused.status_code == 400 and "has not been shown to you yet" in refused.content.decode()
    assert not Judgment.objects.exists()
    # the pair on screen: refused while under the minimum time, accepted after it, with its time on task
    too_fast = client.post(url + "submit/", {"pair": shown, "key": "k1", "choice": "first"})
    assert too_fast.status_code == 400 and "at least 5 seconds" in too_fast.content.decode()
    AssignmentPair.objects.filter(pk=shown).update(shown_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=6))
    client.post(url + "submit/", {"pair": shown, "key": "k2", "choice": "first"})
    judgment = Judgment.objects.get()
    assert judgment.assignment_pair_id == shown and judgment.time_on_task_ms >= 6000
