"""``simulate --replay``: the study's own human judgments replayed item by item through each system pair's
anytime-valid decision, stopped at the first one, against the fixed design -- the JSON records independent checks
read (pair, seed, decision, judgments_used, judgments_fixed)."""

from __future__ import annotations

import json
import zlib
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.rating import imports
from annotation.studies import creation, lifecycle
from selection.core import decisions
from tests.conftest import study_jsonl


@pytest.fixture
def won(researcher):
    """60 items of sys-a vs sys-b, each judged by two people: sys-a wins every item (ties on the odd ones' second
    vote)."""
    study = creation.do_create_study(researcher, "won", study_jsonl(60), "w.jsonl")
    lines = [
        {
            "id": f"w{n}-{r}",
            "item": f"item-{n}",
            "system_a": "sys-a",
            "sample_a": 0,
            "system_b": "sys-b",
            "sample_b": 0,
            "shown_first": "sys-b",
            "rater": f"h{r}",
            "rater_kind": "human",
            "choice": "tie" if r and n % 2 else "sys-a",
        }
        for n in range(60)
        for r in (0, 1)
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "j.jsonl")
    return study


def replay_json(*args) -> list[dict]:
    out = StringIO()
    call_command("simulate", "--study", "won", "--replay", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


CONTRACT = {"pair", "seed", "decision", "judgments_used", "judgments_fixed"}  # what independent checks read


def test_each_seed_replays_the_items_in_its_own_order_and_stops_at_the_decision(won):
    records = replay_json("--seeds", "3", "--seed", "7", "--first-raters", "all", "--looks", "0")
    assert [r["seed"] for r in records] == [7, 8, 9]
    scores = np.array([1.0 if n % 2 == 0 else 0.75 for n in range(60)])  # item-n's mean of its two raters
    for r in records:
        assert set(r) == CONTRACT | {"system_a", "system_b", "items_used", "design", "alpha"}
        assert (r["pair"], r["system_a"], r["decision"], r["judgments_fixed"]) == ("sys-a vs sys-b", "sys-a", "a", 120)
        assert r["judgments_used"] == 2 * r["items_used"] < 120
        assert (r["design"], r["alpha"]) == ("continuous, whole items", 0.05)  # two systems: alpha is the pair's
    # the first record's items_used is the first n at which the sequence over those scores, in that seed's order,
    # clears a half
    expected = decisions.replay(scores, np.full(60, 2), np.random.default_rng([7, zlib.crc32(b"sys-a\x00sys-b")]))
    assert records[0]["items_used"] == expected.items_used


def test_the_default_design_buys_one_rater_per_item_first(won):
    """Items first by default: one rater per item at alpha / 2 (decisions.replay_one_rater_first), in the seed's
    order; the record says which design ran."""
    raters = [[1.0, 0.5 if n % 2 else 1.0] for n in range(60)]
    for r in replay_json("--seeds", "2", "--looks", "0"):
        assert CONTRACT <= set(r) and r["design"] == "continuous, one rater per item first"
        expected = decisions.replay_one_rater_first(
            raters, np.random.default_rng([r["seed"], zlib.crc32(b"sys-a\x00sys-b")]), costs=[[1, 1]] * 60
        )
        assert (r["decision"], r["judgments_used"], r["judgments_fixed"]) == (
            expected.decision,
            expected.judgments_used,
            120,
        )


def test_group_sequential_looks_and_the_judges_replay_with_their_fields(won):
    """--looks 5: the decision at the first of five looks (12, 24, ... items) that settles; --judges: the judges'
    verdicts known on every item, counted in judge_verdicts_used, people bought on a share of the items."""
    from tests.conftest import import_judge_verdicts

    for r in replay_json("--seeds", "2", "--looks", "5", "--first-raters", "all"):
        assert r["design"] == "group-sequential (5 looks), whole items"
        assert r["decision"] == "a" and r["items_used"] in (12, 24, 36, 48, 60)
        assert r["judgments_used"] == 2 * r["items_used"] and "judge_verdicts_used" not in r
    futile = replay_json("--seeds", "1", "--looks", "5", "--futility", "0.1")[0]
    assert "futility stop below 0.1" in futile["design"] and futile["decision"] == "a"  # a clear pair: decided
    with pytest.raises(CommandError, match="--futility goes with --looks"):
        replay_json("--looks", "0", "--futility", "0.1")
    with pytest.raises(CommandError, match="have not judged"):
        replay_json("--judges")
    import_judge_verdicts(won)
    for r in replay_json("--seeds", "2", "--judges", "--looks", "0"):
        assert CONTRACT | {"judge_verdicts_used"} <= set(r) and "judges inside" in r["design"]
        assert r["judge_verdicts_used"] > 0 and r["judgments_used"] < r["judgments_fixed"]


def test_the_null_replay_mirrors_items_and_the_text_output_sums_up(won):
    records = replay_json("--seeds", "4", "--null")
    assert len(records) == 4 and all(r["decision"] in ("a", "b", "undecided", "equivalent") for r in records)
    out = StringIO()
    call_command("simulate", "--study", "won", "--replay", "--seeds", "4", stdout=out)
    assert "sys-a vs sys-b" in out.getvalue() and "x fewer" in out.getvalue()


def test_replay_options_are_checked(won):
    with pytest.raises(CommandError, match="go with --replay"):
        call_command("simulate", "--study", "won", "--null")
    with pytest.raises(CommandError, match="go with --replay"):
        call_command("simulate", "--study", "won", "--looks", "5")
    with pytest.raises(CommandError, match="--oracle is required"):
        call_command("simulate", "--study", "won")
    with pytest.raises(CommandError, match="--margin"):
        call_command("simulate", "--study", "won", "--replay", "--margin", "0.7")


def test_the_ranking_replay_buys_the_adjacent_orders_and_reports_what_they_imply(researcher):
    """Three systems, the stronger chosen every time (a > b > c), 40 items each judged by one person: with the
    ranking as the goal the replay decides the two adjacent orders, and a vs c -- implied by them -- is bought less
    than its own decision needs, its record saying what is implied."""
    study = creation.do_create_study(researcher, "trio", study_jsonl(40, ("sys-a", "sys-b", "sys-c")), "t.jsonl")
    lines = [
        {
            "id": f"t{n}-{x}-{y}",
            "item": f"item-{n}",
            "system_a": x,
            "sample_a": 0,
            "system_b": y,
            "sample_b": 0,
            "shown_first": x,
            "rater": "h",
            "rater_kind": "human",
            "choice": x,
        }
        for n in range(40)
        for x, y in (("sys-a", "sys-b"), ("sys-a", "sys-c"), ("sys-b", "sys-c"))
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "j.jsonl")
    out = StringIO()
    call_command(
        "simulate",
        "--study",
        "trio",
        "--replay",
        "--goal",
        "ranking",
        "--seeds",
        "2",
        "--margin",
        "0",
        "--json",
        stdout=out,
    )
    records = json.loads(out.getvalue())
    # three systems: the study holds alpha over its three pairs (error control auto), each pair at alpha / 3
    lower, _ = decisions.betting_confidence_sequence([1.0] * 40, 0.05 / 3)
    alone = int(np.argmax(lower > 0.5)) + 1
    assert all(r["alpha"] == pytest.approx(0.05 / 3) for r in records)
    for r in records:
        assert set(r) >= {"pair", "seed", "decision", "judgments_used", "judgments_fixed", "implied"}
        if r["pair"] == "sys-a vs sys-c":
            assert r["decision"] == "undecided" and r["implied"] == "a" and r["judgments_used"] < alone
        else:
            assert r["decision"] == "a" and r["implied"] is None and r["judgments_used"] == alone
    assert {r["seed"] for r in records} == {0, 1} and len(records) == 6


def test_the_leaderboards_mark_which_adjacent_orders_are_decided(researcher):
    """sys-a beats sys-b on all 40 items, sys-b and sys-c tie on every one: on each leaderboard sys-a's place above
    sys-b is decided and sys-b's above sys-c is equivalent within the margin (0.1) (the pairs' anytime-valid decisions);
    the CSV table has the column."""
    from analytics.report.assembly import study_report
    from analytics.tables import report_tables

    study = creation.do_create_study(researcher, "marks", study_jsonl(40, ("sys-a", "sys-b", "sys-c")), "m.jsonl")
    lines = [
        {
            "id": f"m{n}-{x}-{y}",
            "item": f"item-{n}",
            "system_a": x,
            "sample_a": 0,
            "system_b": y,
            "sample_b": 0,
            "shown_first": x,
            "rater": "h",
            "rater_kind": "human",
            "choice": choice,
        }
        for n in range(40)
        # sys-c beats sys-a once: a system that never loses has no Bradley-Terry rating (the MLE diverges)
        for x, y, choice in (
            ("sys-a", "sys-b", "sys-a"),
            ("sys-a", "sys-c", "sys-c" if n == 0 else "sys-a"),
            ("sys-b", "sys-c", "tie"),
        )
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "j.jsonl")
    # each pair at alpha itself (what the marks read, not the study-wide split, is under test here)
    study = lifecycle.do_update_settings(study, {"decision_margin": 0.1, "error_control": "per_pair"}, None)
    report = study_report(study)
    stopping = {(s.system_a, s.system_b): s for s in report.stopping}
    # what the marks read: the decisions of the confidence sequence over the 40 item scores
    assert decisions.pair_decision([1.0] * 40, margin=0.1).decision == stopping[("sys-a", "sys-b")].decision == "a"
    assert (
        decisions.pair_decision([0.5] * 40, margin=0.1).decision
        == stopping[("sys-b", "sys-c")].decision
        == "equivalent"
    )
    for board in (report.elo.leaderboard, report.bradley_terry.leaderboard):
        assert [r.system for r in board][0] == "sys-a"
        marks = {r.system: r.order_below for r in board}
        assert marks["sys-a"] == "decided" and marks[board[-1].system] is None
        assert marks[board[1].system] == "equivalent"  # sys-b and sys-c, whichever is above
    header, rows = report_tables(report)["leaderboard-bradley_terry"]
    assert header[-1] == "order_above_next" and rows[0][-1] == "decided"


def test_the_default_design_is_the_one_the_study_runs(won):
    """Without --looks or --futility the replay runs the study's own decision setting (decision_looks,
    decision_futility: what its live plan runs), and says so: a new study's five planned looks with futility
    stops at 0.1, one rater per item first spending designs.first_share(5) = 0.3 of alpha on its first phase --
    each record what designs.replay gives in the seed's order -- and continuous monitoring once the study is set so."""
    from selection.core import designs

    settings = won.selection_settings
    assert (settings.decision_looks, settings.decision_futility) == (5, 0.1)  # a new study's defaults
    raters = [[1.0, 0.5 if n % 2 else 1.0] for n in range(60)]
    design = designs.Design(looks=5, futility=0.1, first_share=0.3)
    for r in replay_json("--seeds", "2"):
        assert (
            r["design"]
            == design.name
            == (
                "group-sequential (5 looks), futility stop below 0.1 conditional power, "
                "one rater per item first (phase 1 at 0.3 alpha)"
            )
        )
        rng = np.random.default_rng([r["seed"], zlib.crc32(b"sys-a\x00sys-b")])
        expected = designs.replay(raters, rng, design, 0.05, 0.05, costs=[[1, 1]] * 60)
        assert (r["decision"], r["items_used"], r["judgments_used"]) == (
            expected.decision,
            expected.items_used,
            expected.judgments_used,
        )
    out = StringIO()
    call_command("simulate", "--study", "won", "--replay", "--seeds", "1", stdout=out)
    assert f"design: {design.name} (the study's setting)" in out.getvalue()
    # --futility alone replaces the study's threshold, at the study's looks
    assert "futility stop below 0.3" in replay_json("--futility", "0.3")[0]["design"]
    lifecycle.do_update_settings(won, {"decision_looks": 3, "decision_futility": 0.0}, None)
    assert replay_json()[0]["design"] == "group-sequential (3 looks), one rater per item first (phase 1 at 0.3 alpha)"
    lifecycle.do_update_settings(won, {"decision_looks": 0}, None)
    assert replay_json()[0]["design"] == "continuous, one rater per item first"
    with pytest.raises(CommandError, match="--futility goes with --looks"):
        replay_json("--futility", "0.1")  # the study looks after every item: no planned look to stop at
