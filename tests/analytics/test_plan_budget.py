"""``plan_budget``: before paying, per system pair and margin, the items and judgments its decision needs
at the stated power, from the pair's own pilot (humans, else its judges as a prior, else the widest variance)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.rating import imports
from annotation.studies import creation
from selection.core import budget
from tests.conftest import study_jsonl


def imported(study, kind: str, raters: tuple[str, ...]) -> None:
    lines = [
        {
            "id": f"{kind}-{n}-{r}",
            "item": f"item-{n}",
            "system_a": "sys-a",
            "sample_a": 0,
            "system_b": "sys-b",
            "sample_b": 0,
            "shown_first": "sys-a",
            "rater": r,
            "rater_kind": kind,
            "choice": "sys-a" if (n + len(r)) % 3 else "sys-b",
        }
        for n in range(30)
        for r in raters
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), f"{kind}.jsonl")


def plans(*args) -> list[dict]:
    out = StringIO()
    call_command("plan_budget", "--study", "pilot", "--rounds", "40", "--max-items", "400", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.fixture
def pilot(researcher):
    return creation.do_create_study(researcher, "pilot", study_jsonl(30), "p.jsonl")


def test_a_plan_per_margin_and_raters_from_the_human_pilot(pilot):
    imported(pilot, "human", ("h1", "h22"))
    imported(pilot, "judge", ("j",))  # the humans come first: the judges are only a prior
    found = plans("--margins", "0.2,0.3", "--raters", "1,2")
    assert [(p["margin"], p["raters"]) for p in found] == [(0.2, 1), (0.3, 1), (0.2, 2), (0.3, 2)]
    assert {p["pilot"] for p in found} == {"humans"} and {p["pair"] for p in found} == {"sys-a vs sys-b"}
    by = {(p["margin"], p["raters"]): p for p in found}
    assert by[(0.3, 1)]["items"] <= by[(0.2, 1)]["items"]  # a wider margin is cheaper to tell
    for p in found:
        # each rater of an item judges its N sampled pairs
        assert p["judgments"] == p["items"] * p["raters"] * pilot.pairs_per_assignment
        assert p["assignments"] == -(-p["judgments"] // pilot.judgments_per_assignment)  # whole HITs
    # the numbers are the planner's on the pilot's outcomes (each rater's outcome per item)
    outcomes = [[1.0 if (n + len(r)) % 3 else 0.0 for r in ("h1", "h22")] for n in range(30)]
    pilot_stats = budget.pilot_of(outcomes)
    assert (found[0]["outcome_variance"], found[0]["rho"]) == (
        round(pilot_stats.outcome_variance, 4),
        round(pilot_stats.rho, 4),
    )
    assert found[0]["items"] == budget.items_needed(
        0.2, pilot_stats.item_variance(1), max_items=400, rounds=40, seed=pilot.seed
    )


def test_without_people_the_judges_are_the_prior_and_without_them_the_widest_variance(pilot):
    assert {(p["pilot"], p["outcome_variance"], p["rho"]) for p in plans("--margins", "0.2")} == {("none", 0.25, 1.0)}
    imported(pilot, "judge", ("j",))
    assert {p["pilot"] for p in plans("--margins", "0.2")} == {"judges"}


def test_the_curve_is_drawn(pilot, tmp_path):
    imported(pilot, "human", ("h1",))
    path = tmp_path / "curve.svg"
    found = plans("--margins", "0.2,0.3", "--raters", "1", "--plot", str(path))
    svg = path.read_text()
    assert svg.startswith("<?xml") and "judgments needed" in svg and "1 rater per item" in svg
    assert "(sys-a vs sys-b)" in svg
    assert "<polyline" in svg or "<path" in svg
    for p in found:  # each point's judgments are written on the plot's tooltips or axis
        assert str(p["judgments"]) in svg.replace(",", "")
    with pytest.raises(CommandError, match="svg"):
        plans("--plot", str(tmp_path / "curve.png"))


def test_the_table_reads_as_a_plan_and_bad_options_are_refused(pilot):
    out = StringIO()
    call_command(
        "plan_budget",
        "--study",
        "pilot",
        "--margins",
        "0.2",
        "--raters",
        "1",
        "--rounds",
        "20",
        "--max-items",
        "200",
        stdout=out,
    )
    assert "sys-a vs sys-b" in out.getvalue() and "HITs" in out.getvalue() and "30 s per judgment" in out.getvalue()
    for bad in (["--margins", "0.6"], ["--raters", "0"], ["--power", "1"], ["--pair", "sys-a,nobody"]):
        with pytest.raises(CommandError):
            call_command("plan_budget", "--study", "pilot", *bad)
