"""Management commands: --help, clear errors with a non-zero exit, and the import/export round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from annotation.exchange import exports
from annotation.models import Judgment, Study
from annotation.rating import allocation
from annotation.studies import creation
from tests.conftest import answer_all, study_jsonl

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.own_database
@pytest.mark.parametrize(
    "command",
    [
        "import_study",
        "import_judgments",
        "export_judgments",
        "load_demo",
        "load_prd",
        "create_researcher",
        "run_worker",
    ],
)
def test_every_command_has_help(command):
    result = subprocess.run(
        [sys.executable, "manage.py", command, "--help"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and "usage:" in result.stdout


def test_import_study_creates_a_study(tmp_path, db):
    call_command("create_researcher", "alice", stdout=StringIO())  # the only account owns it
    path = tmp_path / "s.jsonl"
    path.write_bytes(study_jsonl(3))
    out = StringIO()
    call_command("import_study", str(path), "--name", "cli", stdout=out)
    assert "Created study 'cli': 3 items, 2 systems, 3 rating tasks." in out.getvalue()


def test_import_study_lists_problems_and_exits_non_zero(tmp_path, researcher):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"id": "x"}\n')
    with pytest.raises(CommandError, match="No user named 'nobody'."):
        call_command("import_study", str(path), "--name", "bad", "--owner", "nobody")
    with pytest.raises(CommandError) as exc:
        call_command("import_study", str(path), "--name", "bad", "--owner", "alice")
    assert "line 1, field 'input': missing input" in str(exc.value)
    assert "outputs" not in str(exc.value)  # a file of inputs alone has none (their outputs come from endpoints)
    assert not Study.objects.exists()


@pytest.mark.slow(seconds=21)
@pytest.mark.own_database
def test_a_failing_command_exits_non_zero_from_the_shell(tmp_path):
    """The real command line, on its own throw-away SQLite database."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}"}

    def manage(*args):
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
        )

    assert manage("migrate", "-v0").returncode == 0
    created = manage("create_researcher", "admin")
    assert created.returncode == 0 and "Researcher 'admin' created. Password: " in created.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "outputs": {"a": ["no"], "b": ["ok"]}}\n')
    result = manage("import_study", str(bad), "--name", "bad")
    assert result.returncode == 1
    assert "line 1, field 'input'" in result.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"id": "x", "input": "in", "outputs": {"a": [""], "b": ["ok"]}}\n')
    result = manage("import_study", str(empty), "--name", "empty")
    assert result.returncode == 0 and "warning: line 1, field 'outputs.a[0]': empty output of item x" in result.stderr
    good = tmp_path / "good.jsonl"
    good.write_bytes(study_jsonl(2))
    result = manage("import_study", str(good), "--name", "good")
    assert result.returncode == 0 and "Created study 'good'" in result.stdout


def test_import_study_reports_a_missing_file(researcher):
    with pytest.raises(CommandError, match="Cannot read /nonexistent.jsonl"):
        call_command("import_study", "/nonexistent.jsonl", "--name", "x", "--owner", "alice")


def test_export_and_import_judgments_round_trip(tmp_path, study, rater, researcher):
    answer_all(allocation.do_start_assignment(rater))
    for fmt in ("jsonl", "csv"):
        target = tmp_path / f"out.{fmt}"
        call_command(
            "export_judgments", "--study", "small", "--format", fmt, "--output", str(target), stderr=StringIO()
        )
        copy = creation.do_create_study(researcher, f"copy-{fmt}", study_jsonl(), "s.jsonl")
        out = StringIO()
        call_command("import_judgments", str(target), "--study", copy.name, stdout=out)
        assert f"Imported 5 judgments into 'copy-{fmt}' (0 already present)." in out.getvalue()
        assert list(exports.judgment_lines(copy)) == list(exports.judgment_lines(study))
    stdout = StringIO()
    call_command("export_judgments", "--study", "small", stdout=stdout, stderr=StringIO())
    assert [json.loads(x)["rater"] for x in stdout.getvalue().splitlines()] == ["rater-1"] * 5


def test_commands_name_the_missing_study(db):
    with pytest.raises(CommandError, match="No study named 'ghost'"):
        call_command("export_judgments", "--study", "ghost")


def test_import_judgments_failure_saves_nothing(tmp_path, study):
    path = tmp_path / "j.jsonl"
    path.write_text('{"item": "item-0", "system_a": "sys-a", "system_b": "zzz"}\n')
    with pytest.raises(CommandError, match="line 1, field 'system_b': unknown system 'zzz'"):
        call_command("import_judgments", str(path), "--study", "small")
    assert not Judgment.objects.exists()


def test_load_demo_sets_up_a_working_demo_and_can_run_again(db):
    out = StringIO()
    call_command("load_demo", stdout=out)
    call_command("load_demo", stdout=StringIO())
    study = Study.objects.get(name="demo")
    assert study.items.count() == 20 and study.systems.count() == 3
    assert study.comparisons.count() == 3 and study.open_link_enabled
    assert {g for g in study.items.first().generations.values_list("sample_index", flat=True)} == {0, 1, 2}
    text = out.getvalue()
    assert "user 'researcher'  password '" in text and "/r/" in text and "/join/" in text
    # The demo tells the story: judgments by simulated people through the rating services, one simulated
    # judge on the same pairs in both orders, separability and a fresh stored report, all on first open.
    from analytics import stored
    from analytics.populations import Population
    from annotation.demo import population

    humans = study.judgments.filter(rater__kind="human")
    judge = study.judgments.filter(rater__kind="judge")
    assert humans.count() == population.HUMANS * population.ASSIGNMENTS_PER_HUMAN * 9  # 3 items x N = 3 pairs
    assert set(humans.values_list("assignment__status", flat=True)) == {"completed"}
    assert judge.count() == 2 * humans.values("pair").distinct().count()
    assert judge.filter(a_shown_first=True).count() == judge.filter(a_shown_first=False).count()
    assert study.separability_runs.filter(metric="rouge1-la").count() == 3
    served = stored.do_serve(study, Population())
    assert served.state == "fresh" and served.report["elo"]["available"] and served.report["sep_elo"]["available"]
    assert "Simulated" in text
    assert not Study.objects.get(name="demo").raters.get(external_id="demo-rater").judgments.exists()


def test_a_researcher_is_an_ordinary_account_that_can_log_in_but_not_administer(client, db, monkeypatch):
    """The README once made every researcher a superuser, and a superuser reads every API token in /admin/."""
    import io

    out = StringIO()
    call_command("create_researcher", "bob", "--email", "bob@example.org", stdout=out)
    password = out.getvalue().rsplit("Password: ", 1)[1].strip()
    bob = get_user_model().objects.get(username="bob")
    assert not bob.is_staff and not bob.is_superuser and bob.check_password(password)
    assert client.post("/accounts/login/", {"username": "bob", "password": password}).status_code == 302
    assert client.get("/admin/authtoken/tokenproxy/").status_code == 302  # sent to the admin's login, not shown
    with pytest.raises(CommandError, match="exists already"):
        call_command("create_researcher", "bob")
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    with pytest.raises(CommandError, match="The password is refused"):
        call_command("create_researcher", "carol", "--password-stdin")
    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-enough-passphrase\n"))
    call_command("create_researcher", "carol", "--password-stdin", stdout=StringIO())
    assert get_user_model().objects.get(username="carol").check_password("a-long-enough-passphrase")


def test_the_demo_researcher_is_not_a_superuser(db):
    call_command("load_demo", "--empty", stdout=StringIO())
    user = get_user_model().objects.get(username="researcher")
    assert not user.is_superuser and not user.is_staff
