"""Compiled hot-path queries (annotation/compiled.py) return what the ORM returns, with new parameters on
every call, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connections
from django.urls import reverse
from django.utils import timezone

from annotation import compiled
from annotation.access import _ASSIGNMENT_RATER_STUDY
from annotation.models import Assignment, AssignmentPair, CrowdSettings, Rater, Study
from annotation.rating import allocation
from annotation.studies import enrolment

COLUMNS = (
    *compiled.model_columns(Assignment),
    *compiled.model_columns(Rater, "rater__"),
    *compiled.model_columns(Study, "study__"),
    *compiled.model_columns(CrowdSettings, "study__crowd_settings__"),
)


@pytest.fixture
def two_assignments(study):
    study.crowd_settings.min_seconds_per_pair = 0
    study.crowd_settings.save()
    first = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "one"))
    second = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "two"))
    return first, second


def test_rows_equal_the_orm_values_for_every_column_type(two_assignments):
    # Assignment, Rater and Study together hold integers, text, booleans, floats, datetimes, nullable
    # columns and JSON: each converted by the ORM's own converters.
    for assignment in two_assignments:
        expected = list(Assignment.objects.filter(pk=assignment.pk).values(*COLUMNS))
        got = _ASSIGNMENT_RATER_STUDY.rows(assignment=assignment.pk, rater=assignment.rater_id)
        assert got == expected and len(got) == 1
        assert {type(v) for v in got[0].values()} == {type(v) for v in expected[0].values()}


def test_each_call_uses_its_own_parameters(two_assignments):
    first, second = two_assignments
    assert _ASSIGNMENT_RATER_STUDY.rows(assignment=first.pk, rater=first.rater_id)[0]["id"] == first.pk
    assert _ASSIGNMENT_RATER_STUDY.rows(assignment=second.pk, rater=second.rater_id)[0]["id"] == second.pk
    # Someone else's assignment: both parameters reach the WHERE clause.
    assert _ASSIGNMENT_RATER_STUDY.rows(assignment=first.pk, rater=second.rater_id) == []


def test_instances_equal_what_select_related_builds(two_assignments):
    assignment = two_assignments[0]
    row = _ASSIGNMENT_RATER_STUDY.rows(assignment=assignment.pk, rater=assignment.rater_id)[0]
    reference = Assignment.objects.select_related("rater", "study").get(pk=assignment.pk)
    for model, prefix, expected in (
        (Assignment, "", reference),
        (Rater, "rater__", reference.rater),
        (Study, "study__", reference.study),
    ):
        built = compiled.instance(model, row, prefix)
        assert built.pk == expected.pk and not built._state.adding and built._state.db == "default"
        for field in model._meta.concrete_fields:
            assert getattr(built, field.attname) == getattr(expected, field.attname), field.name


def test_an_update_stores_the_datetime_and_counts_rows(two_assignments):
    first, second = two_assignments
    moment = dt.datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=dt.UTC)
    touch = compiled.CompiledUpdate(
        lambda assignment, now: (Assignment.objects.filter(pk=assignment), {"last_activity": now}),
        assignment=int,
        now=dt.datetime,
    )
    assert touch(assignment=first.pk, now=moment) == 1
    assert touch(assignment=-1, now=moment) == 0
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.last_activity == moment
    assert second.last_activity != moment  # only the row asked for


def test_a_datetime_filter_compares_in_the_database(two_assignments):
    first, _ = two_assignments
    pair = first.pairs.order_by("position").first()
    allocation.do_mark_shown(pair)
    shown = AssignmentPair.objects.get(pk=pair.pk).shown_at
    after = compiled.CompiledQuery(
        lambda pk, since: AssignmentPair.objects.filter(pk=pk, shown_at__gte=since).values("pk"),
        pk=int,
        since=dt.datetime,
    )
    assert after.rows(pk=pair.pk, since=shown - dt.timedelta(seconds=1)) == [{"pk": pair.pk}]
    assert after.rows(pk=pair.pk, since=shown + dt.timedelta(seconds=1)) == []


def test_ids_beyond_64_bits_match_nothing_without_a_query(two_assignments, django_assert_num_queries):
    first, _ = two_assignments
    with django_assert_num_queries(0):
        assert _ASSIGNMENT_RATER_STUDY.rows(assignment=10**30, rater=first.rater_id) == []
        assert _ASSIGNMENT_RATER_STUDY.rows(assignment=-(10**30), rater=first.rater_id) == []
        assert allocation._MARK_SHOWN(pair=2**63, now=timezone.now()) == 0


def test_a_huge_assignment_id_in_a_rater_url_is_404(client, rater):
    for assignment_id in (2**63, 10**40):
        assert client.get(reverse("rate", args=[rater.token(), assignment_id])).status_code == 404
        response = client.post(reverse("rate_submit", args=[rater.token(), assignment_id]), {"pair": "1"})
        assert response.status_code == 404


def test_wrong_parameters_are_refused(two_assignments):
    first, _ = two_assignments
    with pytest.raises(TypeError, match="must be an int"):
        _ASSIGNMENT_RATER_STUDY.rows(assignment=str(first.pk), rater=first.rater_id)
    with pytest.raises(TypeError, match="must be an int"):
        _ASSIGNMENT_RATER_STUDY.rows(assignment=True, rater=first.rater_id)
    with pytest.raises(TypeError, match="Expected parameters"):
        _ASSIGNMENT_RATER_STUDY.rows(assignment=first.pk)
    with pytest.raises(TypeError, match="must be a datetime"):
        allocation._MARK_SHOWN(pair=first.pk, now="2026-01-01")
    with pytest.raises(TypeError, match="int or datetime"):
        compiled.CompiledQuery(lambda name: Study.objects.filter(name=name).values("pk"), name=str)


def test_a_parameter_that_never_reaches_the_sql_is_an_error(db):
    ignored = compiled.CompiledQuery(lambda pk: Study.objects.values("pk"), pk=int)
    with pytest.raises(RuntimeError, match=r"\['pk'\] do not appear in the compiled SQL"):
        ignored.rows(pk=1)


def test_each_thread_compiles_its_own_plan(two_assignments):
    # Plans hold the compiler of the thread's own connection (Django's connections are per thread).
    first, _ = two_assignments
    _ASSIGNMENT_RATER_STUDY.rows(assignment=first.pk, rater=first.rater_id)
    mine = _ASSIGNMENT_RATER_STUDY._local.plan
    seen = []
    thread = threading.Thread(target=lambda: seen.append(getattr(_ASSIGNMENT_RATER_STUDY._local, "plan", None)))
    thread.start()
    thread.join()
    assert mine.results.compiler.connection is connections["default"] and seen == [None]


def test_a_keys_query_returns_what_the_orm_returns_for_any_number_of_keys(django_assert_num_queries, study):
    """An ``__in`` list compiled per length: the same rows as the ORM for 1, 2 and 3 keys, repeated keys counted
    once, keys no 64-bit key can equal left out (no query when none is left), and a list longer than ``longest``
    through the plain ORM."""
    for n in range(4):
        enrolment.do_create_rater_link(study, f"k{n}")
    ids = list(Rater.objects.filter(study=study).order_by("pk").values_list("pk", flat=True))

    def build(keys):
        return Rater.objects.filter(pk__in=keys).order_by("-pk").values("pk", "external_id", "screened_out", "created")

    raters = compiled.CompiledKeysQuery(build, longest=3)
    for keys in ([ids[0]], ids[:2], ids[1:4], [ids[2], ids[2], ids[0]], [ids[0], 2**70, -(2**70)], ids):
        expected = list(build([k for k in keys if abs(k) < 2**63]))
        with django_assert_num_queries(1):
            assert raters.rows(keys) == expected and expected
    assert sorted(raters._by_length) == [1, 2, 3]  # four keys ran through the plain ORM
    with django_assert_num_queries(0):
        assert raters.rows([]) == [] and raters.rows([2**64]) == []
    with pytest.raises(TypeError, match="Keys must be ints"):
        raters.rows([ids[0], "7"])
    with pytest.raises(TypeError, match="Keys must be ints"):
        raters.rows([True])
