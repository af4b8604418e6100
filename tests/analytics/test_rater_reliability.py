"""Rater reliability in the report: Dawid-Skene over the population's judgments, each rater's
reliability on a table, and the board from the inferred labels beside the plain one, never instead of it."""

from __future__ import annotations

import json

import numpy as np
from django.urls import reverse

from analytics import presentation, sentences, stored
from analytics.core import reliability
from analytics.populations import Population
from analytics.report.assembly import study_report
from analytics.report.data import load_rows
from annotation.rating import imports
from annotation.studies import creation
from tests.conftest import study_jsonl

STRENGTH = {"x": 1.5, "y": 0.0, "z": -1.5}  # x beats y, and y beats z, 82 % of the time


def planted_study(researcher):
    """Three systems on 300 items, three honest raters answering by Bradley-Terry probabilities and two spammers who
    pick z whenever it is shown (a coin otherwise), each judgment's display order random: the plain board puts z
    above y."""
    study = creation.do_create_study(
        researcher, "planted", study_jsonl(n_items=300, systems=tuple(STRENGTH), k=1), "p.jsonl"
    )
    rng = np.random.default_rng(7)
    names = list(STRENGTH)
    lines = []
    for i in range(300):
        a, b = sorted(rng.choice(names, 2, replace=False))
        p_a = 1 / (1 + np.exp(-(STRENGTH[a] - STRENGTH[b])))
        votes = {f"honest-{w}": a if rng.random() < p_a else b for w in range(3)}
        votes |= {f"spammer-{w}": "z" if "z" in (a, b) else str(rng.choice([a, b])) for w in range(2)}
        for rater, choice in votes.items():
            lines.append(
                {
                    "id": f"{rater}-{i}",
                    "item": f"item-{i}",
                    "system_a": a,
                    "system_b": b,
                    "shown_first": a if rng.random() < 0.5 else b,
                    "rater": rater,
                    "rater_kind": "human",
                    "choice": choice,
                }
            )
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "votes.jsonl")
    return study


def test_the_report_finds_the_spammers_and_shows_the_weighted_board_beside_the_plain_one(researcher, researcher_client):
    study = planted_study(researcher)
    report = study_report(study)
    found = report.rater_reliability
    assert found.available and sorted(found.unreliable) == ["spammer-0", "spammer-1"]
    by_rater = {r.rater: r for r in found.raters}
    assert all(by_rater[f"honest-{w}"].reliability >= 0.2 for w in range(3))  # not flagged
    # the same fit, from the core, on the same labels
    rows = [r for r in load_rows(study) if r.effective_choice is not None]
    fit = reliability.one_coin_dawid_skene(
        [r.pair_id for r in rows],
        [r.rater for r in rows],
        [r.effective_choice for r in rows],
        [r.a_shown_first for r in rows],
    )
    assert [by_rater[w].reliability for w in fit.workers] == [float(k) for k in fit.kappa]
    plain = [r.system for r in report.bradley_terry.leaderboard]
    weighted = [r.system for r in found.weighted_board.leaderboard]
    assert plain.index("z") < plain.index("y")  # the spammers turned the plain board over
    assert weighted == ["x", "y", "z"]  # the planted order
    page_sections = {s.name: s for s in presentation.sections(report)}
    assert page_sections["rater-reliability"].total == 5
    leads = sentences.leads(report)
    assert "2 carry almost no information or answer against the others" in leads["rater-reliability"]
    # the weighted board beside each pair's plain majority (one battle per pair too): the sentence says what the
    # table shows
    moved = [r.system for r in found.weighted_board.leaderboard if r.majority_place != r.place]
    assert leads["leaderboard-reliability"].startswith(", ".join(moved) if moved else "The same order")
    stored.do_refresh(study, Population())  # what the worker stores; the CSV and the page read it
    csv = researcher_client.get(reverse("report_table", args=[study.pk, "rater-reliability"])).content.decode()
    assert csv.splitlines()[0] == "rater,judgments,scored_pairs,reliability,model_accuracy,reliability_in_words"
    assert len(csv.splitlines()) == 6 and csv.splitlines()[1].startswith("spammer-")
    page = researcher_client.get(reverse("report", args=[study.pk])).content.decode()
    assert "How reliable each rater is" in page and "Reliability (κ beyond chance)" in page


def test_too_few_raters_say_why(study, researcher_client):
    report = study_report(study).to_json()
    assert report["rater_reliability"] == {
        "available": False,
        "reason": "needs at least 3 raters and pairs rated by 3 or more of them (now 0 raters, 0 such pairs)",
    }
