"""The simulate command on a study with an oracle file."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.studies import creation, lifecycle
from selection import live
from selection.models import IterativeRun


@pytest.fixture
def oracle_study(researcher, tmp_path):
    topics = [
        "market",
        "falcon",
        "ferry",
        "library",
        "bakery",
        "river",
        "solar",
        "museum",
        "hedgehog",
        "flood",
        "vaccine",
        "sunset",
        "climate",
        "interest",
        "leaves",
        "fire",
    ]
    lines, oracle = [], []
    for i, t in enumerate(topics):
        lines.append(
            json.dumps(
                {
                    "id": f"t{i}",
                    "input": f"Tell me about the {t}.",
                    "outputs": {
                        "good": [f"A careful answer about the {t}.", f"A precise account of the {t}."],
                        "poor": [f"Something about a {t}?", f"{t}."],
                    },
                }
            )
        )
        oracle.append(json.dumps({"item": f"t{i}", "winner": "good" if i % 5 else "poor"}))
    study = creation.do_create_study(researcher, "oracle", ("\n".join(lines) + "\n").encode(), "o.jsonl")
    path = tmp_path / "oracle.jsonl"
    path.write_text("\n".join(oracle) + "\n")
    return study, path


def test_simulate_reports_every_method_with_random_as_baseline(oracle_study, tmp_path):
    study, path = oracle_study
    out = StringIO()
    plot = tmp_path / "plot.svg"
    call_command(
        "simulate",
        "--study",
        "oracle",
        "--oracle",
        str(path),
        "--method",
        "default,diffuse,diffuse-iterative",
        "--budgets",
        "3,6",
        "--seeds",
        "6",
        "--plot",
        str(plot),
        "--json",
        stdout=out,
    )
    document = json.loads(out.getvalue())
    assert set(document["success"]) == {"random", "default", "diffuse"}
    assert set(document["success"]["random"]) == {"3", "6"}
    assert all(0.0 <= r <= 1.0 for by_budget in document["success"].values() for r in by_budget.values())
    iterative = document["iterative"]
    assert iterative["success"] + iterative["error"] + iterative["inconclusive"] == pytest.approx(1.0)
    assert iterative["mean_annotations"] >= 5
    baseline = document["iterative_random"]
    assert baseline["success"] + baseline["error"] + baseline["inconclusive"] == pytest.approx(1.0)
    assert document["items"] == 16 and plot.read_text().startswith("<?xml")


def test_the_simulation_is_reproducible(oracle_study):
    study, path = oracle_study
    runs = []
    for _ in range(2):
        out = StringIO()
        call_command(
            "simulate",
            "--study",
            "oracle",
            "--oracle",
            str(path),
            "--method",
            "stratified",
            "--budgets",
            "4",
            "--seeds",
            "5",
            "--json",
            stdout=out,
        )
        runs.append(json.loads(out.getvalue())["success"])
    assert runs[0] == runs[1]


def test_a_bad_oracle_file_is_reported_with_line_numbers(oracle_study, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"item": "t0", "winner": "good"}\n{"item": "nope", "winner": "good"}\n'
        '{"item": "t1", "winner": "gpt"}\nnot json\n'
    )
    with pytest.raises(CommandError) as exc:
        call_command("simulate", "--study", "oracle", "--oracle", str(bad))
    message = str(exc.value)
    assert "line 2, field 'item': unknown item 'nope'" in message
    assert "line 3, field 'winner': must be 'good', 'poor' or 'tie', not 'gpt'" in message
    assert "line 4: expected a JSON object" in message


def test_unknown_methods_and_pairs_are_refused(oracle_study):
    study, path = oracle_study
    with pytest.raises(CommandError, match="unknown method 'magic'"):
        call_command("simulate", "--study", "oracle", "--oracle", str(path), "--method", "magic")
    with pytest.raises(CommandError, match="does not compare"):
        call_command("simulate", "--study", "oracle", "--oracle", str(path), "--pair", "good,great")


def test_a_judgments_file_is_an_oracle_by_the_item_winner_rule(oracle_study, tmp_path):
    study, _ = oracle_study

    def judgment(item, rater, sample, choice):
        return {
            "id": f"{item}-{rater}-{sample}",
            "item": item,
            "system_a": "good",
            "sample_a": sample,
            "system_b": "poor",
            "sample_b": sample,
            "shown_first": "good",
            "rater": rater,
            "rater_kind": "judge",
            "choice": choice,
        }

    lines = [judgment(f"t{i}", "j1", 0, "good" if i % 5 else "poor") for i in range(1, 16)]
    # t0: one rater prefers poor on both pairs, two prefer good once and see no difference once: by raters
    # (sign of Eq. 7 each, then the majority) good wins; summing the six ratings (-2 + 1 + 1) would be a tie
    lines += [
        judgment("t0", "j1", 0, "poor"),
        judgment("t0", "j1", 1, "poor"),
        judgment("t0", "j2", 0, "good"),
        judgment("t0", "j2", 1, "tie"),
        judgment("t0", "j3", 0, "tie"),
        judgment("t0", "j3", 1, "good"),
    ]
    path = tmp_path / "judgments.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = StringIO()
    call_command(
        "simulate", "--study", "oracle", "--oracle", str(path), "--budgets", "3", "--seeds", "2", "--json", stdout=out
    )
    document = json.loads(out.getvalue())
    assert document["oracle"] == {"good": 1 + 12, "poor": 3, "tie": 0}  # t0 and 12 of t1..t15 go to good
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**lines[0], "item": "nope"}) + "\n")
    with pytest.raises(CommandError, match="field 'item': unknown item 'nope'"):
        call_command("simulate", "--study", "oracle", "--oracle", str(bad), "--budgets", "3", "--seeds", "2")


def test_simulate_and_the_live_loop_take_algorithm_1s_parameters_from_the_same_stored_settings(oracle_study):
    study, path = oracle_study
    lifecycle.do_update_settings(study, {"risk": 0.05, "min_n": 4, "budget": 12, "stopping_ties_in_n": False}, None)
    out = StringIO()
    call_command(
        "simulate",
        "--study",
        "oracle",
        "--oracle",
        str(path),
        "--method",
        "diffuse-iterative",
        "--budgets",
        "3",
        "--seeds",
        "2",
        "--json",
        stdout=out,
    )
    iterative = json.loads(out.getvalue())["iterative"]
    assert (iterative["risk"], iterative["min"], iterative["budget"], iterative["ties_count_in_n"]) == (
        0.05,
        4,
        12,
        False,
    )
    lifecycle.do_update_settings(study, {"selection_method": "diffuse-iterative"}, None)
    run = IterativeRun.objects.get(study=study)
    assert (run.risk, run.min_n, run.budget) == (0.05, 4, 12)
    assert live._algorithm(run).ties_count_in_n is False
    out = StringIO()  # a command option still overrides the stored setting
    call_command(
        "simulate",
        "--study",
        "oracle",
        "--oracle",
        str(path),
        "--method",
        "diffuse-iterative",
        "--budgets",
        "3",
        "--seeds",
        "2",
        "--risk",
        "0.2",
        "--json",
        stdout=out,
    )
    assert json.loads(out.getvalue())["iterative"]["risk"] == 0.2
