"""Separability through the ORM and the command line."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.studies import creation
from selection import services
from selection.models import ItemSeparability, SeparabilityRun


def make_study(researcher, items: list[dict], name: str = "sep"):
    data = "".join(json.dumps(i) + "\n" for i in items).encode()
    return creation.do_create_study(researcher, name, data, "s.jsonl")


def test_identical_systems_are_not_separable_and_different_ones_are(researcher):
    same = {
        "id": "same",
        "input": "x",
        "outputs": {"a": ["red apple pie", "red apple pie"], "b": ["red apple pie", "red apple pie"]},
    }
    different = {
        "id": "diff",
        "input": "y",
        "outputs": {"a": ["red apple pie", "red apple pie"], "b": ["blue ocean waves", "blue ocean waves"]},
    }
    study = make_study(researcher, [same, different])
    [run] = services.do_compute_separability(study, "rouge1")
    deltas = dict(run.items.values_list("item__external_id", "delta"))
    # alignments: same = (1, 1, 1), diff = (1, 1, 0); normalised over [0, 1]
    assert deltas == {"same": pytest.approx(0.0), "diff": pytest.approx(1.0)}
    assert (run.low, run.high) == (0.0, 1.0)


def test_a_single_sample_makes_separability_undefined_not_zero(researcher):
    items = [{"id": f"i{n}", "input": "x", "outputs": {"a": ["only one"], "b": ["just one"]}} for n in range(2)]
    study = make_study(researcher, items)
    [run] = services.do_compute_separability(study, "bleu")
    assert list(run.items.values_list("delta", flat=True)) == [None, None]
    assert list(run.items.values_list("self_a", flat=True)) == [None, None]
    out = StringIO()
    call_command("compute_separability", "--study", "sep", "--metric", "bleu", stdout=out)
    assert "separability undefined for all 2 items" in out.getvalue()


def test_cosine_separability_uses_the_real_encoder(researcher):
    items = [
        {
            "id": "near",
            "input": "x",
            "outputs": {
                "a": ["The council approved the market.", "The council backed the market plan."],
                "b": ["The council voted for the market.", "Councillors approved the new market."],
            },
        },
        {
            "id": "far",
            "input": "y",
            "outputs": {
                "a": ["The council approved the market.", "The council backed the market plan."],
                "b": ["Falcons nested on the hospital roof.", "Four falcon chicks hatched on a roof."],
            },
        },
    ]
    study = make_study(researcher, items)
    [run] = services.do_compute_separability(study)
    deltas = dict(run.items.values_list("item__external_id", "delta"))
    assert deltas["far"] > deltas["near"] + 0.3
    assert run.encoder == "all-MiniLM-L6-v2"


def test_recomputing_replaces_the_previous_run(study):
    services.do_compute_separability(study, "rouge1-la")
    services.do_compute_separability(study, "rouge1-la")
    assert SeparabilityRun.objects.filter(metric="rouge1-la").count() == 1
    assert ItemSeparability.objects.count() == 4


def test_unknown_metrics_are_refused(study):
    with pytest.raises(ValueError, match="unknown metric 'jaccard'"):
        services.do_compute_separability(study, "jaccard")
    with pytest.raises(CommandError, match="unknown metric"):
        call_command("compute_separability", "--study", "small", "--metric", "cosine-xx")


VARIED = [
    {
        "id": "council",
        "input": "x",
        "outputs": {
            "a": [
                "The council approved the new market after a long debate.",
                "Council backs market.",
                "After hours of debate the city council voted to approve the market on the square.",
            ],
            "b": [
                "Councillors voted for the market.",
                "The market plan was approved by the council on Monday night.",
                "A new market is coming.",
            ],
        },
    },
    {
        "id": "falcons",
        "input": "y",
        "outputs": {
            "a": [
                "Falcons nested on the hospital roof this spring.",
                "Four chicks hatched.",
                "Peregrine falcons have returned to the roof of the hospital and four chicks hatched.",
            ],
            "b": ["The council approved the market.", "Birds on a roof.", "Four falcon chicks hatched on a roof."],
        },
    },
    {
        "id": "rain",
        "input": "z",
        "outputs": {
            "a": [
                "Heavy rain closed two roads.",
                "Two roads were closed by flooding after heavy rain overnight.",
                "Rain.",
            ],
            "b": [
                "Flooding shut roads near the river.",
                "Heavy overnight rain closed two roads by the river.",
                "Roads closed after heavy rain.",
            ],
        },
    },
]


@pytest.mark.parametrize("metric", ["cosine", "cosine-la", "rouge1", "rouge1-la", "bleu", "bleu-la"])
def test_separability_does_not_depend_on_which_system_is_called_a(researcher, metric):
    swapped = [{**item, "outputs": {"b": item["outputs"]["b"], "a": item["outputs"]["a"]}} for item in VARIED]
    ab, ba = make_study(researcher, VARIED, "ab"), make_study(researcher, swapped, "ba")
    deltas = []
    for study in (ab, ba):
        [run] = services.do_compute_separability(study, metric)
        assert run.comparison.system_a.name == ("a" if study is ab else "b")
        deltas.append(dict(run.items.values_list("item__external_id", "delta")))
    assert deltas[0] == pytest.approx(deltas[1], abs=1e-12)
    assert len(set(deltas[0].values())) == 3  # the items differ, so the check is not vacuous
