"""The report is computed once per data version in the background and served from the stored result; new
data marks it stale (the page says so and a refresh is queued once)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from analytics import stored
from analytics.models import StoredReport
from analytics.populations import Population
from analytics.report import assembly
from annotation.models import Job
from annotation.rating import allocation, recording
from tests.analytics.test_report import imported
from tests.conftest import answer_all, refresh_reports


def test_missing_then_fresh_then_stale_on_a_new_judgment(study, rater):
    served = stored.do_serve(study, Population())
    assert served.state == "missing" and served.job.status == "queued"
    assert stored.do_serve(study, Population()).job == served.job  # one refresh at a time
    assert refresh_reports() == 1
    assert stored.do_serve(study, Population()).state == "fresh"
    answer_all(allocation.do_start_assignment(rater))
    stale = stored.do_serve(study, Population())
    assert stale.state == "stale" and stale.report["judgments"]["total"] == 0  # the old numbers, until refreshed
    refresh_reports()
    fresh = stored.do_serve(study, Population())
    assert fresh.state == "fresh" and fresh.report["judgments"]["total"] == 5


def test_settings_separability_and_screening_change_the_version(study, rater):
    answer_all(allocation.do_start_assignment(rater))
    version = stored.data_version(study)
    study.analysis_settings.elo_k = 8
    study.analysis_settings.save()
    assert stored.data_version(study) != version
    version = stored.data_version(study)
    rater.screened_out = True
    rater.save()
    assert stored.data_version(study) != version
    version = stored.data_version(study)
    from selection import services as selection_services

    selection_services.do_compute_separability(study, "rouge1")
    assert stored.data_version(study) != version


def test_pages_csv_and_api_never_recompute(monkeypatch, researcher_client, study, rater):
    answer_all(allocation.do_start_assignment(rater))
    researcher_client.get(reverse("report", args=[study.pk]))
    refresh_reports()

    def recompute(*args, **kwargs):
        raise AssertionError("the report was recomputed in a request")

    monkeypatch.setattr(assembly, "compute", recompute)
    for url in (
        reverse("report", args=[study.pk]),
        reverse("report_table", args=[study.pk, "stopping"]),
        reverse("report_api", args=[study.pk]),
    ):
        assert researcher_client.get(url).status_code == 200
    imported(study, [("h9", "human", "sys-a", "sys-a")])  # new data: stale, still served without recomputing
    page = researcher_client.get(reverse("report", args=[study.pk])).content.decode()
    assert 'data-testid="report-state-stale"' in page and "New data since this report was computed" in page
    assert researcher_client.get(reverse("report_table", args=[study.pk, "stopping"])).status_code == 200


def test_the_status_fragment_reloads_the_page_once_fresh(researcher_client, study):
    url = reverse("report_status", args=[study.pk])
    pending = researcher_client.get(url, headers={"HX-Request": "true"})
    assert "HX-Refresh" not in pending and 'hx-trigger="every 2s"' in pending.content.decode()
    refresh_reports()
    done = researcher_client.get(url, headers={"HX-Request": "true"})
    assert done["HX-Refresh"] == "true"


def test_the_csv_waits_for_the_first_report(researcher_client, study):
    response = researcher_client.get(reverse("report_table", args=[study.pk, "stopping"]))
    assert response.status_code == 302 and response["Location"].startswith(reverse("report", args=[study.pk]))


def test_the_csv_of_a_report_stored_by_an_older_format_waits_for_its_refresh(researcher_client, study):
    researcher_client.get(reverse("report", args=[study.pk]))
    refresh_reports()
    stored_report = StoredReport.objects.get(study=study)
    del stored_report.data["rater_reliability"]  # a section older reports did not have
    stored_report.save()
    assert stored.readable(stored_report.data) is None
    response = researcher_client.get(reverse("report_table", args=[study.pk, "stopping"]))
    assert response.status_code == 302 and response["Location"].startswith(reverse("report", args=[study.pk]))


def test_a_failed_refresh_is_shown(monkeypatch, researcher_client, study):
    researcher_client.get(reverse("report", args=[study.pk]))

    def broken(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(assembly, "compute", broken)
    with pytest.raises(ValueError):
        refresh_reports()
    assert Job.objects.get(kind="report").status == "failed"
    page = researcher_client.get(reverse("report", args=[study.pk])).content.decode()
    assert "Computing the report failed" in page and "boom" in page


@pytest.mark.django_db(transaction=True)  # the worker closes connections, as in production
def test_the_real_worker_stores_the_report(researcher_client, study, rater):
    answer_all(allocation.do_start_assignment(rater))
    researcher_client.get(reverse("report", args=[study.pk]) + "?population=all")
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    report = StoredReport.objects.get(study=study, population_key="all")
    assert report.data["judgments"]["total"] == 5 and report.version == stored.data_version(study)
    assert Job.objects.get(kind="report").status == "done"


def test_finished_refreshes_do_not_pile_up(study, rater):
    assignment = allocation.do_start_assignment(rater)
    for n, pair in enumerate(assignment.pairs.all()):
        stored.do_serve(study, Population())
        refresh_reports()
        from annotation.elicitation import Answer

        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key=f"k{n}", answer=Answer(choice="first"))
    assert Job.objects.filter(kind="report").count() == 1


def test_filtered_views_queue_at_most_three_refreshes_per_study(researcher_client, judged_study):
    """Every filter variant once queued a full refresh on the single worker (40 GETs delayed another
    researcher's judge by 65 s). At most three refreshes of one study are queued at once; a fourth view says it
    waits, and is queued when one is done."""
    from django.urls import reverse

    from analytics import stored
    from annotation.models import Job

    url = reverse("report", args=[judged_study.pk])
    views = [
        {},
        {"population": "all"},
        {"source": "import"},
        {"screened": "include"},
        {"population": "all", "source": "import"},
    ]
    pages = [researcher_client.get(url, query).content.decode() for query in views]
    assert Job.objects.filter(study=judged_study, kind=stored.JOB_KIND).count() == stored.MAX_QUEUED_REFRESHES
    assert all('data-testid="refresh-waiting"' in page for page in pages[stored.MAX_QUEUED_REFRESHES :])
    first = Job.objects.filter(study=judged_study, kind=stored.JOB_KIND).order_by("pk").first()
    Job.objects.filter(pk=first.pk).update(status=Job.Status.DONE)
    researcher_client.get(reverse("report_status", args=[judged_study.pk]), views[3])  # the page's poll
    assert Job.objects.filter(study=judged_study, kind=stored.JOB_KIND, status="queued").count() == 3
