"""The report, computed once per data version in the background and served from the database.

A report's *data version* is a fingerprint of everything it is computed from: the study's judgments (count,
newest id, revised and superseded counts), which raters are screened out, the analysis settings (the one
map ``analysis_parameters``), the separability runs and the selection's pools. A new judgment changes it,
so the stored report is then *stale*: pages keep serving it, say so, and a refresh job (django-tasks, like
the other jobs) computes the new one. Reading the version is a handful of aggregate queries on indexed
columns; the bootstraps run only in the worker.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import time
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from analytics import populations, presentation
from analytics.models import StoredReport
from analytics.populations import Population
from analytics.report import assembly
from analytics.report.data import analysis_parameters
from annotation import jobs
from annotation.models import Comparison, Item, Job, Judgment, Rater, Study
from selection.models import IterativeRun, SelectionRun, SeparabilityRun

JOB_KIND = "report"
# The report's own format: raised when what a report holds or how its page body is rendered changes (the body is
# stored rendered), so reports stored by older code are computed again (2: win-rate estimates by design replaced
# the hybrid table; 3: focusable table regions, the plot's reference line and shorter labels; 4: the
# style-controlled board and length-controlled win rates; 5: the answers in short at the top; 6: the page in words
# with sections on demand, and the question a report reads; 7: rater reliability; 8: figures by item -- positional
# bias's sign-flip test with its items, intervals clustered by item, the unpenalised style board, each pair's alpha
# and the error control in force; 9: the items excluded in the data manager, counted; 10: the rankings and
# best-worst answers read, and the judgments they imply).
REPORT_FORMAT = 10


def judgments_seen(study: Study) -> dict:
    """What changes when a study's judgments change, in one aggregate: how many, the newest, the revised and the
    superseded ones (a judgment is never edited in place: a changed answer is a new one). The report's data version
    and the data manager's fingerprint both start from it."""
    return Judgment.objects.filter(study=study).aggregate(
        n=Count("id"),
        newest=Max("id"),
        revised=Count("id", filter=Q(revised=True)),
        superseded=Count("id", filter=Q(superseded=True)),
    )


def data_version(study: Study) -> str:
    """The fingerprint of the data and settings a report of ``study`` depends on."""
    parts = [
        judgments_seen(study),
        Rater.objects.filter(study=study, screened_out=True).aggregate(screened=Count("id"), newest=Max("id")),
        list(Item.objects.filter(study=study, excluded=True).order_by("pk").values_list("pk", flat=True)),
        SeparabilityRun.objects.filter(study=study).aggregate(n=Count("id"), newest=Max("created")),
        SelectionRun.objects.filter(study=study).aggregate(n=Count("id"), newest=Max("id")),
        IterativeRun.objects.filter(comparison__study=study).aggregate(n=Count("id"), newest=Max("id")),
        Comparison.objects.filter(study=study).aggregate(n=Count("id"), newest=Max("id")),
        dataclasses.asdict(analysis_parameters(study)),
        {"format": REPORT_FORMAT},
    ]
    return hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()


@dataclass
class Served:
    """What a page shows: the stored report (None before the first one exists) -- the whole report, or for
    the page only its summary and rendered body -- whether it is older than the data, and the refresh job
    when one is queued or running."""

    report: dict | None
    stale: bool
    computed: datetime.datetime | None
    seconds: float | None
    job: Job | None
    body: str = ""

    @property
    def state(self) -> str:
        return "missing" if self.report is None else ("stale" if self.stale else "fresh")

    def meta(self) -> dict:
        return {
            "state": self.state,
            "computed": self.computed.isoformat() if self.computed else None,
            "seconds": self.seconds,
            "job": self.job.pk if self.job else None,
        }


def do_serve(study: Study, population: Population, page: bool = False) -> Served:
    """The stored report for ``population`` (with ``page``: its summary and rendered body instead of the whole
    report, which is all a page view reads); queues a refresh when it is missing or stale."""
    version = data_version(study)
    fields = ("summary", "body") if page else ("data",)
    stored = (
        StoredReport.objects.filter(study=study, population_key=population.key)
        .only(*fields, "version", "computed", "seconds")
        .first()
    )
    if stored is None:
        return Served(None, True, None, None, do_request_refresh(study, population, version))
    fresh = stored.version == version
    report = stored.summary if page else stored.data
    return Served(
        report,
        not fresh,
        stored.computed,
        stored.seconds,
        None if fresh else do_request_refresh(study, population, version),
        stored.body if page else "",
    )


MAX_QUEUED_REFRESHES = 3  # report refreshes of one study queued or running at once (every filtered view is one)
# one refresh at a time per population (a second view of it returns the queued or running one)
LIMIT = jobs.Limit("report refreshes", key=("key",), coalesce="active", per_study=MAX_QUEUED_REFRESHES)


def do_request_refresh(study: Study, population: Population, version: str) -> Job | None:
    """The queued or running refresh of this population's report, or a new one queued (one at a time per
    population, at most ``MAX_QUEUED_REFRESHES`` per study and ``SEPLAB_JOBS_PER_KIND`` per researcher: forty
    filtered views must not queue forty full refreshes ahead of other researchers' jobs; None then, and the page
    asks again as it polls). ``jobs.start`` checks and creates under the owner's lock, so simultaneous views never
    queue past the limit together. A refresh that failed on this very data version is returned as it is (the page
    shows the error) instead of being retried on every request; new data or settings queue a new one."""
    latest = Job.objects.filter(study=study, kind=JOB_KIND, params__key=population.key).first()
    if latest is not None and (
        latest.active or (latest.status == Job.Status.FAILED and latest.params.get("version") == version)
    ):
        return latest
    try:
        return jobs.start(
            study,
            JOB_KIND,
            message="Computing the report",
            params={"key": population.key, "query": population.query(), "version": version},
        )
    except jobs.JobLimit:
        return None


def do_refresh(study: Study, population: Population) -> StoredReport:
    """Compute and store the report for ``population``. The version is read *before* computing, so a judgment
    that arrives meanwhile leaves the stored report stale (it is computed again), never wrongly fresh."""
    version = data_version(study)
    started = time.perf_counter()
    data = assembly.compute(study, population).to_json()
    report = assembly.Report.from_json(data)  # what the page reads: the report as stored
    values = {
        "version": version,
        "data": data,
        "summary": presentation.summary(report),
        "body": presentation.render_body(study, population, report),
        "computed": timezone.now(),
    }
    values["seconds"] = time.perf_counter() - started
    try:
        with transaction.atomic():
            stored, _ = StoredReport.objects.update_or_create(
                study=study, population_key=population.key, defaults=values
            )
    except IntegrityError:  # two workers stored the same population at once: the later one wins
        stored = StoredReport.objects.get(study=study, population_key=population.key)
        StoredReport.objects.filter(pk=stored.pk).update(**values)
    return stored


def readable(data: dict) -> assembly.Report | None:
    """A stored report as the typed report the CSV tables read; None for one stored by a report format whose
    sections differ (it is stale, and its refresh is queued)."""
    try:
        return assembly.Report.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None


def report_job(job: Job, progress: jobs.Progress) -> jobs.Outcome:
    """The report's background refresh (``do_request_refresh``)."""
    population = populations.parse(job.params["query"])  # checked against the study when it was queued
    result = do_refresh(job.study, population)
    # a refresh runs after every change of the data: keep only the latest finished one per population
    (
        Job.objects.filter(
            study=job.study,
            kind=JOB_KIND,
            params__key=job.params["key"],
            status__in=(Job.Status.DONE, Job.Status.FAILED),
        )
        .exclude(pk=job.pk)
        .delete()
    )
    return jobs.Outcome(f"Report computed in {result.seconds:.1f} s.", complete=True)
