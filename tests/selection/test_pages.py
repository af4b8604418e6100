"""Selection pages over HTTP: separability with its background job on the real database queue, the
live status of iterative DiffUse, and the SVG histogram."""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Job
from annotation.studies import creation, lifecycle
from selection.models import SeparabilityRun
from selection.plots import histogram_svg


def run_worker() -> None:
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)


@pytest.mark.parametrize("name", ["separability", "live_selection"])
def test_selection_pages_are_private(client, study, other_researcher, name):
    url = reverse(name, args=[study.pk])
    assert client.get(url).status_code == 302
    client.force_login(other_researcher)
    assert client.get(url).status_code == 404
    assert client.post(reverse("separability_start", args=[study.pk]), {"metric": "rouge1"}).status_code == 404
    assert not Job.objects.exists()


def test_the_separability_page_explains_what_to_do_first(researcher_client, study):
    response = researcher_client.get(reverse("separability", args=[study.pk]))
    # the page opens on the study's metric: cosine-la for a new study
    assert b"No cosine-la separability yet" in response.content
    assert b"Compute cosine-la separability" in response.content


@pytest.mark.django_db(transaction=True)  # the worker closes connections, as in production
def test_separability_runs_on_the_database_queue_and_shows_a_histogram(researcher_client, study):
    response = researcher_client.post(reverse("separability_start", args=[study.pk]), {"metric": "rouge1-la"})
    assert response.status_code == 302
    job = Job.objects.get()
    assert job.status == "queued"
    waiting = researcher_client.get(reverse("job_progress", args=[study.pk, job.pk]), HTTP_HX_REQUEST="true")
    assert b'hx-trigger="every 1s"' in waiting.content
    run_worker()
    job.refresh_from_db()
    assert job.status == "done" and job.percent == 100
    assert SeparabilityRun.objects.filter(metric="rouge1-la").count() == 1
    done = researcher_client.get(
        reverse("job_progress", args=[study.pk, job.pk]) + "?was=active", HTTP_HX_REQUEST="true"
    )
    assert done["HX-Refresh"] == "true"
    page = researcher_client.get(reverse("separability", args=[study.pk]) + "?metric=rouge1-la")
    content = page.content.decode()
    assert "<svg" in content and "4 of 4 items" in content
    assert "Most separable" in content and "item-0" in content


@pytest.mark.django_db(transaction=True)  # the worker closes connections, as in production
def test_a_failed_job_says_what_went_wrong(researcher_client, study, monkeypatch):
    from selection import services

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(services, "do_compute_separability", broken)
    researcher_client.post(reverse("separability_start", args=[study.pk]), {"metric": "bleu"})
    run_worker()
    job = Job.objects.get()
    assert job.status == "failed" and "RuntimeError: disk full" in job.message
    page = researcher_client.get(reverse("separability", args=[study.pk]) + "?metric=bleu")
    assert b"The computation failed" in page.content


@pytest.mark.django_db(transaction=True)  # the worker closes connections, as in production
def test_the_embedding_progress_is_recorded(researcher_client, study):
    researcher_client.post(reverse("separability_start", args=[study.pk]), {"metric": "cosine"})
    run_worker()
    job = Job.objects.get()
    assert (job.status, job.done, job.total) == ("done", 40, 40)  # 4 items x 2 systems x 5 samples


def test_the_live_page_shows_the_stopping_status(researcher_client, researcher):
    topics = ["market", "falcon", "ferry", "library", "bakery", "river", "solar", "museum"]
    lines = [
        json.dumps(
            {
                "id": t,
                "input": f"About the {t}.",
                "outputs": {"a": [f"The {t} opened.", f"A {t} story."], "b": [f"{t}?", f"No idea about the {t}."]},
            }
        )
        for t in topics
    ]
    study = creation.do_create_study(researcher, "it", ("\n".join(lines) + "\n").encode(), "i.jsonl")
    empty = researcher_client.get(reverse("live_selection", args=[study.pk]))
    assert b"every item (no budget)" in empty.content and b"stopping status" not in empty.content
    assert b"8 of 8 candidate items released to raters" in empty.content
    assert b'data-testid="no-delta"' in empty.content  # the empty column says what delta needs
    lifecycle.do_update_settings(study, {"selection_method": "diffuse-iterative", "min_n": 3}, None)
    page = researcher_client.get(reverse("live_selection", args=[study.pk])).content.decode()
    assert "a vs b" in page and "undecided" in page and "0 / 3 / 200" in page
    detail = researcher_client.get(study.get_absolute_url()).content.decode()
    assert "Iterative DiffUse: stopping status" in detail


def test_histogram_svg_counts_and_escapes():
    svg = histogram_svg(np.array([0.1, 0.1, 0.9, np.nan]), bins=2, label="<delta>")
    assert svg.count("<rect") == 2 and "2 items" in svg and "1 item<" in svg
    assert "&lt;delta&gt;" in svg and "<delta>" not in svg
    assert histogram_svg(np.array([np.nan])) == ""


@pytest.mark.django_db(transaction=True)  # the worker closes connections, as in production
def test_the_study_page_embeds_in_the_background_with_progress(researcher_client, study):
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert "0 of 40 distinct outputs are embedded" in page and "Embed the outputs now" in page
    researcher_client.post(reverse("embedding_start", args=[study.pk]))
    job = Job.objects.get(kind="embed")
    assert "Waiting for the worker" in researcher_client.get(study.get_absolute_url()).content.decode() or job.active
    run_worker()
    job.refresh_from_db()
    assert (job.status, job.done, job.total) == ("done", 40, 40)
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert "40 of 40 distinct outputs are embedded" in page and "Embed the outputs now" not in page


def test_the_embed_study_command(study):
    from io import StringIO

    out = StringIO()
    call_command("embed_study", "--study", "small", stdout=out, stderr=StringIO())
    assert "40 of 40 distinct outputs embedded" in out.getvalue()


def test_a_k1_study_explains_before_starting_that_separability_is_undefined(researcher_client, researcher):
    from tests.conftest import study_jsonl

    study = creation.do_create_study(researcher, "k1", study_jsonl(3, k=1), "k1.jsonl")
    page = researcher_client.get(reverse("separability", args=[study.pk])).content.decode()
    assert 'data-testid="k1-notice"' in page and "K ≥ 2" in page and "separability_start" not in page
    assert reverse("separability_start", args=[study.pk]) not in page
    refused = researcher_client.post(reverse("separability_start", args=[study.pk]), {"metric": "rouge1"}, follow=True)
    assert "needs at least two outputs per system" in refused.content.decode() and not Job.objects.exists()


def test_separability_examples_name_the_systems_and_show_the_input(researcher_client, study):
    from selection import services as selection_services

    selection_services.do_compute_separability(study, "rouge1")
    page = researcher_client.get(reverse("separability", args=[study.pk]) + "?metric=rouge1").content.decode()
    assert "<h4>sys-a <span" in page and "<h4>sys-b <span" in page and "(5 samples)" in page
    assert "Input text number" in page and 'data-testid="k1-notice"' not in page
