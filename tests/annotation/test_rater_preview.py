"""The previews: the researcher's "Preview as a rater" and a crowd site's preview show a whole
assignment's count ("Pair 1 of N" with the N raters get), random sides as different raters see them, and the
comment box and Skip, inactive."""

from __future__ import annotations

from html import escape

import pytest
from django.urls import reverse

from annotation.crowd import sites
from annotation.models import ExternalLink, Judgment, TaskPair
from annotation.rating import allocation
from annotation.studies import lifecycle


@pytest.fixture
def plain(study):
    """N = 1 (a plain pairwise study) with ten pairs per assignment, the comment box and Skip."""
    return lifecycle.do_update_settings(
        study,
        {"pairs_per_assignment": 1, "judgments_per_assignment": 10, "allow_comment": True, "allow_skip": True},
        None,
    )


def first_sides(page: str, study) -> set[bool]:
    """For the first pair on a page, whether output A was shown first."""
    first = TaskPair.objects.filter(task__study=study).order_by("task__position", "position").first()
    assert first is not None
    a, b = escape(first.pair.generation_a.text), escape(first.pair.generation_b.text)
    return {page.index(a) < page.index(b)}


def test_preview_as_a_rater_counts_the_pairs_of_a_whole_assignment(researcher_client, plain):
    size = allocation.pairs_per_bundle(plain)
    items = plain.items.count()
    page = researcher_client.get(reverse("study_preview", args=[plain.pk])).content.decode()
    assert f"Pair 1 of {min(size, items)}" in page and "Pair 1 of 1<" not in page


def test_preview_as_a_rater_shows_random_sides_across_seeds_and_keeps_them_from_pair_to_pair(researcher_client, plain):
    url = reverse("study_preview", args=[plain.pk])
    seen = set()
    for seed in range(12):
        seen |= first_sides(researcher_client.get(url, {"seed": seed}).content.decode(), plain)
    assert seen == {True, False}
    one = researcher_client.get(url, {"seed": 7}).content.decode()
    assert first_sides(one, plain) == first_sides(researcher_client.get(url, {"seed": 7}).content.decode(), plain)
    assert 'name="seed" value="7"' in one


def test_preview_as_a_rater_shows_the_comment_box_and_skip_inactive(researcher_client, plain):
    page = researcher_client.get(reverse("study_preview", args=[plain.pk])).content.decode()
    assert 'data-testid="comment"' in page and "Add a comment" in page
    assert 'id="id_comment" rows="2"' in page and "disabled" in page.split('id="id_comment"')[1].split(">")[0]
    skip = page.split('data-testid="skip"')[1].split(">")[0]
    assert "disabled" in skip and "Inactive in a preview" in page
    going_on = researcher_client.get(reverse("study_preview", args=[plain.pk]), {"n": 1, "choice": "first"})
    assert "Pair 2 of" in going_on.content.decode() and not Judgment.objects.exists()


def test_the_crowd_preview_shows_pair_1_of_n_random_sides_the_comment_box_and_skip(client, plain):
    link = ExternalLink.objects.create(study=plain, platform="mturk")
    seen = set()
    for seed in range(12):
        page = client.get(
            link.path(), {"assignmentId": sites.PREVIEW_ASSIGNMENT, "hitId": "H1", "seed": seed}
        ).content.decode()
        seen |= first_sides(page.split("What a pair looks like")[1], plain)
    assert seen == {True, False}
    assert f"Pair 1 of {min(allocation.pairs_per_bundle(plain), plain.items.count())}" in page
    assert "Add a comment" in page and 'data-testid="skip"' in page and "Inactive in a preview" in page


def test_the_crowd_preview_runs_a_fixed_number_of_queries(client, plain, django_assert_num_queries):
    # Workers browsing a site open it often: the link with its study, the assignment's pairs (three bounded queries
    # whatever the study's size), and what the page states (its size and pace, the open places).
    link = ExternalLink.objects.create(study=plain, platform="mturk")
    with django_assert_num_queries(9):
        client.get(link.path(), {"assignmentId": sites.PREVIEW_ASSIGNMENT, "hitId": "H1"})
