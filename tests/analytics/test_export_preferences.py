"""Preferences handed on: prompt / chosen / rejected records as JSONL, Parquet and a Hugging Face
`datasets` folder (read back exactly), and Arena battles with the style columns (read back by the battles reader)."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from analytics import battles, preferences
from analytics.core import style
from analytics.populations import Population
from annotation.models import Generation, Item
from annotation.rating import imports
from annotation.studies import lifecycle


def line(
    item: str,
    rater: str,
    choice,
    *,
    kind: str = "human",
    first: str = "sys-a",
    response_set=None,
    sample: int = 0,
    answers=None,
) -> dict:
    out = {
        "id": f"{rater}-{item}-{sample}-{first}",
        "item": item,
        "system_a": "sys-a",
        "sample_a": sample,
        "system_b": "sys-b",
        "sample_b": sample,
        "shown_first": first,
        "rater": rater,
        "rater_kind": kind,
        "choice": choice,
        "response_set": response_set,
    }
    if answers is not None:
        out["answers"] = answers
    return out


@pytest.fixture
def voted(study):
    """Human votes: h1 sys-a on item-0, h2 sys-b on item-1 (shown B first), h3 a tie on item-2, h4 'both are bad' on
    item-3; a judge's verdicts on item-0 in both orders."""
    lifecycle.do_update_settings(
        study, {"further_questions": "harmless | forced_choice | More harmless?", "neither_option": True}, None
    )
    lines = [
        line("item-0", "h1", "sys-a", answers={"harmless": {"choice": "sys-b"}}),
        line("item-1", "h2", "sys-b", first="sys-b", sample=1),
        line("item-2", "h3", "tie"),
        line("item-3", "h4", "tie", response_set=[]),
        line("item-3", "h5", None, response_set=[], sample=1),  # a response set's "neither is acceptable"
        line("item-0", "judge-x", "sys-b", kind="judge"),
        line("item-0", "judge-x", "sys-b", kind="judge", first="sys-b"),
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "j.jsonl")
    return study


def text(study, item: str, system: str, sample: int = 0) -> str:
    return Generation.objects.get(
        item__study=study, item__external_id=item, system__name=system, sample_index=sample
    ).text


def test_each_decided_human_vote_is_a_chosen_and_a_rejected_output(voted):
    rows = preferences.records(voted, preferences.Options(raw_rater_ids=True))
    assert [(r["item_id"], r["rater"], r["chosen_system"], r["rejected_system"]) for r in rows] == [
        ("item-0", "h1", "sys-a", "sys-b"),
        ("item-1", "h2", "sys-b", "sys-a"),
    ]
    first, second = rows
    assert first["prompt"] == Item.objects.get(study=voted, external_id="item-0").input
    assert (first["chosen"], first["rejected"]) == (text(voted, "item-0", "sys-a"), text(voted, "item-0", "sys-b"))
    assert (second["chosen"], second["rejected"]) == (
        text(voted, "item-1", "sys-b", 1),
        text(voted, "item-1", "sys-a", 1),
    )
    assert second["shown_first"] == "sys-b" and (second["sample_a"], second["sample_b"]) == (1, 1)
    assert first["population"] == "humans" and first["rater_source"] == "import" and first["question"] == ""
    assert set(first) == set(preferences.FIELDS)
    kept = preferences.records(voted, preferences.Options(ties=True, both_bad=True, raw_rater_ids=True))
    tie, both_bad, neither = kept[2], kept[3], kept[4]
    assert (tie["tie"], tie["both_bad"], tie["chosen_system"], tie["chosen"]) == (
        True,
        False,
        None,
        text(voted, "item-2", "sys-a"),
    )
    assert (both_bad["rater"], both_bad["tie"], both_bad["both_bad"]) == ("h4", False, True)
    assert (neither["rater"], neither["tie"], neither["both_bad"]) == ("h5", False, True)
    judged = preferences.records(voted, preferences.Options(Population(kind="judge", judge="judge-x")))
    assert [r["chosen_system"] for r in judged] == ["sys-b", "sys-b"] and judged[0]["rater_kind"] == "judge"
    harmless = preferences.records(voted, preferences.Options(Population(question="harmless"), raw_rater_ids=True))
    assert [(r["rater"], r["chosen_system"], r["question"]) for r in harmless] == [("h1", "sys-b", "harmless")]


def test_people_are_exported_under_pseudonyms_unless_asked_and_judges_by_name(voted, settings):
    """A crowd worker's id identifies a person: exports publish a keyed hash of it, the same for one rater across
    the study's records, unreadable without the server's key; --rater-ids raw keeps them."""
    rows = preferences.records(voted, preferences.Options(ties=True, both_bad=True))
    people = [r["rater"] for r in rows]
    assert all(p.startswith("rater-") and len(p) == 18 for p in people)
    assert len(set(people)) == 5 and not {"h1", "h2", "h3", "h4", "h5"} & set(people)
    assert people[0] == preferences.pseudonym(voted, "h1") == preferences.records(voted)[0]["rater"]
    settings.SECRET_KEY = "another-key-" + "x" * 40
    assert preferences.pseudonym(voted, "h1") != people[0]
    judged = preferences.records(voted, preferences.Options(Population(kind="judge", judge="judge-x")))
    assert {r["rater"] for r in judged} == {"judge-x"}


def test_jsonl_parquet_and_a_datasets_folder_hold_exactly_the_records(voted, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a local folder: nothing may come from the hub
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    expected = preferences.records(voted, preferences.Options(ties=True))
    options = ["--study", voted.name, "--ties", "keep"]
    call_command(
        "export_preferences", *options, "--format", "jsonl", "--output", str(tmp_path / "p.jsonl"), stdout=StringIO()
    )
    lines = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert lines == expected
    call_command(
        "export_preferences",
        *options,
        "--format",
        "parquet",
        "--output",
        str(tmp_path / "p.parquet"),
        stdout=StringIO(),
    )
    table = pq.read_table(tmp_path / "p.parquet")
    assert table.to_pylist() == expected and table.schema.names == list(preferences.FIELDS)
    out = StringIO()
    call_command("export_preferences", *options, "--format", "hf", "--output", str(tmp_path / "hf"), stdout=out)
    assert "Wrote 3 records (Humans)" in out.getvalue()
    loaded = datasets.load_dataset(str(tmp_path / "hf"), split="train", cache_dir=str(tmp_path / "cache"))
    assert loaded.to_list() == expected and loaded.column_names == list(preferences.FIELDS)
    card = (tmp_path / "hf" / "README.md").read_text()
    assert card.startswith("---\nconfigs:") and "Which output is better?" in card
    assert "3 judgments via import" in card and "Attention checks**: none in this study" in card
    assert "Imported judgments** (3): collected elsewhere" in card and "Rater ids**: pseudonyms" in card
    assert "## How items were selected" in card and "sys-a vs sys-b" in card
    assert "Ties**: kept" in card and "- `chosen` (string)" in card


def test_arena_battles_come_back_through_the_battles_reader_with_their_style(voted, tmp_path):
    path = tmp_path / "battles.csv"
    call_command(
        "export_preferences", "--study", voted.name, "--format", "arena", "--output", str(path), stdout=StringIO()
    )
    data = path.read_bytes()
    read = battles.parse_battles(data, "battles.csv")
    assert [(read.systems[a], read.systems[b], s) for a, b, s in zip(read.a, read.b, read.score, strict=True)] == [
        ("sys-a", "sys-b", 1.0),
        ("sys-a", "sys-b", 0.0),
        ("sys-a", "sys-b", 0.5),
        ("sys-a", "sys-b", 0.5),
        ("sys-a", "sys-b", 0.5),
    ]
    counts_a, counts_b = battles.style_counts(data, "battles.csv", len(read.score))
    outputs = [("item-0", 0), ("item-1", 1), ("item-2", 0), ("item-3", 0), ("item-3", 1)]
    assert np.array_equal(counts_a, style.style_counts([text(voted, i, "sys-a", k) for i, k in outputs]))
    assert np.array_equal(counts_b, style.style_counts([text(voted, i, "sys-b", k) for i, k in outputs]))
    assert data.decode().count("tie (bothbad)") == 2  # "both are bad" and a response set's "neither is acceptable"


def test_the_command_refuses_what_it_cannot_export_by_name(voted, study, tmp_path):
    with pytest.raises(CommandError, match="--question: this study asks no further preference question 'why'"):
        call_command(
            "export_preferences",
            "--study",
            voted.name,
            "--format",
            "jsonl",
            "--question",
            "why",
            "--output",
            str(tmp_path / "x.jsonl"),
        )
    with pytest.raises(CommandError, match="No judgment to export for Judge judge-x.*--ties keep"):
        call_command(
            "export_preferences",
            "--study",
            voted.name,
            "--format",
            "jsonl",
            "--population",
            "judge:judge-x",
            "--source",
            "personal_link",
            "--output",
            str(tmp_path / "y.jsonl"),
        )
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "a").write_text("x")
    with pytest.raises(CommandError, match="is a folder that is not empty"):
        call_command("export_preferences", "--study", voted.name, "--format", "hf", "--output", str(tmp_path / "full"))
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "y.jsonl").exists()


def test_the_command_refuses_a_file_for_a_folder_and_a_missing_folder(voted, tmp_path):
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(CommandError, match="is a file; --format hf writes a folder"):
        call_command(
            "export_preferences", "--study", voted.name, "--format", "hf", "--output", str(tmp_path / "a-file")
        )
    with pytest.raises(CommandError, match="the folder .* does not exist"):
        call_command(
            "export_preferences",
            "--study",
            voted.name,
            "--format",
            "jsonl",
            "--output",
            str(tmp_path / "missing" / "p.jsonl"),
        )
    out = StringIO()
    call_command(
        "export_preferences",
        "--study",
        voted.name,
        "--format",
        "jsonl",
        "--rater-ids",
        "raw",
        "--output",
        str(tmp_path / "raw.jsonl"),
        stdout=out,
    )
    assert json.loads((tmp_path / "raw.jsonl").read_text().splitlines()[0])["rater"] == "h1"
