"""The study report through the ORM, the page, its CSV tables and the API."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from analytics import presentation
from analytics.populations import ALL, Population
from analytics.report.assembly import study_report
from analytics.report.indeterminacy import MIN_SHARED_PAIRS
from analytics.report.ratings import Board, NoBoard
from annotation.elicitation import Answer
from annotation.exchange import exports
from annotation.rating import allocation, imports, recording
from annotation.studies import creation, enrolment, lifecycle
from tests.conftest import refresh_reports, study_jsonl

CONTRACT_KEYS = {  # the keys other tools rely on: docs/interfaces.md#report-json
    "systems",
    "judgments",
    "consistency",
    "separability",
    "elo",
    "sep_elo",
    "bradley_terry",
    "stopping",
    "positional_bias",
    "agreement",
    "indeterminacy",
}


def test_an_empty_study_reports_what_is_missing(study):
    report = study_report(study).to_json()
    assert CONTRACT_KEYS <= set(report)
    assert report["elo"] == {
        "available": False,
        "reason": "no judgments with a choice yet",
        "parameters": report["elo"]["parameters"],
    }
    assert report["indeterminacy"]["reason"] == "needs human and judge judgments on the same pairs"


def test_the_report_covers_humans_and_judges(judged_study) -> None:
    report = study_report(judged_study)
    assert report.judgments.by_kind == {"human": 40, "judge": 160}
    assert isinstance(report.elo, Board) and [r.system for r in report.elo.leaderboard]
    assert report.bradley_terry.available
    assert isinstance(report.sep_elo, NoBoard) and "separability" in report.sep_elo.reason
    judges = report.indeterminacy.judges
    assert set(judges) == {"judge-a", "judge-b"}
    # judge-a always chose one system and put only that one in its response set: beta-hat = 0
    assert judges["judge-a"].units == 20 and judges["judge-a"].beta_hat == 0.0
    assert judges["judge-b"].beta_hat is None  # no response sets
    # By the definitions: humans gave forced choices only, so with beta = 0 Omega_H = the share of a and b among
    # their choices on the pair; judge-a's response set is always {a}: Omega_J = [1, 0]; judge-b gave forced
    # choices only ("b"): Omega_J = [0, 1].
    by_pair: dict[tuple, list[str]] = {}
    for line in exports.judgment_lines(judged_study):
        if line["rater_kind"] == "human":
            key = (line["item"], line["sample_a"], line["sample_b"])
            by_pair.setdefault(key, []).append("a" if line["choice"] == line["system_a"] else "b")
    omega_h = [(c.count("a") / len(c), c.count("b") / len(c)) for c in by_pair.values()]
    assert judges["judge-a"].mse == pytest.approx(sum((a - 1) ** 2 + b**2 for a, b in omega_h) / len(omega_h))
    assert judges["judge-b"].mse == pytest.approx(sum(a**2 + (b - 1) ** 2 for a, b in omega_h) / len(omega_h))
    assert len(judges["judge-a"].beta_sensitivity) == 11
    assert set(report.positional_bias.populations) == {"human"}  # the default population is the humans
    populations = study_report(judged_study, Population(ALL)).positional_bias.populations
    assert populations["judge"].rate == pytest.approx(0.5)  # each judge saw both orders with the same verdict
    assert set(report.positional_bias.debiasing) == {"judge-a", "judge-b"}
    assert report.agreement.cohen_kappa[0].overlap == 20
    assert report.stopping[0].n == 4


def test_sep_elo_appears_once_separability_is_computed(judged_study):
    from selection import services as selection_services

    judged_study.selection_settings.separability_metric = "rouge1"
    judged_study.selection_settings.save()
    selection_services.do_compute_separability(judged_study, "rouge1")
    report = study_report(judged_study)
    assert report.sep_elo.available and report.sep_elo.battles_without_separability == 0
    assert report.consistency.by_separability["human"].equal_count
    # every item equally separable: three of the four equal-width bins hold no rating set (their bounds are null),
    # and the page shows the one that does
    assert [b.count for b in report.consistency.by_separability["human"].equal_width] == [0, 0, 8, 0]
    body = presentation.render_body(judged_study, Population(), report)
    assert "1.00 to 1.00 (n = 8)" in body


def test_the_report_page_shows_tables_plots_and_csv(researcher_client, judged_study):
    first = researcher_client.get(reverse("report", args=[judged_study.pk])).content.decode()
    assert 'data-testid="report-state-missing"' in first and "Computing the report" in first
    refresh_reports()
    page = researcher_client.get(reverse("report", args=[judged_study.pk]))
    content = page.content.decode()
    assert 'data-testid="report-state-fresh"' in content
    assert page.status_code == 200
    assert "<h2>ELO</h2>" in content and "<svg" in content and "Which judge agrees best" in content
    response = researcher_client.get(reverse("report_table", args=[judged_study.pk, "judge-metrics"]))
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == [
        "judge",
        "units",
        "verdicts",
        "agreement",
        "agreement_split_first",
        "agreement_split_left_out",
        "p_first",
        "first_share",
        "mse",
        "coverage",
        "hit_rate",
        "kappa_per_verdict",
        "kappa_per_item",
        "kl",
        "jsd",
        "beta_hat",
    ]
    assert len(rows) == 3
    assert researcher_client.get(reverse("report_table", args=[judged_study.pk, "nope"])).status_code == 404


def test_the_report_is_private(client, study, other_researcher):
    assert client.get(reverse("report", args=[study.pk])).status_code == 302
    client.force_login(other_researcher)
    assert client.get(reverse("report", args=[study.pk])).status_code == 404
    assert client.get(reverse("report_table", args=[study.pk, "stopping"])).status_code == 404


def test_the_report_api(judged_study, researcher, other_researcher):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    pending = api.get(f"/api/studies/{judged_study.pk}/report/")
    assert pending.status_code == 202 and pending.json()["report_state"]["state"] == "missing"
    refresh_reports()
    data = api.get(f"/api/studies/{judged_study.pk}/report/").json()
    assert data["report_state"]["state"] == "fresh" and data["population"]["key"] == "humans"
    assert CONTRACT_KEYS <= set(data)
    outsider = APIClient()
    outsider.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=other_researcher).key}")
    assert outsider.get(f"/api/studies/{judged_study.pk}/report/").status_code == 404
    assert APIClient().get(f"/api/studies/{judged_study.pk}/report/").status_code == 401


def test_analysis_parameters_change_the_report(judged_study):
    judged_study.analysis_settings.elo_k = 16
    judged_study.analysis_settings.bootstrap_rounds = 10
    judged_study.analysis_settings.save()
    report = study_report(judged_study)
    assert report.elo.parameters.k == 16 and report.elo.parameters.bootstrap_rounds == 10


def test_paired_elicitation_gives_beta_hat_and_the_translation_matrix(researcher_client, study):
    lifecycle.do_update_settings(study, {"elicitation": "paired"}, None)
    rater = enrolment.do_create_rater_link(study, "p1")
    assignment = allocation.do_start_assignment(rater)
    pairs = list(assignment.pairs.all())
    # forced choice of the output shown second, and both outputs acceptable on every other pair
    for n, pair in enumerate(pairs):
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(
            pair,
            idempotency_key=f"p{n}",
            answer=Answer(choice="second", response=frozenset(["first", "second"] if n % 2 == 0 else [])),
        )
    report = study_report(study).indeterminacy
    rows = [(j.choice, j.response_set) for j in study.judgments.all()]
    # beta-hat = P(the option not chosen is also in the response set | forced choice a or b), both ways pooled
    other = [{"a": "b", "b": "a"}[c] in (s or []) for c, s in rows if c in ("a", "b")]
    assert report.human_beta_hat == pytest.approx(sum(other) / len(other))
    assert len(report.human_translation_matrix) == 3
    researcher_client.get(reverse("report", args=[study.pk]))
    refresh_reports()
    page = researcher_client.get(reverse("report", args=[study.pk])).content.decode()
    assert "How people turn response sets into forced choices" in page


def test_an_empty_report_page_explains(researcher_client, researcher):
    study = creation.do_create_study(researcher, "fresh", study_jsonl(2), "f.jsonl")
    researcher_client.get(reverse("report", args=[study.pk]))
    refresh_reports()
    assert b"No judgments by humans yet" in researcher_client.get(reverse("report", args=[study.pk])).content


def imported(study, rows, system_a: str = "sys-a", system_b: str = "sys-b") -> None:
    """Import judgments on sample 0 of item-0: rows of (rater, kind, choice, system shown first)."""
    lines = [
        {
            "id": f"{rater}-{n}",
            "item": "item-0",
            "system_a": system_a,
            "sample_a": 0,
            "system_b": system_b,
            "sample_b": 0,
            "shown_first": first,
            "rater": rater,
            "rater_kind": kind,
            "choice": choice,
        }
        for n, (rater, kind, choice, first) in enumerate(rows)
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "j.jsonl")


def test_a_human_tie_counts_as_both_outputs_reasonable_in_the_judge_metrics(study):
    imported(
        study,
        [
            ("h1", "human", "sys-a", "sys-a"),
            ("h2", "human", "tie", "sys-a"),
            ("h3", "human", "tie", "sys-b"),
            ("j", "judge", "sys-a", "sys-a"),
        ],
    )
    judge = study_report(study).indeterminacy.judges["j"]
    # response sets {a}, {a, b}, {a, b}: Omega_H = [1, 2/3]; the judge's {a}: Omega_J = [1, 0]
    assert judge.omega_human_mean == pytest.approx([1.0, 2 / 3])
    assert judge.mse == pytest.approx((2 / 3) ** 2)
    assert judge.coverage == 1.0  # a is reasonable to every human
    assert judge.hit_rate == 0.0  # but the human forced-choice majority is the tie
    tau_half = next(t for t in judge.threshold_sweep if t.tau == 0.5)
    assert tau_half.decision_consistency == 1.0  # option a reaches 0.5 for both


def test_the_judge_metrics_do_not_depend_on_which_system_is_called_a(researcher):
    # The same judgments in two studies whose systems are named the other way round
    results = []
    for name, (first, second) in (("ab", ("sys-a", "sys-b")), ("ba", ("sys-b", "sys-a"))):
        study = creation.do_create_study(researcher, name, study_jsonl(systems=(first, second)), "s.jsonl")
        study.analysis_settings.indeterminacy_beta = 0.3
        study.analysis_settings.save()
        imported(
            study,
            [
                ("h1", "human", "sys-a", "sys-a"),
                ("h2", "human", "sys-b", "sys-a"),
                ("h3", "human", "sys-a", "sys-b"),
                ("h4", "human", "tie", "sys-b"),
                ("j", "judge", "sys-b", "sys-a"),
            ],
            system_a=first,
            system_b=second,
        )
        assert [r.system_a for r in study_report(study).stopping] == [first]
        results.append(study_report(study).indeterminacy.judges["j"])
    # sys-a got 2 of 4 forced choices, sys-b 1, tie 1; with beta = 0.3 applied both ways:
    # Omega_sys-a = 0.5 + 0.25 + 0.3 * 0.25, Omega_sys-b = 0.25 + 0.25 + 0.3 * 0.5; the judge's {sys-b}
    expected = (0.5 + 0.25 + 0.3 * 0.25) ** 2 + (0.25 + 0.25 + 0.3 * 0.5 - 1) ** 2
    for judge in results:
        assert judge.mse == pytest.approx(expected)
    assert results[0].beta_sensitivity == results[1].beta_sensitivity


def test_the_tie_rule_of_the_stopping_test_is_a_setting(study):
    imported(study, [("h1", "human", "sys-a", "sys-a"), ("h2", "human", "tie", "sys-a")])
    lines = [
        {
            "id": f"t{n}",
            "item": f"item-{n}",
            "system_a": "sys-a",
            "sample_a": 0,
            "system_b": "sys-b",
            "sample_b": 0,
            "shown_first": "sys-a",
            "rater": "h1",
            "rater_kind": "human",
            "choice": "tie",
        }
        for n in (1, 2)
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "t.jsonl")
    [stopping] = study_report(study).stopping
    # item-0 goes to sys-a (h1 prefers it, h2 has no preference); items 1 and 2 are ties
    assert (stopping.wins_a, stopping.ties, stopping.k, stopping.n) == (1, 2, 1, 3)
    study.selection_settings.stopping_ties_in_n = False
    study.selection_settings.save()
    [stopping] = study_report(study).stopping
    assert (stopping.k, stopping.n, stopping.ties_count_in_n) == (1, 1, False)


def test_each_pair_s_decision_rests_on_its_items_scores_in_arrival_order(study):
    """An item's score is the mean of its raters' outcomes for the pair's first system (ties as halves);
    the report's decision and interval are the study's rule's over those scores: its planned looks
    (``group_sequential.standing``), or without them the confidence sequence's, read after the last."""
    from analytics.report.assembly import compute
    from selection.core import decisions, group_sequential

    imported(study, [("h1", "human", "sys-a", "sys-a"), ("h2", "human", "tie", "sys-a")])
    lines = [
        {
            "id": f"t{n}",
            "item": f"item-{n}",
            "system_a": "sys-a",
            "sample_a": 0,
            "system_b": "sys-b",
            "sample_b": 0,
            "shown_first": "sys-a",
            "rater": "h1",
            "rater_kind": "human",
            "choice": "tie",
        }
        for n in (1, 2)
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "t.jsonl")
    [stopping] = study_report(study).stopping
    # a new study decides at planned looks: the report reads them over the scores (its plan has not looked yet)
    settings = study.selection_settings
    look = group_sequential.standing(
        [0.75, 0.5, 0.5], settings.looks(), 0.05, 0.05, pool=stopping.pool, futility=settings.futility()
    )
    assert stopping.decision_looks == settings.looks() > 0 and not stopping.decision_live
    assert (stopping.decision, stopping.decision_items, stopping.win_rate_low, stopping.win_rate_high) == (
        look.decision,
        look.n,
        look.low,
        look.high,
    )
    # without planned looks, the confidence sequence's, read after the last item
    settings.decision_looks = 0
    settings.save()
    [stopping] = compute(study).stopping
    lower, upper = decisions.betting_confidence_sequence([0.75, 0.5, 0.5], 0.05)
    assert (stopping.decision, stopping.decision_items) == ("undecided", 3)
    assert (stopping.win_rate_low, stopping.win_rate_high) == pytest.approx((lower[-1], upper[-1]))
    assert (stopping.decision_alpha, stopping.decision_margin) == (0.05, 0.05)


def test_a_pair_whose_first_system_wins_item_after_item_is_decided_for_it(researcher):
    study = creation.do_create_study(researcher, "many", study_jsonl(60), "m.jsonl")
    lines = [
        {
            "id": f"w{n}",
            "item": f"item-{n}",
            "system_a": "sys-a",
            "sample_a": 0,
            "system_b": "sys-b",
            "sample_b": 0,
            "shown_first": "sys-b",
            "rater": "h1",
            "rater_kind": "human",
            "choice": "sys-a",
        }
        for n in range(60)
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "w.jsonl")
    report = study_report(study)
    [stopping] = report.stopping
    assert stopping.decision == "a" and 0.5 < stopping.win_rate_low <= stopping.win_rate_high == 1.0
    from analytics.tables import report_tables

    columns, rows = report_tables(report)["stopping"]
    assert rows[0][columns.index("decision")] == "a" and "decision_items" in columns


def test_the_leaderboards_can_count_the_majority_of_each_pair_or_one_judgment_per_input(study):
    # pair (item-0, samples 0/0): sys-a, sys-a, sys-b -> sys-a wins one battle; item-1: sys-b and a tie on two
    # different pairs of the same item
    imported(
        study, [("h1", "human", "sys-a", "sys-a"), ("h2", "human", "sys-a", "sys-b"), ("h3", "human", "sys-b", "sys-a")]
    )
    lines = [
        {
            "id": f"x{n}",
            "item": "item-1",
            "system_a": "sys-a",
            "sample_a": n,
            "system_b": "sys-b",
            "sample_b": n,
            "shown_first": "sys-a",
            "rater": "h1",
            "rater_kind": "human",
            "choice": c,
        }
        for n, c in enumerate(("sys-b", "tie"))
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "x.jsonl")
    assert study_report(study).elo.battles == 5
    study.analysis_settings.rating_aggregation = "majority"
    study.analysis_settings.save()
    report = study_report(study)
    assert report.elo.battles == 3 and report.elo.parameters.aggregation == "majority"
    wins = dict(zip(report.win_rates.systems, report.win_rates.matrix, strict=True))
    assert wins["sys-a"][1] == pytest.approx((1 + 0 + 0.5) / 3)  # sys-a: the pair won, a loss, a tie
    study.analysis_settings.rating_aggregation = "one_sampled"
    study.analysis_settings.save()
    # one per item; ELO, because Bradley-Terry has no fit when the sampled judgments let one system never lose
    assert study_report(study).elo.battles == 2


def test_the_report_ranks_elo_by_its_bootstrap_median_and_keeps_the_online_pass(judged_study):
    report = study_report(judged_study)
    for board in (report.elo.leaderboard, report.bradley_terry.leaderboard):
        assert [r.rating for r in board] == sorted((r.rating for r in board), reverse=True)
        assert all(r.low <= r.median <= r.high for r in board)
    assert all(r.rating == r.median and r.online is not None for r in report.elo.leaderboard)
    assert all(r.online is None for r in report.bradley_terry.leaderboard)


def test_the_report_combines_humans_and_a_judge_that_judged_more_items(researcher_client, study):
    from analytics.core.ppi import classical_mean, ppi_mean

    # humans on item-0..item-2 (sample 0), a judge on every item: the judge alone covers item-3
    lines = []
    humans = {"item-0": ["sys-a", "sys-a"], "item-1": ["sys-b", "tie"], "item-2": ["sys-a", "sys-b"]}
    judge = {"item-0": "sys-a", "item-1": "sys-b", "item-2": "sys-a", "item-3": "sys-b"}
    for item, choices in humans.items():
        for n, choice in enumerate(choices):
            lines.append(
                {
                    "id": f"h{n}-{item}",
                    "item": item,
                    "system_a": "sys-a",
                    "sample_a": 0,
                    "system_b": "sys-b",
                    "sample_b": 0,
                    "shown_first": "sys-a",
                    "rater": f"h{n}",
                    "rater_kind": "human",
                    "choice": choice,
                }
            )
    for item, choice in judge.items():
        lines.append(
            {
                "id": f"j-{item}",
                "item": item,
                "system_a": "sys-a",
                "sample_a": 0,
                "system_b": "sys-b",
                "sample_b": 0,
                "shown_first": "sys-b",
                "rater": "j",
                "rater_kind": "judge",
                "choice": choice,
            }
        )
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "j.jsonl")
    [entry] = study_report(study).win_rate_estimates
    assert (entry.design, entry.labelled, entry.frame, entry.target) == (
        "uniform",
        3,
        4,
        "items like these",
    )
    people, row = entry.estimates
    # per item, the first system's score: a win 1, a tie 1/2, a loss 0, averaged over the raters
    y, f, f_rest = [1.0, 0.25, 0.5], [1.0, 0.0, 1.0], [0.0]
    expected, human = ppi_mean(y, f, f_rest), classical_mean(y)
    assert (row.judge, row.labelled, row.judge_only) == ("j", 3, 1)
    assert row.estimate == pytest.approx(expected.estimate) and row.lam == pytest.approx(expected.lam)
    assert (row.low, row.high, row.efficiency) == pytest.approx((expected.low, expected.high, expected.efficiency))
    assert (people.judge, people.estimate, people.low) == (
        None,
        pytest.approx(human.estimate),
        pytest.approx(human.low),
    )
    researcher_client.get(reverse("report", args=[study.pk]))
    refresh_reports()
    page = researcher_client.get(reverse("report", args=[study.pk])).content.decode()
    assert "Win rates with honest intervals" in page and 'data-testid="win-rate-sys-a-sys-b"' in page
    assert "Estimates for <strong>items like these</strong>" in page
    assert "Bradley-Terry strengths from humans and a judge" in page
    # the same units in one Bradley-Terry fit over every system pair (here one): sys-a is the reference
    from analytics.core.ppi import ppi_bradley_terry

    strengths = {r.system: r for r in study_report(study).hybrid_strengths}
    hybrid = ppi_bradley_terry([0, 0, 0], [1, 1, 1], y, f, [0], [1], f_rest, 2)
    alone = ppi_bradley_terry([0, 0, 0], [1, 1, 1], y, f, [0], [1], f_rest, 2, lam=0.0)
    arena = 400 / math.log(10)
    assert strengths["sys-a"].hybrid == strengths["sys-a"].low == 1000.0
    assert strengths["sys-b"].hybrid == pytest.approx(1000 + arena * hybrid.theta[1])
    assert strengths["sys-b"].human_only == pytest.approx(1000 + arena * alone.theta[1])
    assert strengths["sys-b"].lam == pytest.approx(hybrid.lam)
    assert strengths["sys-b"].human_only < 1000  # the humans preferred sys-a (y mean 0.58)


def test_judges_with_the_same_values_share_a_place_in_the_ranking(judged_study):
    """The ranking once read "longer-wins › longer-wins-shown" on every metric with identical values; ties are ties."""
    from tests.analytics.conftest import judge_lines

    imports.do_import_judgments(judged_study, judge_lines(judged_study, "judge-c", "sys-a", True), "j.jsonl")
    ind = study_report(judged_study).indeterminacy
    assert ind.shared_pairs["judge-c"] >= MIN_SHARED_PAIRS
    for metric, tiers in ind.ranking_tiers.items():
        assert any({"judge-a", "judge-c"} <= set(tier) for tier in tiers), metric  # the same verdicts: one place
        assert sum(tiers, []) == ind.ranking[metric]
    body = presentation.render_body(judged_study, Population(), study_report(judged_study))
    assert "judge-a = judge-c" in body or "judge-a = judge-b = judge-c" in body


def test_without_separability_the_report_says_what_sep_elo_needs(study):
    """A study without separability: sep-ELO says it needs two samples per system and item, then the computing --
    not only 'compute it', which a study of one sample each cannot."""
    imported(study, [("h1", "human", "sys-a", "sys-a"), ("h2", "human", "sys-a", "sys-b")])
    reason = study_report(study).sep_elo.reason
    assert "at least two samples of each system per item (K ≥ 2)" in reason and "Separability page" in reason
