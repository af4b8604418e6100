"""People where the LLM judges disagree, through the product: the judges' verdicts read from the database, the
stored run with its inclusion probabilities, the plan, the report's weighted estimate, and `simulate`."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from analytics.core.ppi import active_mean
from analytics.report.assembly import study_report
from analytics.sentences import empty_reason
from annotation.errors import ServiceError
from annotation.rating import imports
from annotation.studies import creation, lifecycle
from selection import services
from selection.core.sampling import active_inclusion, judge_disagreement
from selection.models import SelectionRun
from selection.strategies import COARSE_DISAGREEMENT
from tests.conftest import import_judge_verdicts


def _study(researcher, judges: tuple[str, ...] = ("judge-x", "judge-y")):
    """Thirty items, two systems, first samples only; ``judges`` gave verdicts in both orders on every item."""
    lines = [
        json.dumps(
            {
                "id": f"q{i}",
                "input": f"Question {i} about topic {i % 7}.",
                "outputs": {
                    "x": [f"An answer to question {i} that explains topic {i % 7} at length."],
                    "y": [f"Short reply {i}."],
                },
            }
        )
        for i in range(30)
    ]
    study = creation.do_create_study(researcher, "judged", ("\n".join(lines) + "\n").encode(), "j.jsonl")
    assert import_judge_verdicts(study, judges) == 30 * len(judges) * 2
    return study


@pytest.fixture
def judged(researcher):
    """Thirty items, two systems, first samples only; two judges gave verdicts in both orders on every item."""
    return _study(researcher)


def test_with_two_verdicts_an_item_the_design_gives_every_item_the_same_chance_and_the_report_says_why(researcher):
    study = _study(researcher, ("judge-x",))  # one judge, both orders: two verdicts an item
    lifecycle.do_update_settings(study, {"selection_method": "judge-disagreement", "budget": 10}, None)
    run = SelectionRun.objects.filter(study=study).latest("id")
    assert run.details["inclusion"] == pytest.approx([10 / 30] * 10)
    assert run.details["uniform_because"] == COARSE_DISAGREEMENT
    [entry] = study_report(study).win_rate_estimates
    assert entry.design == "weighted" and entry.note == f"Not drawn by the judges' disagreement: {COARSE_DISAGREEMENT}."


def test_the_judges_verdicts_are_read_per_item_as_scores_for_the_first_system(judged):
    comparison = judged.comparisons.select_related("system_a", "system_b").get()
    items = list(judged.items.order_by("position"))
    scores = services.judge_scores(comparison, items)
    assert scores.shape == (30, 4)
    # the helper's rule: judge j on item i says a tie when (i + j) % 5 == 0, the answer shown first when
    # (i + j) % 3 == 0 (so it flips with the order), else the first system of the pair
    for i in range(30):
        expected = []
        for j in range(2):
            if (i + j) % 5 == 0:
                expected += [0.5, 0.5]
            elif (i + j) % 3 == 0:
                expected += [1.0, 0.0]
            else:
                expected += [1.0, 1.0]
        assert sorted(scores[i]) == sorted(expected), i


def test_the_run_keeps_each_chosen_items_inclusion_probability_and_what_it_drew_from(judged):
    comparison = judged.comparisons.select_related("system_a", "system_b").get()
    items = list(judged.items.order_by("position"))
    chosen, run = services.do_run_selection(judged, comparison, "judge-disagreement", 10, seed=3)
    assert len(chosen) == 10 and len({i.pk for i in chosen}) == 10
    pi = active_inclusion(judge_disagreement(services.judge_scores(comparison, items)), 10, 0.5)
    by_id = {item.external_id: p for item, p in zip(items, pi, strict=True)}
    assert run.details["inclusion"] == pytest.approx([by_id[i] for i in run.items])
    assert run.details["candidate_items"] == [i.external_id for i in items]
    # items where the judges split get more than the floor; where they agree, exactly the floor s * n / N
    u = judge_disagreement(services.judge_scores(comparison, items))
    assert pi[u == 0] == pytest.approx(0.5 * 10 / 30) and np.all(pi[u > 0] > 0.5 * 10 / 30)


def test_over_many_seeds_each_item_is_drawn_as_often_as_its_probability_says(judged):
    comparison = judged.comparisons.select_related("system_a", "system_b").get()
    items = list(judged.items.order_by("position"))
    pi = active_inclusion(judge_disagreement(services.judge_scores(comparison, items)), 8, 0.5)
    context = services.do_build_selection_context(judged, comparison, items)
    from selection.strategies import get_strategy

    counts, rounds = np.zeros(30), 3000
    for seed in range(rounds):
        counts[get_strategy("judge-disagreement").select(context, 8, np.random.default_rng(seed))] += 1
    assert np.all(np.abs(counts / rounds - pi) <= 4 * np.sqrt(pi * (1 - pi) / rounds) + 1e-9)


def test_without_judge_verdicts_the_plan_and_simulate_say_what_to_do_first(researcher, tmp_path):
    lines = [
        json.dumps({"id": f"q{i}", "input": f"Q{i}", "outputs": {"x": [f"a{i}"], "y": [f"b{i}"]}}) for i in range(12)
    ]
    study = creation.do_create_study(researcher, "unjudged", ("\n".join(lines) + "\n").encode(), "u.jsonl")
    with pytest.raises(ServiceError, match="no LLM judge has judged these items: run a judge with 'Pairs to judge'"):
        lifecycle.do_update_settings(study, {"selection_method": "judge-disagreement", "budget": 3}, None)
    stored = type(study).objects.get(pk=study.pk).selection_settings
    assert stored.selection_method != "judge-disagreement"  # the failed change changed nothing
    oracle = tmp_path / "oracle.jsonl"
    oracle.write_text("".join(json.dumps({"item": f"q{i}", "winner": "x"}) + "\n" for i in range(12)))
    with pytest.raises(CommandError, match="no LLM judge has judged these items"):
        call_command("simulate", "--study", "unjudged", "--oracle", str(oracle), "--method", "judge-disagreement")


def _human_votes(study, items: list[str], winner_of) -> None:
    lines = [
        {
            "id": f"h-{item}",
            "item": item,
            "system_a": "x",
            "sample_a": 0,
            "system_b": "y",
            "sample_b": 0,
            "shown_first": "x",
            "rater": f"person-{n % 3}",
            "rater_kind": "human",
            "choice": winner_of(item),
        }
        for n, item in enumerate(items)
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "h.jsonl")


def test_the_report_weights_the_peoples_labels_by_their_inclusion_probabilities(judged):
    lifecycle.do_update_settings(judged, {"selection_method": "judge-disagreement", "budget": 10}, None)
    run = SelectionRun.objects.filter(study=judged).latest("id")
    chosen = run.items
    assert sorted(judged.tasks.values_list("item__external_id", flat=True)) == sorted(chosen)

    def winner(item):  # people prefer x on even questions, y on odd ones
        return "x" if int(item[1:]) % 2 == 0 else "y"

    labelled = chosen[:6]  # a study stopped part-way: 6 of the 10 drawn items judged
    _human_votes(judged, labelled, winner)
    report = study_report(judged)
    [entry] = report.win_rate_estimates
    assert (entry.design, entry.method, entry.labelled, entry.frame) == (
        "weighted",
        "judge-disagreement",
        6,
        30,
    )
    people = entry.estimates[0]
    assert people.label == "People alone, weighted" and (people.labelled, people.judge_only) == (6, 24)
    # people alone: the weighted estimate over all 30 candidates, each labelled item's pi scaled by 6/10 (the part
    # of the draw judged so far)
    pi = dict(zip(chosen, run.details["inclusion"], strict=True))
    ids = [f"q{i}" for i in range(30)]
    is_labelled = np.array([i in labelled for i in ids])
    expected = active_mean(
        np.array([1.0 if winner(i) == "x" else 0.0 for i in ids]),
        np.full(30, 0.5),
        np.array([pi.get(i, 1.0) * 6 / 10 for i in ids]),
        is_labelled,
        lam=0.0,
    )
    assert people.estimate == pytest.approx(expected.estimate)
    assert (people.low, people.high) == pytest.approx((expected.low, expected.high))
    [with_x] = [e for e in entry.estimates if e.judge == "judge-x"]
    assert 0 <= with_x.lam <= 1 and with_x.low <= with_x.estimate <= with_x.high
    assert {e.judge for e in entry.estimates} == {None, "judge-x", "judge-y", "all judges"}
    # the strengths' fit takes its labelled units for a uniform sample: not computed, and the page says why
    assert report.hybrid_strengths == []
    assert "were not a uniform random sample" in empty_reason("hybrid-strengths", report)


def test_labels_outside_the_draw_are_left_out_of_the_weighted_estimate(judged):
    lifecycle.do_update_settings(judged, {"selection_method": "judge-disagreement", "budget": 10}, None)
    chosen = SelectionRun.objects.filter(study=judged).latest("id").items
    outside = [f"q{i}" for i in range(30) if f"q{i}" not in chosen][:5]
    _human_votes(judged, chosen + outside, lambda item: "x")
    [entry] = study_report(judged).win_rate_estimates
    assert entry.labelled == 10  # the five labels outside the draw are not counted
    # every label in the draw says x: the weighted estimate is exactly 1, with or without the judge
    for row in entry.estimates:
        assert row.labelled == 10 and row.estimate == pytest.approx(1.0) and row.high == 1.0


def test_simulate_compares_the_estimates_of_each_design_with_the_people_as_the_oracle(judged, tmp_path):
    votes = [
        {
            "id": f"h{i}-{r}",
            "item": f"q{i}",
            "system_a": "x",
            "sample_a": 0,
            "system_b": "y",
            "sample_b": 0,
            "shown_first": "x",
            "rater": f"p{r}",
            "rater_kind": "human",
            "choice": "x" if i % 3 else "y",
        }
        for i in range(30)
        for r in range(2)
    ]
    # a judge in the file says the opposite everywhere: with --oracle-kind human it is not part of the oracle
    votes += [
        {
            **v,
            "id": f"j{v['id']}",
            "rater": "judge-z",
            "rater_kind": "judge",
            "choice": "y" if v["choice"] == "x" else "x",
        }
        for v in votes[::2]
    ]
    oracle = tmp_path / "votes.jsonl"
    oracle.write_text("".join(json.dumps(v) + "\n" for v in votes))
    out = StringIO()
    call_command(
        "simulate",
        "--study",
        "judged",
        "--oracle",
        str(oracle),
        "--oracle-kind",
        "human",
        "--method",
        "judge-disagreement,default",
        "--budgets",
        "6,12",
        "--seeds",
        "8",
        "--json",
        stdout=out,
    )
    document = json.loads(out.getvalue())
    assert document["oracle"] == {"x": 20, "y": 10, "tie": 0}
    assert "judge-disagreement" not in document["success"]  # its sample majority estimates nothing
    designs = document["estimates"]["designs"]
    assert set(designs) == {
        "random: people",
        "random: people+judges",
        "default: people",
        "default: people+judges",
        "judge-disagreement: people",
        "judge-disagreement: people+judges",
    }
    for by_budget in designs.values():
        for figures in by_budget.values():
            assert 0 <= figures["success"] <= 1 and 0 <= figures["coverage"] <= 1 and figures["width"] > 0
            assert figures["claimed"] > 0 and figures["realised"] > 0
    for figures in designs["random: people"].values():  # people alone on a random sample: (1 - n/N) S^2 / n exactly
        assert figures["realised"] == pytest.approx(figures["reference_mse"] / figures["mse"])
    assert document["estimates"]["verdicts"] == 120 and document["estimates"]["judged_items"] == 30
    out = StringIO()
    call_command(
        "simulate",
        "--study",
        "judged",
        "--oracle",
        str(oracle),
        "--oracle-kind",
        "judge",
        "--budgets",
        "6",
        "--seeds",
        "2",
        "--json",
        stdout=out,
    )
    assert json.loads(out.getvalue())["oracle"] == {"x": 10, "y": 20, "tie": 0}  # judge-z's view
    with pytest.raises(CommandError, match="--uniform-share must be above 0"):
        call_command(
            "simulate",
            "--study",
            "judged",
            "--oracle",
            str(oracle),
            "--method",
            "judge-disagreement",
            "--uniform-share",
            "0",
        )


def test_the_selection_page_shows_each_items_chance(client, researcher, judged):
    from django.urls import reverse

    lifecycle.do_update_settings(judged, {"selection_method": "judge-disagreement", "budget": 6}, None)
    run = SelectionRun.objects.filter(study=judged).latest("id")
    client.force_login(researcher)
    page = client.get(reverse("live_selection", args=[judged.pk])).content.decode()
    assert "6 of 30 candidate items released to raters" in page and "<th>Chance drawn</th>" in page
    assert "higher where the LLM judges disagree" in page
    for chance in run.details["inclusion"]:
        assert f"<td>{chance:.3f}</td>" in page
