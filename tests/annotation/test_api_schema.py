"""The API against its own OpenAPI schema, fuzzed by schemathesis (positive and negative inputs):
every answer is documented (status, content type, body shape), nothing is a 5xx, invalid input gets a
4xx, and no judgment changes. The write side (a study from a file, its settings, its team) is fuzzed too: there a
request the schema allows may still be refused with a 400 that names the field -- a study file's validity is its
format (docs/interfaces.md#study-file), an account must exist, settings must agree with each other (a tie option
needs its label) and some freeze once raters start -- which no JSON schema can say, so schemathesis's "schema-valid
data is accepted" check is left out for those operations alone."""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.specs.openapi.checks import positive_data_acceptance

from annotation.models import Judgment, Study
from annotation.rating import allocation
from config.wsgi import application
from tests.conftest import answer_all

# Loaded from the real WSGI application (schema generation touches no database).
schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
schema.config.generation.update(modes=[schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE])

FUZZ = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.fixture(autouse=True)
def requests_in_the_test_transaction(db):
    """Like django.test.Client: keep the request signals from closing the test's database connection."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def token(researcher) -> str:
    return Token.objects.create(user=researcher).key


@pytest.fixture
def judged_study(study, rater) -> Study:
    answer_all(allocation.do_start_assignment(rater))
    return study


def snapshot() -> tuple:
    return (
        Study.objects.count(),
        Judgment.objects.count(),
        sorted(Judgment.objects.values_list("idempotency_key", flat=True)),
    )


@schema.parametrize()
@FUZZ
def test_the_api_answers_as_its_schema_says(case, token, judged_study):
    before = snapshot()
    headers = {"Authorization": f"Token {token}"}
    writes = case.method != "GET" and not case.path.endswith("/budget/")
    # a write's file format, accounts and cross-field rules, and the data manager's system names (the study's own),
    # cannot be stated in a schema: schema-valid values there may be refused by name
    named = writes or case.path.endswith("/data-manager/")
    excluded = [positive_data_acceptance] if named else None  # None: the checks as configured
    first = case.call_and_validate(headers=headers, excluded_checks=excluded)
    ids = [name for name in ("id", "study_id") if name in (case.path_parameters or {})]
    if ids and case.meta.generation.mode.is_positive:
        # Random ids are 404s; the same request on the researcher's real study exercises the full answer.
        case.path_parameters[ids[0]] = judged_study.pk
        response = case.call_and_validate(headers=headers, excluded_checks=excluded)
        allowed = {200, 400, 404} if "page" in (case.query or {}) else {200, 400}  # 404: past the last page
        if {"member_id", "endpoint_id"} & set(case.path_parameters or {}):
            allowed = {404}  # the study has no members, judges or generated systems: no such id is one of its
        created = ("/members/", "/raters/", "/judges/", "/systems/", "/crowd-links/")
        if case.method == "POST" and case.formatted_path.endswith(created):
            allowed = {201, 400}  # created (a rater's link by any name), or refused by field
        if case.formatted_path.endswith("/report/"):
            allowed |= {202, 404}  # the stored report is being computed; no such judge or rater
        if case.formatted_path.endswith("/budget/") and case.method == "POST":
            # a budget plan queued; a system pair the study does not compare; 429: another plan while one is queued
            # (a study plans one budget at a time, and no worker runs here to end the first)
            allowed |= {202, 404, 429}
        assert response.status_code in allowed, (case.formatted_path, case.query, response.status_code)
    if first.status_code == 201 and case.path == "/api/studies/":  # a study file valid by chance
        Study.objects.order_by("-pk").first().delete()
    assert snapshot() == before


@schema.parametrize()
@FUZZ
def test_without_a_token_every_operation_is_refused(case, judged_study):
    before = snapshot()
    response = case.call()
    # A well-formed request is refused for want of a token; a malformed path matches no route (404).
    # Either way the answer is JSON and says nothing about the studies.
    # An id below 0 is an integer to the schema but matches no route (Django's int converter is [0-9]+).
    negative_id = any(isinstance(v, int) and v < 0 for v in (case.path_parameters or {}).values())
    expected = {401} if case.meta.generation.mode.is_positive and not negative_id else {401, 404}
    assert response.status_code in expected, (case.method, case.formatted_path, response.status_code)
    assert set(response.json()) == {"detail"} and "small" not in response.text
    assert snapshot() == before
