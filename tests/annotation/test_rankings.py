"""Rankings and best-worst answers (docs/ratings.md#rankings, docs/interfaces.md#ranking-format): what each implies
pairwise, stored once with its judgments, imported all or nothing with every problem named, exported and imported
back, counted by the report's leaderboards as the pairs they imply, through the page, the API and the commands."""

from __future__ import annotations

import io
import itertools
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from analytics import populations
from analytics.report import data as report_data
from analytics.report.judgments import judgment_counts
from analytics.report.ratings import battles
from annotation import implied_pairs
from annotation.exchange import exports
from annotation.exchange.rules import FormatError
from annotation.models import Judgment, Membership, Ranking, Rater, Study
from annotation.rating import imports, rankings
from annotation.studies import creation, team

SYSTEMS = ("s1", "s2", "s3", "s4")


def lines_of(*answers: dict) -> bytes:
    return "".join(json.dumps(a) + "\n" for a in answers).encode()


@pytest.fixture
def four(researcher) -> Study:
    """Four systems, three items, one output of each system per item (two of s1: a second sample)."""
    lines = []
    for i in range(3):
        outputs = {s: [f"{s} says {i}."] for s in SYSTEMS}
        outputs["s1"].append(f"s1 says {i} again.")
        lines.append(json.dumps({"id": f"item-{i}", "input": f"Question {i}?", "outputs": outputs}))
    return creation.do_create_study(researcher, "four", ("\n".join(lines) + "\n").encode(), "four.jsonl")


def ranked(rater="r1", item="item-0", order=("s2", "s1", "s4", "s3"), shown=("s1", "s2", "s3", "s4"), **extra):
    return {"item": item, "rater": rater, "rater_kind": "human", "shown": list(shown), "ranking": list(order), **extra}


def best_worst(rater="r1", item="item-0", shown=("s1", "s2", "s3", "s4"), best="s3", worst="s1", **extra):
    return {"item": item, "rater": rater, "rater_kind": "human", "shown": list(shown), "best": best, "worst": worst}


# --- what an answer implies ---------------------------------------------------------------------------------------


def test_a_ranking_implies_every_pair_with_the_earlier_output_winning():
    assert implied_pairs.ranking_pairs([7, 3, 9, 1]) == [(7, 3), (7, 9), (7, 1), (3, 9), (3, 1), (9, 1)]
    for k in range(2, 8):
        assert len(implied_pairs.ranking_pairs(list(range(k)))) == k * (k - 1) // 2


def test_best_worst_implies_the_best_above_all_and_all_above_the_worst_and_nothing_in_between():
    pairs = implied_pairs.best_worst_pairs([1, 2, 3, 4], best=3, worst=1)
    assert pairs == [(3, 1), (3, 2), (3, 4), (2, 1), (4, 1)]  # 2K - 3 = 5; 2 vs 4 is not implied
    for k in range(3, 9):
        assert len(implied_pairs.best_worst_pairs(list(range(k)), 0, k - 1)) == 2 * k - 3
    # with three outputs best-worst is the whole ranking
    assert sorted(implied_pairs.best_worst_pairs([5, 6, 7], 6, 5)) == sorted(implied_pairs.ranking_pairs([6, 7, 5]))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: implied_pairs.ranking_pairs([1]), "at least two"),
        (lambda: implied_pairs.ranking_pairs([1, 2, 1]), "once"),
        (lambda: implied_pairs.best_worst_pairs([1, 2], 1, 2), "at least three"),
        (lambda: implied_pairs.best_worst_pairs([1, 2, 3], 1, 1), "different"),
        (lambda: implied_pairs.best_worst_pairs([1, 2, 3], 1, 4), "among the shown"),
    ],
)
def test_an_answer_that_implies_nothing_consistent_is_refused(call, message):
    with pytest.raises(implied_pairs.RankingError, match=message):
        call()


# --- stored once, with its judgments --------------------------------------------------------------------------------


def stored_choices(ranking: Ranking) -> set[tuple[str, str]]:
    """(winner system, loser system) of each judgment a ranking implies, read back from model coordinates."""
    out = set()
    for j in ranking.implied.select_related("pair__generation_a__system", "pair__generation_b__system"):
        a, b = j.pair.generation_a.system.name, j.pair.generation_b.system.name
        out.add((a, b) if j.choice == "a" else (b, a))
    return out


def test_an_imported_ranking_is_stored_with_its_pairs_in_the_studys_orientation(four):
    summary = rankings.do_import_rankings(four, lines_of(ranked(), best_worst(rater="r2")), "r.jsonl")
    assert (summary.created, summary.skipped) == (2, 0)
    rank, bws = Ranking.objects.get(kind="rank"), Ranking.objects.get(kind="best_worst")
    order = ["s2", "s1", "s4", "s3"]
    assert stored_choices(rank) == {(w, loser) for w, loser in itertools.combinations(order, 2)}
    assert stored_choices(bws) == {("s3", "s1"), ("s3", "s2"), ("s3", "s4"), ("s2", "s1"), ("s4", "s1")}
    compared = {(c.system_a.name, c.system_b.name) for c in four.comparisons.select_related("system_a", "system_b")}
    place = {s: i for i, s in enumerate(SYSTEMS)}  # shown s1, s2, s3, s4 from the top
    for j in Judgment.objects.filter(ranking__isnull=False).select_related(
        "pair__generation_a__system", "pair__generation_b__system"
    ):
        a, b = j.pair.generation_a.system.name, j.pair.generation_b.system.name
        assert (a, b) in compared  # the study's own model coordinates
        assert j.a_shown_first == (place[a] < place[b])
        assert j.assignment_id is None and not j.superseded and not j.revised
    assert Judgment.objects.filter(ranking=rank).count() == 6 and Judgment.objects.filter(ranking=bws).count() == 5


def test_an_answer_is_stored_once_whoever_sends_it_again(four):
    rankings.do_import_rankings(four, lines_of(ranked(id="x")), "r.jsonl")
    again = rankings.do_import_rankings(four, lines_of(ranked(id="x"), ranked(rater="r2")), "r.jsonl")
    assert (again.created, again.skipped) == (1, 1)
    assert Ranking.objects.count() == 2 and Judgment.objects.count() == 12


def test_two_samples_of_one_system_may_be_ranked(four):
    shown = [{"system": "s1", "sample": 1}, "s1", "s2"]
    rankings.do_import_rankings(four, lines_of(ranked(shown=shown, order=shown)), "r.jsonl")
    (line,) = exports.ranking_lines(four)
    assert line["ranking"] == shown
    assert Judgment.objects.count() == 3


# --- a bad file: every problem named, nothing stored -------------------------------------------------------------


def test_a_bad_file_names_every_problem_by_line_and_field_and_stores_nothing(four):
    bad = lines_of(
        ranked(),  # line 1 is fine
        ranked(item="nope"),
        ranked(order=("s1", "s2", "s3")),
        ranked(order=("s1", "s2", "s3", "s9")),
        best_worst(best="s1", worst="s1"),
        best_worst(best="s9"),
        best_worst(shown=("s1", "s2")),
        {**ranked(), "best": "s1"},
        ranked(shown=("s1", "s1", "s2")),
        ranked(shown=[{"system": "s2", "sample": 3}, "s1"], order=["s1", {"system": "s2", "sample": 3}]),
        ranked(rater_kind="robot"),
        {**ranked(), "created": "yesterday"},
        {**ranked(), "kind": "best_worst"},
        {**ranked(), "superseded": True},
    )
    with pytest.raises(FormatError) as caught:
        rankings.do_import_rankings(four, bad, "bad.jsonl")
    text = str(caught.value)
    for expected in (
        "line 2, field 'item': unknown item 'nope'",
        "line 3, field 'ranking': the ranking orders exactly the outputs shown",
        "line 4, field 'ranking': unknown system 's9'",
        "line 5, field 'worst': the worst is another output than the best",
        "line 6, field 'best': unknown system 's9'",
        "line 7, field 'shown': shown must be a list of 3 to 20 outputs",
        "line 8: an answer has either a ranking or a best and a worst",
        "line 9, field 'shown': shown names an output twice",
        "line 10, field 'shown': the item has 1 sample(s) of 's2'; sample 3 is out of range",
        "line 11, field 'rater_kind': rater_kind must be 'human' or 'judge'",
        "line 12, field 'created': created must be an ISO 8601 date-time",
        "line 13, field 'kind': kind must be 'rank' for ranking",
        "line 14, field 'superseded': superseded is a judgment's flag",
    ):
        assert expected in text
    assert not [p for p in caught.value.problems if p.line == 1]  # the good line has no problem
    assert not Ranking.objects.exists() and not Judgment.objects.exists() and not Rater.objects.exists()


def test_a_csv_file_is_refused_as_a_whole(four):
    with pytest.raises(FormatError, match="a rankings file is JSONL"):
        rankings.do_import_rankings(four, b"item,rater\nitem-0,r1\n", "r.csv")


# --- out and back in ---------------------------------------------------------------------------------------------


def test_the_export_imports_back_into_a_copy_with_the_same_judgments(four, researcher):
    rankings.do_import_rankings(
        four,
        lines_of(
            ranked(comment="s2 is clearly best", time_on_task_ms=4200, note="kept"),
            best_worst(rater="r2", item="item-1"),
            ranked(rater="r3", created="2026-01-02T03:04:05Z"),
        ),
        "r.jsonl",
    )
    out = list(exports.ranking_lines(four))
    # oldest first: r3's answer was given on 2 January
    assert [(line["rater"], line["kind"]) for line in out] == [("r3", "rank"), ("r1", "rank"), ("r2", "best_worst")]
    assert out[0]["created"] == "2026-01-02T03:04:05Z" and out[0]["comment"] is None
    assert out[1]["comment"] == "s2 is clearly best" and out[1]["note"] == "kept" and out[1]["time_on_task_ms"] == 4200
    assert out[2]["best"] == "s3" and out[2]["worst"] == "s1" and "ranking" not in out[2]
    copy = creation.do_create_study(researcher, "copy", study_jsonl_of(four), "copy.jsonl")
    summary = rankings.do_import_rankings(copy, lines_of(*out), "back.jsonl")
    assert summary.created == 3
    assert list(exports.ranking_lines(copy)) == out

    def judged(study):
        return sorted(
            (line["id"], line["choice"], line["shown_first"], line["ranking"]) for line in exports.judgment_lines(study)
        )

    assert judged(copy) == judged(four) and len(judged(four)) == 6 + 5 + 6


def study_jsonl_of(study: Study) -> bytes:
    lines = []
    for item in study.items.order_by("position"):
        outputs: dict[str, list[str]] = {}
        for g in item.generations.select_related("system").order_by("system_id", "sample_index"):
            outputs.setdefault(g.system.name, []).append(g.text)
        lines.append(json.dumps({"id": item.external_id, "input": item.input, "outputs": outputs}))
    return ("\n".join(lines) + "\n").encode()


def test_an_implied_judgment_is_never_imported_alone_and_comes_back_with_its_answer(four, researcher):
    rankings.do_import_rankings(four, lines_of(ranked()), "r.jsonl")
    line = next(exports.judgment_lines(four))
    assert line["ranking"] == Ranking.objects.get().idempotency_key
    with pytest.raises(FormatError, match="field 'ranking': this judgment is implied by a ranking"):
        imports.do_import_judgments(four, lines_of({**line, "id": "elsewhere"}), "j.jsonl")
    # a whole study's files into a copy: the rankings first, then the judgments export, whose implied lines are
    # there already (skipped) -- nothing counted twice
    copy = creation.do_create_study(researcher, "copy", study_jsonl_of(four), "copy.jsonl")
    with pytest.raises(FormatError, match="import the rankings file first"):
        imports.do_import_judgments(copy, lines_of(*exports.judgment_lines(four)), "j.jsonl")
    rankings.do_import_rankings(copy, lines_of(*exports.ranking_lines(four)), "r.jsonl")
    summary = imports.do_import_judgments(copy, lines_of(*exports.judgment_lines(four)), "j.jsonl")
    assert (summary.created, summary.skipped) == (0, 6) and copy.judgments.count() == 6


def test_an_excluded_answer_is_kept_and_not_counted(four):
    rankings.do_import_rankings(four, lines_of(ranked(excluded=True)), "r.jsonl")
    assert Judgment.objects.filter(superseded=True).count() == 6
    assert Judgment.objects.counted().count() == 0
    assert next(exports.ranking_lines(four))["excluded"] is True


# --- read by the report as the pairs they imply ------------------------------------------------------------------


def test_the_report_counts_the_answers_and_reads_their_pairs_like_any_judgment(four):
    rankings.do_import_rankings(
        four, lines_of(ranked(), best_worst(rater="r2"), ranked(rater="r3", item="item-2")), "r"
    )
    rows = report_data.load_rows(four)
    assert len(rows) == 6 + 5 + 6 and all(r.rating in (-1, 1) for r in rows)
    counts = judgment_counts(four, populations.parse({}), rows, rows)
    assert (counts.rankings, counts.from_rankings, counts.total) == (3, 17, 17)
    # the battles of the boards: one per implied pair, each item's battles together (intervals resample items)
    kept, a, b, score = battles(rows, list(SYSTEMS))
    assert len(score) == 17 and {r.item for r in kept} == {"item-0", "item-2"}
    s2_over_s3 = [
        s if (SYSTEMS[x], SYSTEMS[y]) == ("s2", "s3") else 1 - s
        for r, x, y, s in zip(kept, a, b, score, strict=True)
        if {SYSTEMS[x], SYSTEMS[y]} == {"s2", "s3"}
    ]
    assert s2_over_s3 == [1.0, 0.0, 1.0]  # s2 above s3 in both rankings; s3 the best of the best-worst answer


# --- the study page, the API and the commands --------------------------------------------------------------------


def test_the_study_page_imports_and_exports_rankings_and_names_the_problems(four, researcher, client):
    client.force_login(researcher)
    page = client.get(four.get_absolute_url())
    assert b"Import rankings or best" in page.content and b'data-testid="rankings-count"' not in page.content
    url = reverse("rankings_import", args=[four.pk])
    bad = client.post(url, {"file": SimpleUploadedFile("r.jsonl", lines_of(ranked(item="nope")))})
    assert bad.status_code == 400 and b"The rankings were not imported" in bad.content
    assert b"line 1, field &#x27;item&#x27;: unknown item &#x27;nope&#x27;" in bad.content
    good = client.post(url, {"file": SimpleUploadedFile("r.jsonl", lines_of(ranked(), best_worst(rater="r2")))})
    assert good.status_code == 302 and Ranking.objects.count() == 2
    page = client.get(four.get_absolute_url())
    assert b"2 answers on several outputs at once" in page.content
    assert four.audit_entries.filter(action="rankings_import").get().summary == "imported 2 rankings from r.jsonl"
    export = client.get(reverse("rankings_export", args=[four.pk]))
    body = b"".join(export.streaming_content).decode()
    assert export["Content-Disposition"] == 'attachment; filename="four-rankings.jsonl"'
    assert [json.loads(line)["kind"] for line in body.splitlines()] == ["rank", "best_worst"]


def test_rankings_through_the_api_in_each_role(four, researcher, other_researcher):
    owner, outsider = APIClient(), APIClient()
    owner.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    outsider.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=other_researcher).key}")
    url = f"/api/studies/{four.pk}/rankings/"

    def upload(client, data: bytes):
        return client.post(url, {"file": io.BytesIO(data)}, format="multipart")

    assert upload(outsider, lines_of(ranked())).status_code == 404
    team.do_add_member(four, other_researcher.username, "viewer", researcher)
    assert upload(outsider, lines_of(ranked())).status_code == 403
    refused = upload(owner, lines_of(ranked(), best_worst(best="s1", worst="s1")))
    assert refused.status_code == 400
    assert refused.json() == {"file": ["line 2, field 'worst': the worst is another output than the best"]}
    created = upload(owner, lines_of(ranked(), best_worst(rater="r2")))
    assert created.status_code == 201 and created.json() == {"created": 2, "skipped": 0}
    assert upload(owner, lines_of(ranked())).json() == {"created": 0, "skipped": 1}
    listed = outsider.get(url)  # a viewer reads
    assert listed.status_code == 200 and listed.json()["count"] == 2
    first = listed.json()["results"][0]
    assert first["ranking"] == ["s2", "s1", "s4", "s3"] and first["shown"] == list(SYSTEMS) and first["rater"] == "r1"
    judgments = outsider.get(f"/api/studies/{four.pk}/judgments/").json()["results"]
    assert {j["ranking"] for j in judgments} == set(Ranking.objects.values_list("idempotency_key", flat=True))
    assert Membership.objects.get().role == "viewer"


def test_the_commands_import_and_export_rankings(four, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(lines_of(ranked(), best_worst(rater="r2")))
    out = io.StringIO()
    call_command("import_rankings", str(source), "--study", "four", stdout=out)
    assert "Imported 2 rankings into 'four' (0 already present)." in out.getvalue()
    target = tmp_path / "out.jsonl"
    err = io.StringIO()
    call_command("export_rankings", "--study", "four", "-o", str(target), stderr=err)
    assert "Exported 2 rankings of 'four'" in err.getvalue()
    assert [json.loads(line)["rater"] for line in target.read_text().splitlines()] == ["r1", "r2"]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(lines_of(ranked(order=("s1",))))
    with pytest.raises(Exception, match=r"nothing was saved\):\nline 1, field 'ranking'"):
        call_command("import_rankings", str(bad), "--study", "four")
    for command in ("import_rankings", "export_rankings"):
        with pytest.raises(SystemExit):
            call_command(command, "--help", stdout=io.StringIO())


def test_a_large_rankings_file_is_imported_by_the_worker_and_a_stopped_one_resumed_or_discarded(
    four, researcher, client, settings
):
    from annotation.jobs import run_job
    from annotation.models import Job, Upload

    settings.SEPLAB_IMPORT_STEP = 1  # more than one answer: the worker imports it
    client.force_login(researcher)
    url = reverse("rankings_import", args=[four.pk])
    sent = client.post(url, {"file": SimpleUploadedFile("big.jsonl", lines_of(ranked(), best_worst(rater="r2")))})
    assert sent.status_code == 302 and not Ranking.objects.exists()
    job = Job.objects.get(kind="rankings")
    assert job.total == 2 and Upload.objects.get().kind == "rankings"
    assert b'data-testid="rankings-job"' in client.get(four.get_absolute_url()).content
    run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "done" and job.message == "Imported 2 rankings (0 already present)."
    assert Ranking.objects.count() == 2 and Judgment.objects.count() == 11 and not Upload.objects.exists()
    # a file whose job stopped (its worker killed): the study page offers to resume it or discard it
    client.post(url, {"file": SimpleUploadedFile("more.jsonl", lines_of(ranked(rater="r3"), ranked(rater="r4")))})
    stopped = Job.objects.filter(kind="rankings", status="queued").get()
    Job.objects.filter(pk=stopped.pk).update(status="failed")
    page = client.get(four.get_absolute_url()).content
    assert b'data-testid="stopped-import"' in page and b"(2 answers, sent" in page
    upload = Upload.objects.get()
    client.post(reverse("upload_resume", args=[four.pk, upload.pk]))
    run_job.call(Job.objects.filter(kind="rankings", status="queued").get().pk)
    assert Ranking.objects.count() == 4 and not Upload.objects.exists()
    client.post(url, {"file": SimpleUploadedFile("last.jsonl", lines_of(ranked(rater="r5"), ranked(rater="r6")))})
    Job.objects.filter(kind="rankings", status="queued").update(status="failed")
    client.post(reverse("upload_discard", args=[four.pk, Upload.objects.get().pk]))
    assert not Upload.objects.exists() and Ranking.objects.count() == 4


def test_implied_judgments_follow_the_studys_own_orientation_and_the_lower_system_id_otherwise(four):
    """A comparison whose system A is the later system, and a system pair the study does not compare: each implied
    judgment is in model coordinates -- the comparison's, else the lower system id as A."""
    from annotation.models import Comparison, System

    s = {x.name: x for x in System.objects.filter(study=four)}
    Comparison.objects.filter(study=four, system_a=s["s1"], system_b=s["s2"]).update(system_a=s["s2"], system_b=s["s1"])
    Comparison.objects.filter(study=four, system_a=s["s3"], system_b=s["s4"]).delete()
    rankings.do_import_rankings(four, lines_of(ranked(order=("s1", "s2", "s4", "s3"))), "r.jsonl")
    by_systems = {
        (j.pair.generation_a.system.name, j.pair.generation_b.system.name): j.choice
        for j in Judgment.objects.select_related("pair__generation_a__system", "pair__generation_b__system")
    }
    assert by_systems[("s2", "s1")] == "b"  # s1 won, and s1 is the comparison's B
    assert by_systems[("s3", "s4")] == "b"  # not compared: s3 (created first) is A, and s4 won
    assert by_systems[("s1", "s3")] == "a"
    assert len(by_systems) == 6
