"""The complaint "the report is hard to read", answered: the page a researcher reads top-down -- answers, contents, then
sections that open on demand, tables with headers in words and numbers at the precision their kind deserves -- while the
CSV downloads and the JSON API keep their machine names and full precision."""

from __future__ import annotations

import csv
import io
import re
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from analytics import columns, sentences, stored
from analytics.populations import Population
from analytics.tables import report_tables
from annotation.models import Study
from annotation.rating import allocation
from annotation.studies import enrolment
from tests.conftest import answer_all, refresh_reports


def report_page(client, study) -> str:
    client.get(reverse("report", args=[study.pk]))
    refresh_reports()
    return client.get(reverse("report", args=[study.pk])).content.decode()


def section(page: str, name: str) -> str:
    """One section's HTML, from its <details> to its end."""
    return page.split(f'data-testid="section-{name}"')[1].split("</details>")[0]


def headers(html: str) -> list[str]:
    return re.findall(r"<th[^>]*>([^<]*)</th>", html)


def cells(html: str) -> list[list[str]]:
    return [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", html, re.S)[1:]]


@pytest.fixture
def demo(researcher) -> Study:
    """The demo study: five simulated people, a judge, separability and a stored report."""
    call_command("load_demo", "--username", researcher.username, stdout=StringIO())
    return Study.objects.get(name="demo")


@pytest.fixture
def demo_client(client, demo):
    client.force_login(demo.owner)
    return client


def test_every_column_of_every_report_table_has_a_header_in_words(judged_study):
    tables = report_tables(stored.readable(stored.do_refresh(judged_study, Population()).data))
    tables.setdefault("leaderboard-sep_elo", tables["leaderboard-elo"])  # the same columns as ELO
    for name, (names, _rows) in tables.items():
        for col in names:
            if name == "win-rates" and col != "system":
                continue  # the matrix's columns are the systems themselves
            assert col in columns.COLUMNS or (name, col) in columns.SECTION_COLUMNS, (name, col)
            words = columns.column(name, col).label
            assert "_" not in words and not (words[0].islower() and words[0].isascii()), (name, col, words)


def test_the_page_shows_headers_in_words_and_the_csv_keeps_the_machine_names(researcher_client, judged_study):
    page = report_page(researcher_client, judged_study)
    stopping = section(page, "stopping")
    assert headers(stopping)[:3] == ["System A", "System B", "Decision"]  # planned looks or anytime-valid alike
    assert "Risk beyond the pool" in headers(stopping) and "Decision rule" in headers(stopping)
    assert "Risk below threshold" in headers(stopping)
    assert '<th scope="col" class="wide">Decision rule</th>' in stopping  # a column of words keeps some width
    assert "Compared with humans" in headers(section(page, "debiasing"))
    assert "Lower 2.5 %" in headers(section(page, "leaderboard-elo"))
    for header in headers(page):
        assert "_" not in header, header  # no snake_case header anywhere on the page
    response = researcher_client.get(reverse("report_table", args=[judged_study.pk, "stopping"]))
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    data = stored.do_serve(judged_study, Population()).report
    assert rows[0][:2] == ["system_a", "system_b"] and "risk_beyond_pool" in rows[0]
    for name in ("risk_beyond_pool", "win_rate_low"):  # full precision: the float as Python writes it
        assert rows[1][rows[0].index(name)] == str(data["stopping"][0][name])
    response = researcher_client.get(reverse("report_table", args=[judged_study.pk, "leaderboard-elo"]))
    assert next(csv.reader(io.StringIO(response.content.decode())))[3:5] == ["low_2.5", "high_97.5"]


def test_the_api_keeps_its_keys_and_full_precision(judged_study, researcher):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    api.get(f"/api/studies/{judged_study.pk}/report/")
    refresh_reports()
    data = api.get(f"/api/studies/{judged_study.pk}/report/").json()
    report = stored.do_serve(judged_study, Population()).report
    assert data["elo"]["leaderboard"] == report["elo"]["leaderboard"]
    assert data["stopping"][0]["risk_beyond_pool"] == report["stopping"][0]["risk_beyond_pool"]
    assert data["positional_bias"]["debiasing"] == report["positional_bias"]["debiasing"]


def test_ratings_are_whole_numbers_and_win_rates_three_decimals(researcher_client, judged_study):
    page = report_page(researcher_client, judged_study)
    report = stored.do_serve(judged_study, Population()).report
    elo = cells(section(page, "leaderboard-elo"))
    for row, entry in zip(elo, report["elo"]["leaderboard"], strict=True):
        assert row[1] == entry["system"]
        assert row[2:5] == [f"{round(entry[k]):,}" for k in ("rating", "low", "high")]
    stopping = cells(section(page, "stopping"))[0]
    first = report["stopping"][0]
    # the page reads the pair, its decision and the win rate's bounds first (the CSV keeps its order)
    assert stopping[:2] == [first["system_a"], first["system_b"]]
    assert stopping[2] == columns.DECISIONS[first["decision"]]  # 'System A better', not 'a'
    assert stopping[3:6] == [
        f"{first['win_rate_low']:.3f}",
        f"{first['win_rate_high']:.3f}",
        f"{first['decision_items']:,}",
    ]


def test_counts_are_grouped_and_p_values_never_read_zero():
    assert columns.as_count(70422) == "70,422" and columns.as_rating(1054.686) == "1,055"
    assert columns.as_share(0.12345) == "0.123" and columns.as_two(0.333333) == "0.33"
    assert columns.as_p_value(7.05733420490698e-09) == "< 0.001" and columns.as_p_value(0.0104) == "0.010"
    assert columns.plural(1, "rater") == "1 rater" and columns.plural(1760, "rater") == "1,760 raters"


def test_one_rater_is_one_rater(researcher_client, study):
    answer_all(allocation.do_start_assignment(enrolment.do_create_rater_link(study, "only")))
    page = report_page(researcher_client, study)
    stats = page.split('aria-label="The data in numbers"')[1].split("</section>")[0]
    assert "<strong>1</strong> rater<" in stats and "1 raters" not in page


def test_the_consistency_distribution_reads_as_rating_sets_per_value(demo_client, demo):
    page = report_page(demo_client, demo)
    report = stored.do_serve(demo, Population()).report
    bins = section(page, "consistency-bins")
    assert "0.333333" not in bins and "0.666667" not in bins
    for b in report["consistency"]["by_separability"]["human"]["equal_width"]:
        # by value, whatever order the stored JSON keeps (PostgreSQL's jsonb orders keys by length)
        expected = ", ".join(
            f"{float(v):.2f}:\u00a0{n}\u00a0rating\u00a0set{'' if n == 1 else 's'}"
            for v, n in sorted(b["histogram"].items(), key=lambda kv: float(kv[0]))
        )
        assert f"<td>{expected}</td>" in bins
    # the CSV keeps the machine form
    response = demo_client.get(reverse("report_table", args=[demo.pk, "consistency-bins"]))
    assert "0.333333: " in response.content.decode()


def test_sections_open_on_demand_with_a_contents_list_after_the_answers(demo_client, demo):
    page = report_page(demo_client, demo)
    report = stored.do_serve(demo, Population()).report
    answers, contents = page.index('data-testid="answers"'), page.index('data-testid="report-contents"')
    assert answers < contents < page.index('data-testid="section-leaderboard-bradley_terry"')
    for name in re.findall(r'<li><a href="#([^"]+)">', page.split('data-testid="report-contents"')[1]):
        assert f'id="{name}"' in page, name  # every contents link has its target
    sets = len(report["consistency"]["rating_sets"])
    assert f'<summary><h2>Rating sets</h2> <span class="section-size">— {sets} rows</span></summary>' in page
    board = report["bradley_terry"]
    assert (
        f'<summary><h2>Bradley-Terry</h2> <span class="section-size">— {len(board["leaderboard"])} systems, '
        f"{board['battles']:,} battles</span></summary>"
    ) in page
    opened = re.findall(r'<details class="card report-section" data-testid="section-([^"]+)" open>', page)
    assert opened == ["leaderboard-bradley_terry", "leaderboard-elo"]  # the leaderboards; the rest on demand
    assert page.count('<details class="card report-section"') > 10


def test_numbers_that_need_words_have_them(demo_client, demo):
    page = report_page(demo_client, demo)
    report = stored.do_serve(demo, Population()).report
    people = report["positional_bias"]["populations"]["human"]
    lead = section(page, "positional-bias").split('<p class="lead">')[1].split("</p>")[0]
    assert f"{people['first_chosen']} of {people['n']} non-tie choices" in lead
    assert sentences.position_words(people["rate"], people["p_value"]) in lead
    # the population's own row before the raters' (the CSV lists it last)
    assert cells(section(page, "positional-bias"))[0][:4] == [
        "all humans",
        "person",
        f"{people['n']:,}",
        f"{people['first_chosen']:,}",
    ]
    alpha = report["agreement"]["krippendorff_alpha"]
    assert sentences.alpha_words(alpha).capitalize() in page.split('aria-label="The data in numbers"')[1]


def test_the_collect_more_card_leads_to_the_budget_planner_and_alpha_says_its_scale(demo_client, demo):
    page = report_page(demo_client, demo)
    report = stored.do_serve(demo, Population()).report
    undecided = [s for s in report["stopping"] if s["decision"] == "undecided"]
    assert undecided  # the demo's 20 items decide few pairs
    assert f'href="/studies/{demo.pk}/settings/#budget" data-testid="to-budget-planner"' in page
    assert 'id="budget"' in demo_client.get(f"/studies/{demo.pk}/settings/").content.decode()
    assert sentences.ALPHA_SCALE in page  # the bands' bounds beside the words


def test_position_and_consistency_in_words():
    assert sentences.position_words(0.53, 0.0104) == "a slight lean toward the output shown first"
    assert sentences.position_words(0.30, 0.001) == "a strong lean toward the output shown second"
    assert sentences.position_words(0.70, 0.2) == "no clear position bias"  # not significant: not named
    # judges read on the same scale after the same test: 13 of 16 verdicts, each on its own item, for the
    # first-shown output has two-sided p = 2 * (C(16,13) + C(16,14) + C(16,15) + C(16,16)) / 2^16 = 2 * 697 / 65536
    from analytics.core import bias

    p = bias.positional_bias(np.array([True] * 13 + [False] * 3), np.arange(16)).p_value
    assert p == pytest.approx(2 * 697 / 65536)
    assert sentences.position_words(13 / 16, p) == "a strong lean toward the output shown first"
    nine = bias.positional_bias(np.array([True] * 9 + [False] * 7), np.arange(16)).p_value
    assert sentences.position_words(9 / 16, nine) == "no clear position bias"  # 56 % of 16: not significant
    assert sentences.consistency_words(0.9).startswith("raters stick to their choice")


def test_the_consistency_bars_split_each_bin_by_its_values():
    from analytics import plots

    svg = plots.stacked_bars([("bin 1", {0.0: 1, 1 / 3: 2}), ("bin 2", {1.0: 4})], "consistency")
    assert "<title>bin 1: 0.333: 2 rating sets of 3</title>" in svg
    assert "<title>bin 2: 1: 4 rating sets of 4</title>" in svg
    widths = [float(w) for w in re.findall(r'<rect x="[\d.]+" y="\d+" width="([\d.]+)"', svg)]
    assert widths[1] == pytest.approx(2 * widths[0], abs=0.2) and widths[2] == pytest.approx(3 * widths[0], abs=0.2)
    assert plots.stacked_bars([], "consistency") == ""
