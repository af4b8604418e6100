"""Every strategy through the ORM: chosen items, stored runs, reproducibility, and the select command."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.studies import creation, lifecycle
from selection import services
from selection.models import SelectionRun
from selection.strategies import STATIC_STRATEGIES
from tests.conftest import import_judge_verdicts, study_jsonl


@pytest.fixture
def varied_study(researcher):
    """Eight items whose two systems differ in varied ways, K = 2."""
    words = ["market", "falcon", "ferry", "library", "bakery", "river", "solar", "museum"]
    lines = []
    for i, w in enumerate(words):
        lines.append(
            json.dumps(
                {
                    "id": f"v{i}",
                    "input": f"About the {w}.",
                    "outputs": {
                        "a": [f"The {w} opened on Monday.", f"On Monday the {w} opened."],
                        "b": [
                            f"The {w} opened." if i % 2 else f"Nothing about {words[i - 1]} here.",
                            f"A {w} story {i}.",
                        ],
                    },
                }
            )
        )
    study = creation.do_create_study(researcher, "varied", ("\n".join(lines) + "\n").encode(), "v.jsonl")
    import_judge_verdicts(study)  # for the judge-disagreement strategy
    return study


@pytest.mark.parametrize("method", STATIC_STRATEGIES)
def test_every_strategy_chooses_reproducibly_among_the_candidates(varied_study, method):
    comparison = varied_study.comparisons.get()
    params = {"metric": "rouge1", "threshold": 0.0}
    chosen, run = services.do_run_selection(varied_study, comparison, method, 4, seed=11, params=params)
    again, _ = services.do_run_selection(varied_study, comparison, method, 4, seed=11, params=params)
    ids = [i.external_id for i in chosen]
    assert 1 <= len(ids) <= 4 and len(set(ids)) == len(ids)
    assert set(ids) <= {f"v{i}" for i in range(8)}
    assert ids == [i.external_id for i in again]
    assert (run.method, run.seed, run.budget, run.items, run.params, run.candidates) == (method, 11, 4, ids, params, 8)


def test_the_threshold_keeps_only_separable_items(varied_study):
    comparison = varied_study.comparisons.get()
    [sep_run] = services.do_compute_separability(varied_study, "rouge1")
    deltas = dict(sep_run.items.values_list("item__external_id", "delta"))
    cut = sorted(deltas.values())[4]
    chosen, _ = services.do_run_selection(
        varied_study, comparison, "separability-threshold", 8, 1, {"metric": "rouge1", "threshold": cut}
    )
    assert {i.external_id for i in chosen} == {k for k, d in deltas.items() if d >= cut}


def test_the_plan_uses_the_studys_strategy_and_budget(varied_study):
    lifecycle.do_update_settings(varied_study, {"selection_method": "stratified", "budget": 3}, None)
    assert varied_study.tasks.count() == 3
    run = SelectionRun.objects.filter(study=varied_study, method="stratified").latest("id")
    assert sorted(run.items) == sorted(varied_study.tasks.values_list("item__external_id", flat=True))


def test_the_select_command_prints_and_stores_runs(varied_study):
    out = StringIO()
    call_command(
        "select", "--study", "varied", "--method", "diffuse", "--budget", "3", "--seed", "5", "--json", stdout=out
    )
    [run] = json.loads(out.getvalue())
    assert run["method"] == "diffuse" and len(run["items"]) == 3 and run["seed"] == 5
    assert SelectionRun.objects.get(pk=run["id"]).items == run["items"]


def test_select_apply_rebuilds_the_plan(varied_study):
    call_command("select", "--study", "varied", "--method", "random", "--budget", "2", "--apply", stdout=StringIO())
    varied_study.refresh_from_db()
    stored = varied_study.selection_settings
    assert (stored.selection_method, stored.budget, varied_study.tasks.count()) == ("random", 2, 2)


def test_select_reports_impossible_requests(varied_study, researcher):
    with pytest.raises(CommandError, match="no item has separability >= 5.0"):
        call_command(
            "select",
            "--study",
            "varied",
            "--method",
            "separability-threshold",
            "--metric",
            "rouge1",
            "--threshold",
            "5",
        )
    single = creation.do_create_study(researcher, "k1", study_jsonl(3, k=1), "k.jsonl")
    with pytest.raises(CommandError, match="undefined for every item"):
        call_command("select", "--study", single.name, "--method", "separability-weighted", "--metric", "rouge1")
    with pytest.raises(CommandError, match="--budget must be at least 1"):
        call_command("select", "--study", "varied", "--method", "random", "--budget", "0")


def test_the_tree_is_computed_once_and_stored(varied_study, monkeypatch):
    from selection.core import diffuse
    from selection.models import StoredTree

    comparison = varied_study.comparisons.get()
    first, _ = services.do_run_selection(varied_study, comparison, "diffuse", 3, seed=1)
    assert StoredTree.objects.filter(comparison=comparison).count() == 1

    def no_clustering(*args, **kwargs):
        raise AssertionError("the stored tree must be reused")

    monkeypatch.setattr(services, "ward_tree", no_clustering)
    monkeypatch.setattr(diffuse, "ward_linkage", no_clustering)
    again, _ = services.do_run_selection(varied_study, comparison, "diffuse", 3, seed=1)
    assert [i.pk for i in again] == [i.pk for i in first]


def test_separability_weights_come_from_the_study(varied_study):
    lifecycle.do_update_settings(
        varied_study,
        {
            "selection_method": "separability-weighted",
            "budget": 3,
            "separability_metric": "rouge1",
            "sep_threshold_t": 0.5,
            "sep_alpha": 3.0,
            "sep_beta": 9.0,
        },
        None,
    )
    run = SelectionRun.objects.filter(study=varied_study, method="separability-weighted").latest("id")
    assert run.params == {"metric": "rouge1", "threshold": 0.2, "T": 0.5, "alpha": 3.0, "beta": 9.0}
    assert varied_study.tasks.count() == 3


@pytest.fixture
def forty_items(researcher):
    """Forty items, three systems (three system pairs, so random scheduling splits the items), K = 3."""
    topics = ["market", "falcon", "ferry", "library", "bakery", "river", "solar", "museum", "flood", "bridge"]
    lines = []
    for i in range(40):
        t, u = topics[i % 10], topics[(i * 3 + 1) % 10]
        lines.append(
            json.dumps(
                {
                    "id": f"i{i}",
                    "input": f"About the {t}.",
                    "outputs": {
                        "a": [f"The {t} opened on day {i}.", f"On day {i} the {t} opened.", f"{t} {i}"],
                        "b": [
                            f"The {u} closed.",
                            f"Nothing about the {t}." if i % 3 else f"The {t} opened on day {i}.",
                            f"A {u} story {i % 7}.",
                        ],
                        "c": [f"{t} and {u}", f"The {t} and the {u} on day {i}.", "No comment."],
                    },
                }
            )
        )
    study = creation.do_create_study(researcher, "forty", ("\n".join(lines) + "\n").encode(), "f.jsonl")
    import_judge_verdicts(study)  # for the judge-disagreement strategy
    return study


def released(study) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in study.comparisons.select_related("system_a", "system_b"):
        out[f"{c.system_a.name}-{c.system_b.name}"] = list(
            study.tasks.filter(comparison=c).order_by("position").values_list("item__external_id", flat=True)
        )
    return out


def test_select_apply_reports_the_run_the_plan_released(forty_items):
    # The defect: the plan used the stored T, alpha, beta while `select` used the defaults, so the command
    # printed (and stored) another run than the one raters got.
    lifecycle.do_update_settings(forty_items, {"sep_threshold_t": 0.9, "sep_alpha": 5, "sep_beta": 40}, None)
    out = StringIO()
    call_command(
        "select",
        "--study",
        "forty",
        "--method",
        "separability-weighted",
        "--budget",
        "5",
        "--metric",
        "rouge1",
        "--apply",
        "--json",
        stdout=out,
    )
    runs = json.loads(out.getvalue())
    forty_items.refresh_from_db()
    assert forty_items.selection_settings.separability_metric == "rouge1"  # the override is the study's setting now
    plan = released(forty_items)
    assert {f"{r['system_a']}-{r['system_b']}": r["items"] for r in runs} == plan
    assert all(r["params"] == {"metric": "rouge1", "threshold": 0.2, "T": 0.9, "alpha": 5, "beta": 40} for r in runs)


@pytest.mark.parametrize("method", STATIC_STRATEGIES)
def test_the_plan_select_and_simulate_use_the_same_parameters_and_items(forty_items, method, tmp_path):
    lifecycle.do_update_settings(
        forty_items,
        {
            "selection_method": method,
            "budget": 4,
            "separability_metric": "rouge1",
            "separability_threshold": -0.5,
            "sep_threshold_t": 0.3,
            "sep_alpha": 3,
            "sep_beta": 9,
            "seed": 5,
        },
        None,
    )
    plan = released(forty_items)
    out = StringIO()
    call_command("select", "--study", "forty", "--method", method, "--budget", "4", "--json", stdout=out)
    assert {f"{r['system_a']}-{r['system_b']}": r["items"] for r in json.loads(out.getvalue())} == plan
    oracle = tmp_path / "oracle.jsonl"
    oracle.write_text("".join(json.dumps({"item": f"i{i}", "winner": "a"}) + "\n" for i in range(40)))
    out = StringIO()
    call_command(
        "simulate",
        "--study",
        "forty",
        "--pair",
        "a,b",
        "--oracle",
        str(oracle),
        "--method",
        method,
        "--budgets",
        "4",
        "--seeds",
        "2",
        "--json",
        stdout=out,
    )
    stored = SelectionRun.objects.filter(study=forty_items).latest("pk").params
    assert (
        json.loads(out.getvalue())["parameters"]
        == stored
        == {"metric": "rouge1", "threshold": -0.5, "T": 0.3, "alpha": 3, "beta": 9}
    )


def test_the_study_shows_what_the_selection_did_with_diffuse_cluster_sizes(researcher_client, varied_study):
    lifecycle.do_update_settings(varied_study, {"selection_method": "diffuse", "budget": 3}, None)
    run = SelectionRun.objects.filter(study=varied_study, method="diffuse").latest("id")
    sizes = run.details["cluster_sizes"]
    # one representative per cluster of the cut into 3: the clusters partition the 8 candidates
    assert len(sizes) == 3 and sum(sizes) == 8 and min(sizes) >= 1
    study_page = researcher_client.get(varied_study.get_absolute_url()).content.decode()
    assert "DiffUse (static)" in study_page and "a budget of <strong>3</strong>" in study_page
    assert f"seed <code>{varied_study.seed}</code>" in study_page and "with DiffUse's cluster sizes" in study_page
    page = researcher_client.get(reverse("live_selection", args=[varied_study.pk])).content.decode()
    assert "3 of 8 candidate items released to raters" in page and "Cluster size" in page
    released = list(varied_study.tasks.order_by("position").values_list("item__external_id", flat=True))
    rows = re.findall(r'<td>\d+</td><td class="id"><a href="[^"]+">(v\d)</a></td>\s*<td>(\d+)</td>', page)
    assert [r[0] for r in rows] == released
    assert sorted(int(r[1]) for r in rows) == sorted(sizes)
    assert dict(rows) == {item: str(size) for item, size in zip(run.items, sizes, strict=True)}
