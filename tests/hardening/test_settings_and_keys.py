"""Security pass, L4 and L5: the elicitation mode is frozen once raters have answered; a submission key reused on
another pair is refused, never acknowledged while nothing is stored."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.elicitation import Answer
from annotation.errors import ServiceError
from annotation.models import Judgment
from annotation.rating import allocation, recording
from annotation.studies import lifecycle


def test_the_elicitation_mode_is_frozen_once_raters_started(researcher_client, study, rater):
    allocation.do_start_assignment(rater)
    with pytest.raises(ServiceError, match="elicitation mode"):
        lifecycle.do_update_settings(study, {"elicitation": "response_set"}, None)
    study.refresh_from_db()
    assert study.elicitation == "forced_choice"
    page = researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    [select] = re.findall(r'<select[^>]*name="elicitation"[^>]*>', page)
    assert "disabled" in select
    lifecycle.do_update_settings(study, {"question": "Which answer is more helpful?"}, None)  # wording stays editable


def test_a_key_reused_on_another_pair_is_refused_not_acknowledged(client, study, rater):
    assignment = allocation.do_start_assignment(rater)
    first, second = assignment.pairs.order_by("position")[:2]
    allocation.do_mark_shown(first)
    recording.do_record_judgment(first, idempotency_key="same", answer=Answer(choice="first"))
    allocation.do_mark_shown(second)
    with pytest.raises(ServiceError, match="already used for another pair"):
        recording.do_record_judgment(second, idempotency_key="same", answer=Answer(choice="second"))
    url = reverse("rate", args=[rater.token(), assignment.pk])
    client.get(url)  # the page shows the second pair
    refused = client.post(url + "submit/", {"pair": second.pk, "key": "same", "choice": "second"})
    assert refused.status_code == 400 and "already used for another pair" in refused.content.decode()
    assert list(Judgment.objects.values_list("assignment_pair_id", flat=True)) == [first.pk]
