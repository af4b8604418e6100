"""One of the separability paper's MTurk configurations (../shared/data/separability_human_study), imported once for
the module: every rating lands, and the report's consistency and stopping table read as the files do by hand."""

from __future__ import annotations

import csv
import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from annotation.models import Study
from tests.analytics.test_commands import MTURK, needs
from tests.conftest import shared_rows


def import_configuration() -> Study:
    get_user_model().objects.create_user("mturk-owner")
    call_command(
        "import_mturk_ratings",
        "--data",
        str(MTURK),
        "--config",
        "mistral-7b_vicuna-7b_samsum",
        "--owner",
        "mturk-owner",
        stdout=StringIO(),
    )
    return Study.objects.get(name="mturk-mistral-7b_vicuna-7b_samsum")


@pytest.fixture(scope="module")
def mturk_rows(django_db_setup, django_db_blocker):
    """One MTurk configuration imported once for the module's tests (``shared_rows``)."""
    needs(MTURK / "human_ratings_long.csv")
    yield from shared_rows(django_db_blocker, import_configuration)


@pytest.fixture
def mturk_study(db, mturk_rows):
    return Study.objects.get(pk=mturk_rows.pk)  # read afresh: no cached attribute of one test reaches the next


def test_the_mturk_study_imports_with_every_rating(mturk_study):
    assert mturk_study.items.count() == 50 and mturk_study.judgments.count() == 750
    assert set(mturk_study.systems.values_list("name", flat=True)) == {"mistral-7b", "vicuna-7b"}


def test_the_report_computes_the_mturk_consistency_as_derived_by_hand(mturk_study) -> None:
    out = StringIO()
    call_command("report", "--study", mturk_study.name, "--json", stdout=out)
    report = json.loads(out.getvalue())
    for section in (
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
    ):
        assert section in report
    sets = {(s["rater"], s["item"]): s for s in report["consistency"]["rating_sets"]}
    assert len(sets) == 150
    # Read off human_ratings_long.csv by hand (pref_model of the five pairs) and derived with Eq. 4:
    #   worker 1, instance 0: [1, 1, 1, 1, 1]     -> all one side: 1.0, strength +1.0 (vicuna preferred)
    #   worker 4, instance 1: [1, -1, -1, 0, -1]  -> mixed signs: 0.0, strength -0.4
    #   worker 8, instance 3: [0, 0, 0, 0, 0]     -> all ties: 0.0, strength 0.0
    hand = {
        ("mturk-1", "samsum-0"): (1.0, 1.0),
        ("mturk-4", "samsum-1"): (0.0, -0.4),
        ("mturk-8", "samsum-3"): (0.0, 0.0),
    }
    for key, (c, strength) in hand.items():
        assert sets[key]["consistency"] == pytest.approx(c)
        # rating sets are reported in alphabetical system order (mistral-7b, vicuna-7b) = the file's A, B
        assert sets[key]["preference_strength"] == pytest.approx(strength)
    # and every other rating set against the formula applied to the raw file

    with (MTURK / "human_ratings_long.csv").open() as handle:
        rows = [r for r in csv.DictReader(handle) if r["file"].startswith("mistral-7b_vicuna-7b_samsum")]
    by_set: dict[tuple, list[int]] = {}
    for r in rows:
        by_set.setdefault((f"mturk-{r['worker']}", f"samsum-{r['instance']}"), []).append(int(r["pref_model"]))
    checked = 0
    for key, prefs in by_set.items():
        expected = 0.0 if (-1 in prefs and 1 in prefs) else sum(abs(p) for p in prefs) / len(prefs)
        assert sets[key]["consistency"] == pytest.approx(expected), key
        assert sets[key]["n"] == 5
        checked += 1
    assert checked == 150
    mean = sum(s["consistency"] for s in sets.values()) / 150
    assert report["consistency"]["summary"]["human"]["mean"] == pytest.approx(mean)


def test_the_stopping_table_labels_the_real_mturk_items_by_the_item_winner_rule(mturk_study) -> None:
    out = StringIO()
    call_command("report", "--study", mturk_study.name, "--json", stdout=out)
    [stopping] = json.loads(out.getvalue())["stopping"]
    with (MTURK / "human_ratings_long.csv").open() as handle:
        rows = [r for r in csv.DictReader(handle) if r["file"].startswith("mistral-7b_vicuna-7b_samsum")]
    by_item: dict[str, dict[str, int]] = {}
    for r in rows:
        workers = by_item.setdefault(f"samsum-{r['instance']}", {})
        workers[r["worker"]] = workers.get(r["worker"], 0) + int(r["pref_model"])

    def sign(x):
        return (x > 0) - (x < 0)

    names = {-1: "mistral-7b", 0: "tie", 1: "vicuna-7b"}
    # by hand: each worker's preference is the sign of their rating set's sum (Eq. 7); the item, the sign of
    # the sum of the workers' preferences
    expected = {item: names[sign(sum(sign(s) for s in workers.values()))] for item, workers in by_item.items()}
    assert stopping["items"] == expected and len(expected) == 50
    summed = {item: names[sign(sum(workers.values()))] for item, workers in by_item.items()}
    assert 4 <= sum(expected[i] != summed[i] for i in expected) <= 10  # what summing every rating got wrong
    assert stopping["pool"] == 50
    assert stopping["wins_a"] == list(expected.values()).count("mistral-7b")
    # every pool item is judged (25 mistral, 21 vicuna, 4 ties; ties count in n): with n = N_pool the
    # hypergeometric count is fixed at N_pool // 2 = 25, so k = 25 gives risk 1 and any k > 25 would give 0;
    # the unbounded-pool (binomial) risk tells what the lead says beyond these 50 items
    from scipy.stats import binom, hypergeom

    assert (stopping["k"], stopping["n"]) == (25, 50)
    assert stopping["risk"] == pytest.approx(hypergeom.sf(24, 50, 25, 50))
    assert stopping["risk_beyond_pool"] == pytest.approx(binom.sf(24, 50, 0.5))
