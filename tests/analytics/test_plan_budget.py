"""``plan_budget``: before paying, per system pair and margin, the items and judgments its decision needs
at the stated power, from the pair's own pilot (humans, else its judges as a prior, else the widest variance)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from scipy import stats

from analytics import budgeting
from annotation.models import Study, Task
from annotation.rating import imports
from annotation.studies import creation, lifecycle
from bench import prd_data
from selection.core import budget
from tests.analytics.conftest import PRD
from tests.conftest import shared_rows, study_jsonl


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
        assert p["judgments"] == p["items"] * p["raters"] * pilot.pairs_per_assignment == p["items"] * p["raters"] * 5
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


def test_an_item_with_one_output_per_system_is_one_pair_whatever_n_says(researcher):
    """163 items, one output per system, N = 5 pairs per assignment (the default): each task holds one pair, so a
    plan's judgments are items x raters (the planner once printed 815 judgments and 6.8 rater-hours for 163 items)."""
    study = creation.do_create_study(researcher, "pilot", study_jsonl(163, k=1), "p.jsonl")
    assert study.pairs_per_assignment == 5
    comparison = study.comparisons.get()
    assert budgeting.pairs_per_item(study) == {comparison.pk: 1.0}
    # the formula: 163 items x 1 rater x 1 pair; 30 s per judgment (the default pace) makes 1.4 rater-hours, not 6.8
    assert budget.judgments(163, 1, 1.0) == 163 and budget.judgments(163, 3, 1.0) == 489
    assert round(budget.judgments(163, 1, 1.0) * 30 / 3600, 1) == 1.4
    found = plans("--margins", "0.2,0.3", "--raters", "1,3")
    assert found and all(p["pairs_per_item"] == 1 for p in found)
    for p in found:
        assert p["judgments"] == p["items"] * p["raters"]
        assert p["rater_hours"] == round(p["items"] * p["raters"] * 30 / 3600, 1)
        # an assignment holds whole one-pair tasks up to the study's 10 judgments per assignment
        assert p["assignments"] == -(-p["judgments"] // study.judgments_per_assignment)
    # before the pair has tasks, the count is what the scheduler would draw from the items' samples
    Task.objects.filter(study=study).delete()
    assert budgeting.pairs_per_item(study) == {comparison.pk: 1.0}


def test_the_pairs_an_item_gives_follow_the_sampling_rule_of_its_outputs(researcher):
    """K_A = 1, K_B = 3 samples, N = 5: one-to-one pairs min(N, K_A, K_B) = 1; the grid min(N, K_A x K_B) = 3."""
    lines = [
        {
            "id": f"item-{i}",
            "input": f"In {i}.",
            "outputs": {"sys-a": [f"a {i}"], "sys-b": [f"b {i} {j}" for j in range(3)]},
        }
        for i in range(6)
    ]
    study = creation.do_create_study(
        researcher, "pilot", "".join(json.dumps(x) + "\n" for x in lines).encode(), "p.jsonl"
    )
    comparison = study.comparisons.get()
    assert budgeting.pairs_per_item(study) == {comparison.pk: 1.0}
    lifecycle.do_update_settings(study, {"sample_pairing": "grid"}, None)
    study.refresh_from_db()
    assert budgeting.pairs_per_item(study) == {comparison.pk: 3.0}  # the rebuilt plan's tasks hold three
    Task.objects.filter(study=study).delete()
    assert budgeting.pairs_per_item(study) == {comparison.pk: 3.0}  # and the scheduler's rule says so too


def test_the_intra_item_correlation_is_the_one_way_anova_estimator_by_hand():
    """Unbalanced items [1, 0, 1], [0, 0], [1, 1, 1, 0] (and [1/2], one rater: left out of rho). Grand mean 5/9;
    SSB = 3 (1/9)^2 + 2 (5/9)^2 + 4 (7/36)^2 = 29/36, MSB = 29/72; SSW = 2/3 + 0 + 3/4, MSW = (17/12) / 6 = 17/72;
    n0 = (9 - 29/9) / 2 = 26/9; rho = (12/72) / (29/72 + (17/9)(17/72)) = 54/275."""
    groups = [[1, 0, 1], [0, 0], [1, 1, 1, 0], [0.5]]
    pilot = budget.pilot_of(groups)
    assert pilot.rho == pytest.approx(54 / 275) and pilot.rho_items == 3 and pilot.rho_seen
    assert pilot.outcome_variance == pytest.approx(np.var([1, 0, 1, 0, 0, 1, 1, 1, 0, 0.5], ddof=1))
    # the same from scipy's one-way ANOVA F: rho = (F - 1) / (F + n0 - 1)
    f = stats.f_oneway(*[np.array(g, dtype=float) for g in groups[:3]]).statistic
    assert pilot.rho == pytest.approx((f - 1) / (f + 26 / 9 - 1))
    assert budget.design_effect(pilot.rho, 3) == pytest.approx(1 + 2 * 54 / 275)
    # a second rater buys (1 - rho) / (1 + rho) of a new item's information per judgment: 0.11 at rho = 0.8
    assert budget.rater_share(0.8) == pytest.approx(0.2 / 1.8)
    assert budget.rater_share(0.5, 3) == pytest.approx(0.5 / (2 * 1.5))  # a third: (1 - rho) / ((1 + 2 rho)(1 + rho))


def test_the_advice_is_new_items_until_the_pool_runs_short():
    assert budget.advise({1: 120, 3: 60}, pool=200) == budget.Advice(budget.NEW_ITEMS, 1)
    assert budget.advise({1: 120, 3: 60}, pool=100) == budget.Advice(budget.ANOTHER_RATER, 3)
    assert budget.advise({1: 120, 3: None}, pool=100) == budget.Advice(budget.MORE_ITEMS, None)


def test_on_prd_a_second_rater_buys_what_the_design_effect_says_and_less_than_a_new_item():
    """The item-resampled truth on PRD's 28 system pairs of 80 questions x 3 human votes: with the same judgments,
    design A labels n items with one random rater each, design B n / 2 items with two of an item's raters, items
    drawn whole with replacement. Var(B) / Var(A) = 1 + rho (the design effect of two raters over the one of one),
    so pooled over the pairs, sum Var(B) / sum Var(A) - 1 is the outcome-variance-weighted mean of the pairs' rho --
    which the planner's estimator must give, within three standard errors of the replications (the variance of R
    estimates' sample variance is 2 v^2 / (R - 1)) and 1 / n (the bootstrap's plug-in mean squares against ANOVA's
    unbiased ones). And a new item buys more than a second rater: Var(A) < Var(B)."""
    from tests.selection.core.test_decisions import prd_votes

    votes = [np.array(v) for v in prd_votes().values() if all(len(x) == 3 for x in v)]
    assert len(votes) == 28 and {len(x) for x in votes} == {80}
    rounds, n = 2000, 80
    rng = np.random.default_rng(42)
    var_a, var_b, weighted, weights = [], [], 0.0, 0.0
    for x in votes:
        pilot = budget.pilot_of(x.tolist())
        weighted, weights = weighted + pilot.outcome_variance * pilot.rho, weights + pilot.outcome_variance
        items = rng.integers(0, n, (rounds, n))
        var_a.append(x[items, rng.integers(0, 3, (rounds, n))].mean(axis=1).var(ddof=1))
        items = rng.integers(0, n, (rounds, n // 2))
        first = rng.integers(0, 3, (rounds, n // 2))
        second = (first + rng.integers(1, 3, (rounds, n // 2))) % 3  # another of the item's three raters
        var_b.append(((x[items, first] + x[items, second]) / 2).mean(axis=1).var(ddof=1))
    a, b = np.array(var_a), np.array(var_b)
    truth = b.sum() / a.sum() - 1
    relative_se = np.sqrt(2 / (rounds - 1) * ((a**2).sum() / a.sum() ** 2 + (b**2).sum() / b.sum() ** 2))
    estimate = weighted / weights
    assert 0.1 < estimate < 0.3  # PRD's raters agree only a little (0.01-0.33 per pair)
    assert abs(estimate - truth) <= 3 * relative_se * (1 + truth) + 1 / n
    assert truth > 3 * relative_se * (1 + truth)  # new items win, beyond the replications' noise


def load_prd_humans(folder: Path) -> Study:
    """PRD's 80 questions, five systems' one answer each, and the human votes only (the judges' folders left out)."""
    get_user_model().objects.create_user("prd-owner")
    call_command("load_prd", "--data", str(folder), "--owner", "prd-owner", stdout=StringIO())
    study = Study.objects.get(name="prd-vicuna80")
    # as PRD's people did, every system pair on every question (the default spreads the questions over the pairs)
    return lifecycle.do_update_settings(study, {"scheduling": "no_repeat"}, None)


@pytest.fixture(scope="module")
def prd_rows(django_db_setup, django_db_blocker, tmp_path_factory):
    """PRD with its human votes, loaded once for the module (``shared_rows``)."""
    if not (PRD / "generations").is_dir():
        pytest.skip(f"{PRD} is missing: the real data lives in ../shared/data (see its README)")
    folder = tmp_path_factory.mktemp("prd-humans")
    for name in ("generations", "prompts"):
        (folder / name).symlink_to(PRD / name)
    for path in PRD.glob("*-human-reviewer*.jsonl"):
        (folder / path.name).symlink_to(path)
    yield from shared_rows(django_db_blocker, lambda: load_prd_humans(folder))


@pytest.mark.slow(seconds=7)
def test_on_prd_the_plan_counts_one_pair_an_item_and_advises_new_items(db, prd_rows):
    """PRD's five systems have one answer per question: every pair's plan is items x raters judgments (not x N = 5).
    Its rho is the estimator's on the files' votes (the pairs without claude: 3 votes an item; with claude: 1, so not
    seen), and the advice is new items, one rater each, wherever the pool holds the items."""
    study = Study.objects.get(pk=prd_rows.pk)
    assert study.pairs_per_assignment == 5
    out = StringIO()
    call_command(
        "plan_budget", "--study", study.name, "--margins", "0.2,0.3", "--raters", "1,3", "--rounds", "40",
        "--max-items", "400", "--json", stdout=out,
    )  # fmt: skip
    found = json.loads(out.getvalue())
    votes = prd_data.read(PRD, "human")
    assert len({p["pair"] for p in found}) == 10
    for p in found:
        assert p["pairs_per_item"] == 1 and p["judgments"] == p["items"] * p["raters"]
        pilot = budget.pilot_of(list(votes[(p["system_a"], p["system_b"])].values()))
        assert p["rho_seen"] == ("claude" not in p["pair"]) == pilot.rho_seen
        assert p["rho"] == round(pilot.rho, 4)
        if p["rho_seen"]:
            assert p["second_rater_share"] == round((1 - pilot.rho) / (1 + pilot.rho), 4) < 1
    by = {(p["pair"], p["margin"], p["raters"]): p for p in found}
    for (pair, margin, raters), p in by.items():
        one, three = by[(pair, margin, 1)], by[(pair, margin, 3)]
        if one["items"] is not None and one["items"] <= one["items_in_pool"]:  # new items while the pool lasts
            assert p["advice"] == budget.NEW_ITEMS and p["recommended"] == (raters == 1)
        elif one["rho_seen"] and three["items"] is not None and three["items"] <= three["items_in_pool"]:
            assert p["advice"] == budget.ANOTHER_RATER and p["recommended"] == (raters == 3)
        else:  # rho not seen (taken as 1): another rater changes nothing
            assert p["advice"] == budget.MORE_ITEMS and not p["recommended"]
    # a 30-point margin needs a few dozen questions, fewer than PRD's 80: every pair is advised new items
    assert {p["advice"] for p in found if p["margin"] == 0.3} == {budget.NEW_ITEMS}
    assert "new items come first: one rater per item" in budgeting.advice_words(found)
    # a pilot of LLM judges' verdicts is a prior for the variance, not a measure of how far people agree
    as_judges = [{**p, "pilot": "judges"} for p in found]
    assert "is not seen yet" in budgeting.advice_words(as_judges) and "ρ =" not in budgeting.advice_words(as_judges)
