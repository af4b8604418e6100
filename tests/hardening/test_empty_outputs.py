"""Security pass: empty outputs are real data (phi-2's AlpacaEval answer on line 210): imported with a warning,
shown to raters as "(empty output)"."""

from __future__ import annotations

import json

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Study
from annotation.rating import allocation
from annotation.studies import enrolment


def test_a_study_with_an_empty_output_imports_and_raters_see_a_placeholder(researcher_client, client):
    lines = [{"id": "q1", "input": "Say something.", "outputs": {"phi-2": [""], "other": ["Something."]}}]
    upload = SimpleUploadedFile("s.jsonl", "".join(json.dumps(x) + "\n" for x in lines).encode())
    response = researcher_client.post(reverse("study_create"), {"name": "empty", "file": upload}, follow=True)
    page = response.content.decode()
    assert "1 empty output imported" in page and "line 1, field &#x27;outputs.phi-2[0]&#x27;" in page
    study = Study.objects.get(name="empty")
    rater = enrolment.do_create_rater_link(study, "r")
    assignment = allocation.do_start_assignment(rater)
    rating = client.get(reverse("rate", args=[rater.token(), assignment.pk])).content.decode()
    assert rating.count('data-testid="empty-output"') == 1 and "(empty output)" in rating
