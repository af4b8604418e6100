"""Security pass, H3 and M2: timestamps and whole numbers outside what the database holds are refused with their
line and field (imports) or a clear error (the rating form); nothing is narrowed on the way in; a file export
is written whole or not at all. And every study setting has a documented range (``annotation/setting_ranges.py``,
read off its ``Setting`` declaration) that the settings form and ``do_update_settings`` both enforce: a value outside
it is refused with the setting's name, never a 500 (PostgreSQL) or a silently stored nonsense value (SQLite), and
nothing changes."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import connection, models
from django.db.backends.base.operations import BaseDatabaseOperations
from django.urls import reverse

from annotation import elicitation, setting_ranges, study_settings
from annotation.errors import ServiceError
from annotation.exchange import judgment_files
from annotation.exchange.rules import MAX_STORED_INT, FormatError
from annotation.models import Judgment, Study
from annotation.rating import allocation, imports, recording
from annotation.studies import lifecycle
from annotation.views.forms import StudySettingsForm


def line(**fields) -> bytes:
    base = {
        "id": "x1",
        "item": "item-0",
        "system_a": "sys-a",
        "sample_a": 0,
        "system_b": "sys-b",
        "sample_b": 0,
        "shown_first": "sys-a",
        "rater": "h1",
        "rater_kind": "human",
        "choice": "sys-a",
    }
    return (json.dumps({**base, **fields}) + "\n").encode()


@pytest.mark.parametrize("created", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
def test_a_timestamp_outside_utc_range_is_refused_with_its_line(study, created):
    with pytest.raises(FormatError) as caught:
        imports.do_import_judgments(study, line(created=created), "j.jsonl")
    assert "line 1, field 'created'" in str(caught.value.messages()) and "representable range" in str(
        caught.value.messages()
    )
    assert not Judgment.objects.exists()


def test_the_last_representable_instant_imports_and_exports(study, researcher_client):
    imports.do_import_judgments(study, line(created="9999-12-31T22:59:59-01:00"), "j.jsonl")
    exported = researcher_client.get(reverse("judgments_export", args=[study.pk, "jsonl"]))
    [row] = [json.loads(x) for x in b"".join(exported.streaming_content).decode().splitlines()]
    assert row["created"] == "9999-12-31T23:59:59Z"


@pytest.mark.parametrize("value", [2**31, 2**40 + 5, 4294967303])
def test_whole_numbers_beyond_the_column_are_refused_not_wrapped(study, value):
    with pytest.raises(FormatError) as caught:
        imports.do_import_judgments(study, line(time_on_task_ms=value), "j.jsonl")
    assert f"must be a whole number from 0 to {MAX_STORED_INT}" in str(caught.value.messages())
    assert not Judgment.objects.exists()


def test_the_largest_whole_number_round_trips_exactly(study):
    imports.do_import_judgments(study, line(time_on_task_ms=MAX_STORED_INT, client_time_ms=MAX_STORED_INT), "j.jsonl")
    stored = Judgment.objects.get()
    assert stored.time_on_task_ms == stored.client_time_ms == MAX_STORED_INT


def test_the_rating_form_refuses_a_client_time_beyond_the_column(client, study, rater):
    assignment = allocation.do_start_assignment(rater)
    url = reverse("rate", args=[rater.token(), assignment.pk])
    pair = re.search(r'name="pair" value="(\d+)"', client.get(url).content.decode()).group(1)
    refused = client.post(url + "submit/", {"pair": pair, "key": "k1", "choice": "first", "client_ms": 4294967303})
    assert refused.status_code == 400 and not Judgment.objects.exists()
    client.post(url + "submit/", {"pair": pair, "key": "k2", "choice": "first", "client_ms": MAX_STORED_INT})
    assert Judgment.objects.get().client_time_ms == MAX_STORED_INT
    second = assignment.pairs.all()[1]
    allocation.do_mark_shown(second)
    with pytest.raises(ServiceError, match="client_ms"):
        recording.do_record_judgment(
            second, idempotency_key="k3", answer=elicitation.Answer(choice="first"), client_time_ms=2**31
        )


def test_an_export_to_a_file_is_whole_or_not_at_all(study, tmp_path, monkeypatch):
    imports.do_import_judgments(study, line() + line(id="x2"), "j.jsonl")
    target = tmp_path / "out.csv"
    target.write_text("an earlier export\n")
    calls = {"n": 0}
    real = judgment_files.judgment_csv_row

    def failing(row):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the database went away")
        return real(row)

    monkeypatch.setattr(judgment_files, "judgment_csv_row", failing)
    with pytest.raises(RuntimeError):
        call_command(
            "export_judgments", "--study", study.name, "--format", "csv", "--output", str(target), stderr=StringIO()
        )
    assert target.read_text() == "an earlier export\n" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]
    monkeypatch.setattr(judgment_files, "judgment_csv_row", real)
    call_command(
        "export_judgments", "--study", study.name, "--format", "csv", "--output", str(target), stderr=StringIO()
    )
    assert len(target.read_text().splitlines()) == 3
    with pytest.raises(CommandError, match="Cannot write"):
        call_command(
            "export_judgments", "--study", study.name, "--output", str(tmp_path / "no" / "such.csv"), stderr=StringIO()
        )


# ---------------------------------------------------------------------------------------------------------------
# Study settings: each value the attack stored (or that answered 500 on PostgreSQL), refused by name

ATTACKS = [
    ("assignment_timeout_minutes", 0),
    ("screen_accuracy", 1.5),
    ("gold_rate", 1.1),
    ("risk", 2),
    ("decision_alpha", 0),
    ("bootstrap_rounds", 32767),  # the documented most is 2,000
    ("pay_per_assignment", -1),
    ("public_base_url", "ftp://files.example.org/"),
    ("public_base_url", "https://[::1"),  # not even a URL's shape: urlsplit raises (a 500 before)
    # a 500 on PostgreSQL: beyond the column
    ("min_n", 32768),
    ("bootstrap_rounds", 100_000),
    ("public_base_url", "https://eval.example.org/" + "a" * 200),
    ("seed", 2**63),
    ("seed", -1),
] + [  # every whole-number setting at 2^31, the first value a PostgreSQL integer column cannot hold
    (name, 2**31)
    for name, setting in study_settings.SETTINGS.items()
    if name != "seed" and not setting.form_only and isinstance(setting_ranges.model_field(name), models.IntegerField)
]


def saved(study: Study) -> dict:
    fresh = Study.objects.get(pk=study.pk)
    return {n: study_settings.value(fresh, n) for n, s in study_settings.SETTINGS.items() if not s.form_only}


def form_data(study: Study, **overrides) -> dict:
    """The settings form as the page fills it in, with ``overrides`` typed into it."""
    form = StudySettingsForm(instance=study)
    data: dict = {}
    for name in form.fields:
        value = form[name].value()
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif value is not None:
            data[name] = value
    for name, value in overrides.items():
        data[name] = value
    return data


@pytest.mark.parametrize(("name", "value"), ATTACKS)
def test_the_settings_form_refuses_a_value_out_of_range_by_name(researcher_client, study, name, value):
    before = saved(study)
    response = researcher_client.post(reverse("study_settings", args=[study.pk]), form_data(study, **{name: value}))
    assert response.status_code == 200  # the form again, never a 500
    errors = response.context["form"].errors
    assert list(errors) == [name], errors
    [message] = errors[name]
    assert message.startswith(f"Must be {setting_ranges.describe(name)}")
    assert message in response.content.decode().replace("&#x27;", "'")
    assert saved(study) == before


@pytest.mark.parametrize(("name", "value"), ATTACKS)
def test_do_update_settings_refuses_a_value_out_of_range_by_name(study, name, value):
    before = saved(study)
    with pytest.raises(ServiceError) as refused:
        lifecycle.do_update_settings(study, {name: value, "allow_comment": True}, None)
    assert f"{name}: must be" in str(refused.value)
    assert setting_ranges.describe(name) in str(refused.value)
    assert saved(study) == before  # the valid change beside it was not written either


def test_every_problem_is_named_at_once_and_odd_types_are_refused(study):
    before = saved(study)
    with pytest.raises(ServiceError) as refused:
        lifecycle.do_update_settings(
            study,
            {
                "gold_rate": float("nan"),
                "raters_per_item": 2.5,
                "allow_tie": "yes",
                "elicitation": "telepathy",
                "instructions": "x" * 50_001,
                "no_such_setting": 1,
            },
            None,
        )
    message = str(refused.value)
    for name in ("gold_rate", "raters_per_item", "allow_tie", "elicitation", "instructions", "no_such_setting"):
        assert f"{name}:" in message
    assert saved(study) == before


def test_a_baseline_of_another_study_is_refused(study, researcher):
    from annotation.studies import creation
    from tests.conftest import study_jsonl

    other = creation.do_create_study(researcher, "other", study_jsonl(), "o.jsonl")
    with pytest.raises(ServiceError, match="baseline: must be one of this study's systems"):
        lifecycle.do_update_settings(study, {"pair_mode": "baseline", "baseline": other.systems.first()}, None)


def number_settings():
    return [n for n, s in study_settings.SETTINGS.items() if s.limits is not None]


@pytest.mark.parametrize("name", number_settings())
def test_both_ends_of_every_range_are_stored_exactly(study, name):
    """What a range admits, the column holds on either database (so a refusal is the range's, never the column's)."""
    limits = study_settings.SETTINGS[name].limits
    field = setting_ranges.model_field(name)
    step = 1 if isinstance(field, models.IntegerField) else 0.01
    ends = [limits.low + step if limits.above else limits.low, limits.high - step if limits.below else limits.high]
    for end in ends:
        value = int(end) if isinstance(field, models.IntegerField) else end
        setting_ranges.check_changes(study, {name: value})
        study_settings.do_apply(study, {name: value})
        assert saved(study)[name] == value


def test_every_setting_documents_what_it_takes_and_the_page_shows_it(researcher_client, study):
    page = researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    for name, setting in study_settings.SETTINGS.items():
        field = setting_ranges.model_field(name) if not setting.form_only else None
        described = setting_ranges.describe(name)
        offered = (
            field is None
            or isinstance(field, models.BooleanField | models.ForeignKey)
            or bool(field.choices or setting.choices)
        )
        assert offered or described, f"{name} documents no range"
        if described:
            assert f"Takes {described}." in page
    assert "Takes a whole number from 10 to 2,000." in page  # bootstrap rounds, as the README says
    assert 'name="assignment_timeout_minutes" value="60" min="1" max="10080"' in page  # the browser knows too


def test_declared_ranges_fit_the_model_validators_and_the_columns():
    """The column's own validators (kept for the admin) never refuse what a range admits, and a whole-number range
    fits the column on PostgreSQL."""
    columns = BaseDatabaseOperations.integer_field_ranges
    for name in number_settings():
        limits = study_settings.SETTINGS[name].limits
        field = setting_ranges.model_field(name)
        for validator in field.validators:
            if isinstance(validator, MinValueValidator):
                assert limits.low >= validator.limit_value, name
            if isinstance(validator, MaxValueValidator):
                assert limits.high <= validator.limit_value, name
        if isinstance(field, models.IntegerField):
            low, high = columns[field.get_internal_type()]
            assert low <= limits.low and limits.high <= high, name
    assert connection.vendor in ("sqlite", "postgresql")


def test_a_value_stored_before_its_range_never_locks_the_study(researcher_client, study):
    """A study saved before a range was declared keeps its value and can still save its other settings (even once
    the value is frozen because raters started); changing it means choosing one inside the range."""
    from analytics.models import AnalysisSettings

    AnalysisSettings.objects.filter(study=study).update(bootstrap_rounds=5000)
    study = Study.objects.get(pk=study.pk)
    lifecycle.do_update_settings(study, {"bootstrap_rounds": 5000, "allow_comment": True}, None)
    posted = researcher_client.post(reverse("study_settings", args=[study.pk]), form_data(study, tie_label="Same"))
    assert posted.status_code == 302
    assert saved(study)["tie_label"] == "Same" and saved(study)["bootstrap_rounds"] == 5000
    with pytest.raises(ServiceError, match="bootstrap_rounds: must be a whole number from 10 to 2,000, not 5,001"):
        lifecycle.do_update_settings(Study.objects.get(pk=study.pk), {"bootstrap_rounds": 5001}, None)


def test_the_api_documents_the_declared_ranges(researcher_client):
    """The API reads settings (it changes none): its schema gives each number setting it shows the declared range."""
    schema = json.loads(researcher_client.get("/api/schema/?format=json").content)
    shown = schema["components"]["schemas"]["Study"]["properties"]
    for name in ("pairs_per_assignment", "raters_per_item", "seed", "budget"):
        limits = study_settings.SETTINGS[name].limits
        assert (shown[name]["minimum"], shown[name]["maximum"]) == (limits.low, limits.high), name
