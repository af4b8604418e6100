"""Numbers typed into URLs and forms are ASCII digits or refused: "²" and "٣" pass str.isdigit but not int(), and
were a 500 on the crowd preview anyone can open."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.crowd import sites
from annotation.models import ExternalLink
from annotation.studies import enrolment
from annotation.text import whole_number


@pytest.mark.parametrize(
    "value, expected",
    [
        ("12", 12),
        (" 7 ", 7),
        ("0", 0),
        ("²", None),
        ("٣", None),
        ("-1", None),
        ("1.5", None),
        ("", None),
        (None, None),
        ("9" * 19, None),
    ],
)
def test_a_whole_number_is_ascii_digits_only(value, expected):
    assert whole_number(value) == expected


def test_odd_digits_in_urls_are_not_server_errors(client, researcher_client, study):
    link = ExternalLink.objects.create(study=study, platform="mturk")
    for seed in ("²", "٣", "9" * 5000):
        preview = client.get(link.path(), {"assignmentId": sites.PREVIEW_ASSIGNMENT, "hitId": "H1", "seed": seed})
        assert preview.status_code == 200
        assert researcher_client.get(reverse("study_preview", args=[study.pk]), {"seed": seed}).status_code == 200
    rater = enrolment.do_create_rater_link(study, "r")
    practice = client.get(reverse("rater_practice", args=[rater.token()]), {"feedback": "²"})
    assert practice.status_code == 302 and practice["Location"] == reverse("rater_home", args=[rater.token()])
