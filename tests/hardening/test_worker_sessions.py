"""Security pass, M6: one assignment per worker at a time holds under concurrency, enforced by the database:
eight sessions of one worker arriving at once bind at most one session to the worker's assignment."""

from __future__ import annotations

import threading

import pytest
from django.db import IntegrityError, connections, transaction
from django.test import Client

from annotation.models import Assignment, ExternalLink, WorkerSession
from annotation.rating import allocation
from annotation.studies import creation, enrolment
from tests.conftest import study_jsonl

SUBMIT_HOST = "https://workersandbox.mturk.com"


@pytest.mark.django_db(transaction=True)
def test_eight_sessions_of_one_worker_at_once_bind_one_assignment(researcher):
    study = creation.do_create_study(researcher, "rush-one", study_jsonl(4), "r.jsonl")
    link = ExternalLink.objects.create(study=study, platform="mturk")
    barrier = threading.Barrier(8)
    statuses, errors = [], []

    def arrive(n: int) -> None:
        try:
            barrier.wait()
            response = Client().get(
                link.path(), {"assignmentId": f"C{n}", "hitId": "H1", "workerId": "W1", "turkSubmitTo": SUBMIT_HOST}
            )
            statuses.append(response.status_code)
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=arrive, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    bound = list(WorkerSession.objects.filter(assignment__isnull=False).values_list("assignment_id", flat=True))
    assert len(bound) == 1 == len(set(bound))  # one session holds the worker's one assignment
    assert Assignment.objects.filter(status="active").count() == 1
    assert statuses.count(302) == 1 and set(statuses) <= {200, 302}  # the others: "already working"


def test_the_database_refuses_a_second_session_on_an_assignment(study):
    link = ExternalLink.objects.create(study=study, platform="generic")
    rater = enrolment.do_create_rater_link(study, "generic:W1")
    assignment = allocation.do_start_assignment(rater)
    WorkerSession.objects.create(link=link, rater=rater, worker_id="W1", session_key="s1", assignment=assignment)
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkerSession.objects.create(link=link, rater=rater, worker_id="W1", session_key="s2", assignment=assignment)
