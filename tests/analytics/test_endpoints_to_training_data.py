"""From inputs to training data, end to end: a study goes from a file of inputs and two local endpoints to generated
outputs (K samples each), human judgments, a report with rater reliability, and a DPO-ready Parquet export that
`datasets` loads -- end to end, through the commands a researcher types and the rating path raters take, against two
local OpenAI-compatible servers (tests/judge_server.py's ``gen-`` models, every request validated with the openai
client's own types)."""

from __future__ import annotations

import json
import random
from io import StringIO

import datasets
import pytest
from django.core.management import call_command

from analytics.report.assembly import study_report
from annotation.elicitation import Answer
from annotation.models import Generation, Judgment, Study
from annotation.rating import allocation, recording
from annotation.studies import enrolment, lifecycle
from selection.models import SeparabilityRun
from tests.judge_server import JudgeServer

ITEMS = 12
K = 3


@pytest.fixture
def endpoints():
    servers = [JudgeServer().start(), JudgeServer().start()]
    yield servers
    for server in servers:
        server.shutdown()
        server.server_close()


def test_inputs_and_two_endpoints_to_a_parquet_file_datasets_loads(researcher, endpoints, tmp_path):
    terse, verbose = endpoints
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(
        "".join(json.dumps({"id": f"q{i}", "input": f"Explain idea number {i}."}) + "\n" for i in range(ITEMS))
    )
    quiet = {"stdout": StringIO(), "stderr": StringIO()}
    call_command("import_study", str(inputs), "--name", "e2e", "--owner", researcher.username, **quiet)
    for name, server, model in (("terse", terse, "gen-terse-7b"), ("verbose", verbose, "gen-verbose-70b")):
        out = StringIO()
        call_command(
            "generate",
            "--study",
            "e2e",
            "--system",
            name,
            "--base-url",
            server.base_url,
            "--model",
            model,
            "--samples",
            str(K),
            "--budget",
            "100",
            stdout=out,
            stderr=StringIO(),
        )
        assert f"every item has {K} output(s)" in out.getvalue()
        assert len(server.requests) == ITEMS * K and not server.invalid
    study = Study.objects.get(name="e2e")
    assert Generation.objects.filter(item__study=study).count() == 2 * ITEMS * K
    assert [(c.system_a.name, c.system_b.name) for c in study.comparisons.all()] == [("terse", "verbose")]

    # separability runs on what was generated: K samples per system, so every item has its delta
    call_command("compute_separability", "--study", "e2e", "--metric", "rouge1", **quiet)
    run = SeparabilityRun.objects.get(comparison__study=study, metric="rouge1")
    assert run.items.count() == ITEMS and all(v.delta is not None for v in run.items.all())

    # three people rate every item through the rating path (one sampled pair each): two prefer the longer answer,
    # one answers at random
    study = lifecycle.do_update_settings(
        study, {"raters_per_item": 3, "pairs_per_assignment": 1, "judgments_per_assignment": ITEMS}, None
    )
    rng = random.Random(3)
    for r in range(3):
        assignment = allocation.do_start_assignment(enrolment.do_create_rater_link(study, f"person-{r}"))
        for pair in assignment.pairs.select_related("pair__generation_a__system", "pair__generation_b__system"):
            allocation.do_mark_shown(pair)
            a, b = pair.pair.generation_a, pair.pair.generation_b
            longer = a if len(a.text) > len(b.text) else b
            wanted = longer if r < 2 else rng.choice([a, b])
            shown_first = a if pair.a_shown_first else b
            recording.do_record_judgment(
                pair,
                idempotency_key=f"{r}-{pair.pk}",
                answer=Answer(choice="first" if wanted == shown_first else "second"),
            )
    assert Judgment.objects.filter(study=study, rater__kind="human").count() == 3 * ITEMS

    # the report: who wins, and how reliable each person was
    report = study_report(study)
    assert [row.system for row in report.bradley_terry.leaderboard][0] == "verbose"
    reliability = report.rater_reliability
    assert reliability.available and sorted(r.rater for r in reliability.raters) == [
        "person-0",
        "person-1",
        "person-2",
    ]
    by_rater = {r.rater: r.reliability for r in reliability.raters}
    assert by_rater["person-0"] > by_rater["person-2"] and by_rater["person-1"] > by_rater["person-2"]

    # DPO-ready Parquet, read back by `datasets`
    parquet = tmp_path / "prefs.parquet"
    out = StringIO()
    call_command("export_preferences", "--study", "e2e", "--format", "parquet", "--output", str(parquet), stdout=out)
    loaded = datasets.load_dataset("parquet", data_files=str(parquet), split="train", cache_dir=str(tmp_path / "cache"))
    assert len(loaded) == 3 * ITEMS and {
        "prompt",
        "chosen",
        "rejected",
        "chosen_system",
        "rejected_system",
        "population",
    } <= set(loaded.column_names)
    texts = {
        (g.item.input, g.system.name): set()
        for g in Generation.objects.filter(item__study=study).select_related("item", "system")
    }
    for g in Generation.objects.filter(item__study=study).select_related("item", "system"):
        texts[(g.item.input, g.system.name)].add(g.text)
    for row in loaded:
        assert row["chosen"] in texts[(row["prompt"], row["chosen_system"])]
        assert row["rejected"] in texts[(row["prompt"], row["rejected_system"])]
        assert {row["chosen_system"], row["rejected_system"]} == {"terse", "verbose"}
        assert row["population"] == "humans"
    assert sum(row["chosen_system"] == "verbose" for row in loaded) >= 2 * ITEMS  # the two careful people
