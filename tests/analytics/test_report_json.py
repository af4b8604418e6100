"""The report's JSON form (analytics/report/serial.py): what ``report --json``, the API and the stored report hold
reads back as the same typed report, whatever order the database keeps its keys in."""

from __future__ import annotations

import json

from analytics.populations import ALL, Population
from analytics.report.assembly import Report, compute, study_report
from analytics.tables import report_tables


def reordered(value):
    """``value`` with every object's keys in reverse order, as PostgreSQL's jsonb may give them back."""
    if isinstance(value, dict):
        return {k: reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(v) for v in value]
    return value


def test_the_json_form_reads_back_as_the_same_report(judged_study):
    for population in (Population(), Population(ALL)):
        data = json.loads(json.dumps(compute(judged_study, population).to_json()))  # as stored
        report = Report.from_json(data)
        assert report == study_report(judged_study, population)
        assert report.to_json() == data
        assert Report.from_json(reordered(data)) == report


def test_a_report_reads_its_sections_by_attribute(judged_study):
    report = study_report(judged_study)
    assert report.population == Population() and report.question.key is None
    assert report.elo.leaderboard[0].order_below in ("decided", "reversed", "equivalent", "open", "not compared")
    assert report.elo.leaderboard[-1].order_below is None
    assert report.bradley_terry.intervals == "sandwich" and report.bradley_terry.leaderboard[0].online is None
    assert report.sep_elo.available is False and "separability" in report.sep_elo.reason
    assert report.rater_reliability.available is False  # two people: too few to compare
    data = report.to_json()
    assert "online" not in data["bradley_terry"]["leaderboard"][0] and "online" in data["elo"]["leaderboard"][0]
    assert "battles_without_separability" not in data["elo"] and "intervals" in data["bradley_terry"]


def test_the_csv_tables_have_the_same_rows_from_a_stored_report_in_any_key_order(judged_study):
    data = compute(judged_study).to_json()
    shuffled, stored = report_tables(Report.from_json(reordered(data))), report_tables(Report.from_json(data))
    assert shuffled.keys() == stored.keys()
    for name, (columns, rows) in stored.items():  # rows per judge come in the order the stored keys are in
        assert shuffled[name][0] == columns and sorted(map(repr, shuffled[name][1])) == sorted(map(repr, rows)), name


def test_the_stopping_entries_name_the_error_control_beside_the_error_rate(judged_study):
    """``decision_alpha`` stays the study's rate; ``decision_alpha_pair`` is what each pair's sequence uses and
    ``error_control`` the control in force (docs/decisions.md#study-wide-error): two systems, one pair, the same."""
    [entry] = compute(judged_study).to_json()["stopping"]
    keys = list(entry)
    assert keys[keys.index("decision_alpha") :][:3] == ["decision_alpha", "decision_alpha_pair", "error_control"]
    assert (entry["decision_alpha"], entry["decision_alpha_pair"], entry["error_control"]) == (0.05, 0.05, "per_pair")
