"""Rater populations: humans and judges are never pooled unless "all" is chosen; filters by source, rater and
screening; the page, the CSV, the API and `report --json` carry the population; progress counts human work."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from analytics import plots, populations
from analytics.populations import ALL, JUDGE, Population
from analytics.report.assembly import Report, study_report
from annotation.models import Rater
from annotation.studies import creation, monitoring
from tests.analytics.test_report import imported
from tests.conftest import refresh_reports, study_jsonl


def kinds_in(report: Report) -> set[str]:
    """Every rater kind that any population-computed section of the report drew on."""
    return {s.kind for s in report.consistency.rating_sets} | {r.kind for r in report.positional_bias.raters}


def test_the_default_report_is_humans_only(judged_study):
    report = study_report(judged_study)
    assert report.population.key == "humans" and not report.population.mixes
    assert report.judgments.total == 40 and report.judgments.study_total == 200
    for board in (report.elo, report.bradley_terry):
        assert board.battles == 40  # the 160 judge verdicts are in none of them
    assert sum(map(sum, report.win_rates.battles)) == 2 * 40  # each battle counted for both systems
    assert kinds_in(report) == {"human"}
    # 4 items, each judged by both humans: h1 always chose the output shown first, h2 the second
    assert sum(s.n for s in report.stopping) == 4


def test_a_judge_is_a_population_of_its_own(judged_study):
    report = study_report(judged_study, Population(JUDGE, "judge-a"))
    assert report.judgments.total == 80 and report.elo.battles == 80
    assert {r.rater for r in report.positional_bias.raters} == {"judge-a"}
    assert kinds_in(report) == {"judge"}
    # judge-a preferred sys-a on every pair, in both orders: it wins every item and every battle
    stop = report.stopping[0]
    assert (stop.leader, stop.wins_a, stop.wins_b, stop.ties) == ("sys-a", 4, 0, 0)
    assert report.win_rates.matrix[0][1] == 1.0
    # judges are still checked against the humans, whatever the population shown
    assert set(report.indeterminacy.judges) == {"judge-a", "judge-b"}


def test_only_all_mixes_and_says_so(judged_study):
    report = study_report(judged_study, Population(ALL))
    assert report.population.mixes is True
    assert report.judgments.total == 200 and report.elo.battles == 200
    assert kinds_in(report) == {"human", "judge"}
    choices = {p.key: p.judgments for p in report.populations}
    assert choices == {"humans": 40, "judge:judge-a": 80, "judge:judge-b": 80, "all": 200}


def test_filters_by_source_rater_and_screening(judged_study):
    by_source = study_report(judged_study, Population(sources=("import",)))
    assert by_source.judgments.total == 0 and by_source.elo.available is False
    assert study_report(judged_study, Population(sources=("personal_link",))).elo.battles == 40
    assert study_report(judged_study, Population(rater="h1")).elo.battles == 20
    Rater.objects.filter(external_id="h1").update(screened_out=True)
    left_out = study_report(judged_study)
    assert left_out.judgments.total == 20 and left_out.judgments.screened_out_left_out == 20
    assert {r.rater for r in left_out.positional_bias.raters} == {"h2"}
    assert study_report(judged_study, Population(include_screened=True)).judgments.total == 40


@pytest.mark.parametrize(
    "params, parameter",
    [
        ({"population": "robots"}, "population"),
        ({"population": "judge:nobody"}, "population"),
        ({"source": "email"}, "source"),
        ({"screened": "maybe"}, "screened"),
        ({"rater": "ghost"}, "rater"),
    ],
)
def test_a_bad_population_names_the_parameter(params, parameter):
    with pytest.raises(populations.PopulationError, match=f"^{parameter}:"):
        populations.parse(params, judges=["judge-a"], raters=["h1"])


def test_parse_and_query_are_inverse():
    population = Population(JUDGE, "judge-a", ("external", "import"), "r1", True)
    assert populations.parse(population.query(), judges=["judge-a"]) == population
    assert populations.parse({}) == Population()


def test_the_page_csv_and_api_carry_the_population(researcher_client, researcher, judged_study):
    url = reverse("report", args=[judged_study.pk])
    for query in ("", "?population=all", "?population=judge:judge-a"):
        researcher_client.get(url + query)
    assert refresh_reports() == 3
    page = researcher_client.get(url).content.decode()
    assert "Humans" in page and 'data-testid="mixed-population"' not in page
    mixed = researcher_client.get(url + "?population=all").content.decode()
    assert 'data-testid="mixed-population"' in mixed and "40 human and 160 judge judgments are pooled" in mixed
    csv_humans = researcher_client.get(reverse("report_table", args=[judged_study.pk, "positional-bias"]))
    csv_judge = researcher_client.get(
        reverse("report_table", args=[judged_study.pk, "positional-bias"]) + "?population=judge:judge-a"
    )
    assert "judge-a" not in csv_humans.content.decode() and "judge-a" in csv_judge.content.decode()
    assert "judge-judge-a" in csv_judge["Content-Disposition"]
    bad = researcher_client.get(url + "?population=robots")
    assert bad.status_code == 400 and "population: &#x27;robots&#x27; is not humans" in bad.content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    data = api.get(f"/api/studies/{judged_study.pk}/report/?population=judge:judge-a").json()
    assert data["population"]["judge"] == "judge-a" and data["elo"]["battles"] == 80
    assert api.get(f"/api/studies/{judged_study.pk}/report/?source=mail").status_code == 400
    assert api.get(f"/api/studies/{judged_study.pk}/report/?population=judge:nobody").status_code == 404


def test_report_json_carries_the_population(judged_study):
    out = StringIO()
    call_command("report", "--study", judged_study.name, "--json", "--population", "judge:judge-b", stdout=out)
    data = json.loads(out.getvalue())
    assert data["population"]["key"] == "judge:judge-b" and data["elo"]["battles"] == 80
    text = StringIO()
    call_command("report", "--study", judged_study.name, stdout=text)
    assert "Humans: 40 judgments (of 200)" in text.getvalue()
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--population"):
        call_command("report", "--study", judged_study.name, "--population", "judge:nobody")


def test_progress_counts_human_work_against_the_plan_and_judges_apart(researcher_client, judged_study):
    progress = monitoring.study_progress(judged_study)[0]
    # 4 items x 5 pairs x 3 raters planned; the two humans made 40; the judges' 160 verdicts fill nothing
    assert (progress.judgments, progress.target, progress.judge, progress.imported_human) == (40, 60, 160, 0)
    assert progress.percent == 67
    page = researcher_client.get(judged_study.get_absolute_url()).content.decode()
    assert "40 / 60" in page and "160" in page and "judge verdicts" in page


def test_consistency_of_one_judgment_per_rating_set_is_not_applicable(researcher_client, researcher):
    study = creation.do_create_study(researcher, "n1", study_jsonl(3, k=1), "n1.jsonl")
    imported(study, [("h1", "human", "sys-a", "sys-a"), ("h2", "human", "sys-b", "sys-a")])
    summary = study_report(study).consistency.summary["human"]
    assert summary.available is False and summary.mean is None and "not applicable" in summary.reason
    researcher_client.get(reverse("report", args=[study.pk]))
    refresh_reports()
    page = researcher_client.get(reverse("report", args=[study.pk])).content.decode()
    assert "not applicable" in page and "consistency (Eq. 4) compares" in page


def test_a_headline_mean_carries_its_n_and_interval(judged_study):
    summary = study_report(judged_study).consistency.summary["human"]
    # Each human rating set holds 5 ratings of one item, all for the same display position; each display
    # order was drawn per pair, so Eq. 4 gives 0 (mixed) or 1 (one side): n = 8 rating sets
    assert summary.n == summary.of == 8
    assert summary.low <= summary.mean <= summary.high


def test_a_judge_with_few_shared_pairs_is_shown_but_not_ranked(researcher_client, study):
    imported(study, [("h1", "human", "sys-a", "sys-a"), ("j", "judge", "sys-a", "sys-a")])
    ind = study_report(study).indeterminacy
    assert ind.shared_pairs == {"j": 1} and ind.unranked == ["j"]
    assert all(names == [] for names in ind.ranking.values())
    researcher_client.get(reverse("report", args=[study.pk]))
    refresh_reports()
    page = researcher_client.get(reverse("report", args=[study.pk])).content.decode()
    assert "Not ranked (too few shared pairs): j" in page and "at least\n    20 pairs" in page


def test_axis_labels_are_readable_numbers():
    svg = plots.interval_plot([plots.Span("x", 1100.0, 1050.0, 1150.0)])
    assert "e+" not in svg and "1,0" in svg
    assert plots.fmt(0.123456) == "0.123" and plots.fmt(1100) == "1,100" and plots.fmt(-2.5) == "-2.5"


def test_an_interval_plot_marks_its_reference_and_makes_room_for_long_labels():
    rows = [plots.Span("People + all judges (their mean verdict)", 0.31, 0.22, 0.41)]
    svg = plots.interval_plot(rows, reference=(0.5, "even"), decimals=3)
    # the axis reaches the reference although every interval lies below it (0.5 + 5 % of 0.5 - 0.22 = 0.514),
    # and the line is labelled
    assert 'class="reference"' in svg and ">even</text>" in svg and ">0.514</text>" in svg
    # the label's right edge sits at left - 8 with left = 6 x 40 characters + 16
    assert '<text x="248" y=' in svg and "[0.220, 0.410]" in svg


def test_the_study_list_counts_humans_and_judges_apart(researcher_client, judged_study):
    page = researcher_client.get(reverse("study_list")).content.decode()
    assert (
        "<th>Human judgments</th><th>Judge verdicts</th>" in page
        and '<td data-label="Human judgments">40</td><td data-label="Judge verdicts">160</td>' in page
    )


def test_a_tables_file_name_keeps_the_populations_parts_apart():
    from analytics.views import table_filename

    assert table_filename("s", "win-rates", "humans") == "s-win-rates.csv"
    assert table_filename("s", "win-rates", "humans|question=clarity") == "s-win-rates-humans-question-clarity.csv"
    assert table_filename("s", "elo", "judge:judge-a") == "s-elo-judge-judge-a.csv"
