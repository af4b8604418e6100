"""Security pass, L3: a settings change that rebuilds the plan and the first rater's start never interleave: the
start waits for the rebuild and gets a place in the new plan (before: a foreign-key 500 on the settings save,
or the rater's new assignment deleted under them). Real threads, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

from annotation import models
from annotation.models import Assignment, AssignmentTask, Study, Task
from annotation.plan import planning
from annotation.rating import allocation
from annotation.studies import creation, enrolment, lifecycle
from tests.conftest import study_jsonl


@pytest.mark.django_db(transaction=True)
def test_a_start_during_a_plan_rebuild_waits_and_lands_in_the_new_plan(researcher, monkeypatch) -> None:
    study = creation.do_create_study(researcher, "race", study_jsonl(4), "r.jsonl")
    rater = enrolment.do_create_rater_link(study, "first")
    old_tasks = set(Task.objects.values_list("pk", flat=True))
    inside, release = threading.Event(), threading.Event()
    real = planning.comparison_systems

    def paused(*args, **kwargs):  # the rebuild has checked that nobody started; hold it there
        inside.set()
        release.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(planning, "comparison_systems", paused)
    errors: list[BaseException] = []

    def run(fn):
        def target():
            try:
                fn()
            except BaseException as exc:  # reported below
                errors.append(exc)
            finally:
                connections.close_all()

        return threading.Thread(target=target)

    rebuild = run(lambda: lifecycle.do_update_settings(Study.objects.get(pk=study.pk), {"raters_per_item": 2}, None))
    start = run(lambda: allocation.do_start_assignment(models.Rater.objects.select_related("study").get(pk=rater.pk)))
    rebuild.start()
    assert inside.wait(10)
    start.start()
    time.sleep(1.0)  # the start would run now, were it not ordered after the rebuild
    release.set()
    rebuild.join(20)
    start.join(20)
    assert errors == []
    new_tasks = set(Task.objects.values_list("pk", flat=True))
    first = Task.objects.first()
    assert new_tasks and not new_tasks & old_tasks and first is not None and first.raters_required == 2
    [assignment] = Assignment.objects.filter(rater=rater)
    places = set(AssignmentTask.objects.filter(assignment=assignment).values_list("task_id", flat=True))
    assert places and places <= new_tasks  # the rater holds places in the plan that exists
    assert assignment.pairs.count() == assignment.n_pairs > 0
