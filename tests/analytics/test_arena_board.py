"""The arena board (analytics/arena.py): computed by its job only, coalesced, the report's own numbers, sep-ELO from
Eq. 6 by hand, per-system and per-category counts, flagged votes and why, and the board page."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from analytics import arena
from analytics.models import ArenaBoard
from analytics.report import assembly
from annotation import jobs
from annotation.jobs import run_job
from annotation.models import Battle, Job, Judgment
from tests.analytics.arena_fixtures import add_separability, add_votes, make_arena

SYSTEMS = ("alpha", "beta", "gamma")
# (prompt, rater, system A, system B, winner): creation order is this order
VOTES = [
    (0, "r1", "alpha", "beta", "alpha"),
    (1, "r2", "beta", "gamma", "beta"),
    (2, "r1", "alpha", "gamma", "tie"),
    (3, "r3", "gamma", "beta", "gamma"),
    (4, "r2", "alpha", "beta", "beta"),
    (5, "r3", "gamma", "alpha", "alpha"),
]
DELTAS = {0: 0.9, 1: 0.1, 2: 0.4, 3: 0.65, 4: 0.25}  # prompt 5 has none yet: weighted as T


@pytest.fixture
def small_arena(researcher):
    study = make_arena(researcher, SYSTEMS, len(VOTES))
    add_votes(study, VOTES)
    return study


def run_queued(kind: str = arena.JOB_KIND) -> int:
    ids = list(Job.objects.filter(kind=kind, status=Job.Status.QUEUED).values_list("pk", flat=True))
    for pk in ids:
        run_job.call(pk)
    return len(ids)


def sep_elo_by_hand(votes, deltas, k=4.0, t=0.4, alpha=2.0, beta=6.0) -> dict[str, float]:
    """Eq. 5 and 6 of the separability paper, vote by vote: E_A = 1 / (1 + 10^((R_B - R_A) / 400)),
    K_i = K alpha / (1 + exp(-beta (delta_i - T))), R_A += K_i (S_A - E_A), R_B -= K_i (S_A - E_A); a prompt without a
    separability takes delta = T."""
    r = dict.fromkeys(SYSTEMS, 1000.0)
    for prompt, _, a, b, winner in votes:
        s = 0.5 if winner == "tie" else (1.0 if winner == a else 0.0)
        e = 1 / (1 + 10 ** ((r[b] - r[a]) / 400))
        k_i = k * alpha / (1 + math.exp(-beta * (deltas.get(prompt, t) - t)))
        r[a] += k_i * (s - e)
        r[b] -= k_i * (s - e)
    return r


def test_sep_elo_is_the_seeds_formula_vote_by_vote_in_the_board_and_in_report_json(small_arena):
    """A small replayed arena: sep-ELO's single pass equals Eq. 6 computed by hand, in the board and in
    ``report --study NAME --json`` (key ``sep_elo``, a rating per system); the first vote by hand: K = 8 / (1 +
    e^{-3}) = 7.6206, E = 1/2, alpha gains 3.8103."""
    add_separability(small_arena, DELTAS)
    expected = sep_elo_by_hand(VOTES, DELTAS)
    first = 8 / (1 + math.exp(-6 * 0.5)) * 0.5
    assert sep_elo_by_hand(VOTES[:1], DELTAS)["alpha"] == pytest.approx(1000 + first)
    assert first == pytest.approx(3.8103, abs=1e-4)
    out = io.StringIO()
    call_command("report", "--study", small_arena.name, "--json", stdout=out)
    report = json.loads(out.getvalue())
    sep = report["sep_elo"]
    assert sep["available"] and sep["battles"] == len(VOTES) and sep["battles_without_separability"] == 1
    assert {row["system"] for row in sep["leaderboard"]} == set(SYSTEMS)
    assert all(isinstance(row["rating"], float) for row in sep["leaderboard"])
    assert {row["system"]: row["online"] for row in sep["leaderboard"]} == pytest.approx(expected, abs=1e-9)
    board = arena.board_data(small_arena)
    assert {row["system"]: row["online"] for row in board["sep_elo"]["leaderboard"]} == pytest.approx(expected)
    # plain ELO is the same pass with K = 4 everywhere (alpha = 2, delta = T)
    plain = sep_elo_by_hand(VOTES, {})
    assert {row["system"]: row["online"] for row in board["elo"]["leaderboard"]} == pytest.approx(plain)


def test_the_board_is_the_reports_numbers(small_arena):
    add_separability(small_arena, DELTAS)
    report = assembly.compute(small_arena).to_json()
    board = arena.board_data(small_arena)
    for name in ("bradley_terry", "sep_elo", "elo", "style_control"):
        assert board[name] == report[name], name
    assert board["decisions"] == [
        {
            "system_a": s["system_a"],
            "system_b": s["system_b"],
            "decision": s["decision"],
            "low": s["win_rate_low"],
            "high": s["win_rate_high"],
            "items": s["decision_items"],
            "design": s["decision_design"],
            "live": s["decision_live"],
        }
        for s in report["stopping"]
    ]
    # every adjacent order of the Bradley-Terry board, with its pair's decision
    rows = board["bradley_terry"]["leaderboard"]
    assert [(o["upper"], o["lower"], o["order"]) for o in board["orders"]] == [
        (u["system"], w["system"], u["order_below"]) for u, w in zip(rows, rows[1:], strict=False)
    ]


def test_votes_and_prompts_each_rating_rests_on(small_arena):
    add_separability(small_arena, DELTAS)
    board = arena.board_data(small_arena)
    assert (board["votes"], board["counted"], board["prompts"]) == (6, 6, 6)
    per = {c["system"]: c for c in board["per_system"]}
    # alpha: prompts 0, 2, 4, 5; beta 0, 1, 3, 4; gamma 1, 2, 3, 5 -- separabilities on 0-4
    assert (per["alpha"]["votes"], per["alpha"]["prompts"], per["alpha"]["prompts_with_separability"]) == (4, 4, 3)
    assert (per["beta"]["votes"], per["beta"]["prompts"], per["beta"]["prompts_with_separability"]) == (4, 4, 4)
    assert (per["gamma"]["votes"], per["gamma"]["prompts"], per["gamma"]["prompts_with_separability"]) == (4, 4, 3)


def test_category_boards_read_the_raters_categories_and_the_automatic_tags(small_arena):
    Battle.objects.filter(item__external_id__in=["battle-0", "battle-1", "battle-4"]).update(category="writing")
    Battle.objects.filter(item__external_id__in=["battle-0", "battle-3"]).update(
        tags={"language": "en", "code": True, "long": False}
    )
    board = arena.board_data(small_arena)
    cats = {(c["kind"], c["name"]): c for c in board["categories"]}
    assert set(cats) == {("category", "writing"), ("tag", "language: en"), ("tag", "code")}
    writing = cats[("category", "writing")]
    assert (writing["votes"], writing["prompts"]) == (3, 3)
    # prompts 0 (alpha beat beta), 1 (beta beat gamma), 4 (beta beat alpha): gamma lost every battle it was in, so
    # the category has no Bradley-Terry ratings (they would be infinite), only the reason, as the report's board
    assert writing["leaderboard"] == [] and "gamma lost every battle it was in" in writing["reason"]
    code = cats[("tag", "code")]  # prompts 0 (alpha beat beta) and 3 (gamma beat beta)
    assert code["votes"] == 2 and code["leaderboard"] == [] and "beta lost every battle it was in" in code["reason"]
    # with a tie and a win each way the category is rated: alpha and beta on prompts 0 and 4 (one win each)
    Battle.objects.filter(item__external_id="battle-1").update(category="")
    board = arena.board_data(small_arena)
    writing = {(c["kind"], c["name"]): c for c in board["categories"]}[("category", "writing")]
    assert writing["reason"] == "" and {r["system"]: r["votes"] for r in writing["leaderboard"]} == {
        "alpha": 2,
        "beta": 2,
    }
    assert arena.tag_categories({"language": "de", "code": False, "long": True, "words": 0}) == ["language: de", "long"]


def test_flagged_votes_are_left_out_and_counted_by_reason(small_arena):
    flagged = ["battle-1", "battle-3"]
    Judgment.objects.filter(pair__item__external_id__in=flagged).update(superseded=True)
    Battle.objects.filter(item__external_id="battle-1").update(flag="near-duplicate prompt: repeats battle 12")
    Battle.objects.filter(item__external_id="battle-3").update(flag="near-duplicate prompt: repeats battle 2")
    battle = Battle.objects.get(item__external_id="battle-5")
    Battle.objects.filter(pk=battle.pk).update(status=Battle.Status.REFUSED, flag="names its own model (alpha)")
    board = arena.board_data(small_arena)
    assert (board["votes"], board["counted"]) == (6, 4)
    assert board["flagged"] == {"votes": 2, "reasons": [{"why": "near-duplicate prompt", "votes": 2}]}
    assert board["refused"] == [{"why": "names its own model", "battles": 1}]
    assert board["bradley_terry"]["battles"] == 4
    # the report leaves them out too
    assert assembly.compute(small_arena).to_json()["bradley_terry"]["battles"] == 4


def test_a_vote_joins_the_queued_refresh_and_only_the_worker_computes(small_arena):
    first = jobs.start(small_arena, arena.JOB_KIND)
    assert jobs.start(small_arena, arena.JOB_KIND).pk == first.pk  # coalesced: the queued one is returned
    assert not ArenaBoard.objects.exists()
    assert run_queued() == 1
    board = ArenaBoard.objects.get(study=small_arena)
    assert board.votes == 6 and board.data["counted"] == 6 and board.version == arena.data_version(small_arena)
    assert "Board computed from 6 votes" in Job.objects.get(pk=first.pk).message
    # a refresh while one runs queues one more behind it; finished ones are cleared by the next refresh
    Job.objects.filter(pk=first.pk).update(status=Job.Status.RUNNING)
    second = jobs.start(small_arena, arena.JOB_KIND)
    assert second.pk != first.pk and jobs.start(small_arena, arena.JOB_KIND).pk == second.pk


@pytest.mark.slow(seconds=20)
def test_the_outlier_test_flags_a_reversing_rater_through_do_flag_votes(researcher):
    """240 prompts: honest raters r1 and r2 vote for the stronger system (alpha > beta > gamma) four times in five;
    r9 reverses every vote. The job flags r9's votes (and only theirs), kept and not counted."""
    study = make_arena(researcher, SYSTEMS, 241, samples=1)
    pairs = [("alpha", "beta"), ("beta", "gamma"), ("alpha", "gamma")]
    votes = []
    for n in range(240):
        a, b = pairs[n % 3]
        rater = ("r1", "r2", "r9")[n % 4 % 3] if n % 4 != 3 else "r1"
        honest_winner = a if n % 5 else b  # the stronger system wins 4 times in 5
        winner = (b if honest_winner == a else a) if rater == "r9" else honest_winner
        votes.append((n, rater, a, b, winner))
    add_votes(study, votes)
    jobs.start(study, arena.JOB_KIND)
    run_queued()
    board = ArenaBoard.objects.get(study=study).data
    r9 = sum(1 for v in votes if v[1] == "r9")
    assert board["outliers"]["raters_flagged"] == 1 and board["outliers"]["raters_tested"] == 3
    assert board["flagged"]["votes"] == r9 and board["counted"] == 240 - r9
    flagged = Battle.objects.filter(study=study).exclude(flag="")
    assert {b.rater.external_id for b in flagged} == {"r9"} and all(b.flag == arena.OUTLIER_WHY for b in flagged)
    assert Judgment.objects.filter(study=study, superseded=True).count() == r9
    # a flagged rater stays flagged: their next vote, even one for the favourite, is flagged by the next refresh
    add_votes(study, [(240, "r9", "alpha", "gamma", "alpha")], start=240)
    jobs.start(study, arena.JOB_KIND)
    run_queued()
    board = ArenaBoard.objects.get(study=study).data
    assert board["flagged"]["votes"] == r9 + 1 and board["outliers"]["votes_flagged_now"] == 1
    assert Battle.objects.get(item__external_id="battle-240").flag == arena.OUTLIER_WHY


def test_no_rater_is_tested_while_no_rating_exists(researcher):
    """alpha has won every counted vote, so Bradley-Terry has no ratings (why_no_mle): a fit stopped at an arbitrary
    point would make r9's three votes against it look unlikely. Nobody is tested, nothing is flagged."""
    study = make_arena(researcher, SYSTEMS, 40, samples=1)
    honest = [(n, "r1", "alpha", ("beta", "gamma")[n % 2], "alpha") for n in range(30)]
    contrary = [(30 + n, "r9", "alpha", "beta", "beta") for n in range(3)]
    add_votes(study, honest + contrary)
    tests, _ = arena.outlier_tests(arena.read_votes(study))
    assert tests == {}
    jobs.start(study, arena.JOB_KIND)
    run_queued()
    assert not Battle.objects.filter(study=study).exclude(flag="").exists()


def test_the_board_page_serves_the_stored_board_and_polls(
    researcher_client, small_arena, django_assert_max_num_queries
):
    url = reverse("arena_board", args=[small_arena.pk])
    page = researcher_client.get(url)
    assert page.status_code == 200 and b"board-computing" in page.content
    assert not ArenaBoard.objects.exists()  # the request queued the refresh, never computed it
    assert Job.objects.filter(kind=arena.JOB_KIND, status=Job.Status.QUEUED).count() == 1
    run_queued()
    page = researcher_client.get(url).content.decode()
    assert "In short" in page and "6 votes counted on 6 prompts." in page
    assert page.index("In short") < page.index("Bradley–Terry, with 95 % intervals")
    assert "Sep-ELO" in page and "sep-elo-waiting" in page  # no separability yet
    board = ArenaBoard.objects.get(study=small_arena)
    body = reverse("arena_board_body", args=[small_arena.pk])
    unchanged = researcher_client.get(body, {"since": board.refreshed.isoformat(), "state": "fresh"})
    assert unchanged.status_code == 204
    assert researcher_client.get(body, {"since": "", "state": "missing"}).status_code == 200
    study_page = researcher_client.get(small_arena.get_absolute_url()).content.decode()
    assert f'href="{url}"' in study_page and "Leaderboard" in study_page


def test_an_empty_arena_says_how_the_board_fills_in(researcher_client, researcher):
    study = make_arena(researcher, SYSTEMS, 2, name="empty")
    url = reverse("arena_board", args=[study.pk])
    researcher_client.get(url)
    run_queued()
    page = researcher_client.get(url).content.decode()
    assert "No votes yet" in page and "rater link" in page


def test_the_board_page_is_its_researchers_and_an_arenas_only(client, other_researcher, small_arena, study):
    client.force_login(other_researcher)
    assert client.get(reverse("arena_board", args=[small_arena.pk])).status_code == 404
    client.force_login(study.owner)
    assert client.get(reverse("arena_board", args=[study.pk])).status_code == 404  # not an arena
    assert "Leaderboard" not in client.get(study.get_absolute_url()).content.decode()


def test_a_refresh_that_failed_on_this_data_is_shown_not_queued_again(researcher_client, small_arena):
    url = reverse("arena_board", args=[small_arena.pk])
    researcher_client.get(url)
    job = Job.objects.get(kind=arena.JOB_KIND, status=Job.Status.QUEUED)
    jobs.end(Job.objects.filter(pk=job.pk), Job.Status.FAILED, "ValueError: a broken board")
    page = researcher_client.get(url).content.decode()
    assert "Computing the board failed" in page and "a broken board" in page
    assert not Job.objects.filter(kind=arena.JOB_KIND, status=Job.Status.QUEUED).exists()
    add_votes(small_arena, [(0, "r4", "alpha", "beta", "beta")], start=len(VOTES))  # new data: a new refresh
    researcher_client.get(url)
    assert Job.objects.filter(kind=arena.JOB_KIND, status=Job.Status.QUEUED).count() == 1


def test_real_battles_and_votes_fill_the_board_through_the_queued_job(researcher):
    """End to end on the arena's own path (tests/annotation/arena/fixtures.py: the local streaming server): battles
    started with a category, streamed, voted; the votes queue one refresh, whose board counts them, files them by
    the rater's category and the prompts' automatic tags, and a vote flagged afterwards is left out with its reason."""
    from annotation import elicitation
    from annotation.arena import battles as arena_battles
    from annotation.rating import battles as rating_battles
    from annotation.rating.recording import Submission
    from annotation.studies import enrolment
    from tests.annotation.arena.fixtures import answered
    from tests.annotation.arena.fixtures import make_arena as make_live_arena
    from tests.judge_server import running

    with running() as server:
        server.stream_rate = 1000.0
        study = make_live_arena(researcher, server, categories=["writing", "coding"])
        voted = []
        for n in range(6):
            rater = enrolment.do_create_rater_link(study, f"voter-{n}")
            category = "writing" if n % 2 else "coding"
            battle = answered(
                arena_battles.do_start_battle(rater, f"Question {n}: why is the sky blue?", category=category)
            )
            choice = "first" if n % 3 else "second"
            arena_battles.do_vote(battle, Submission(key=f"v{n}", answer=elicitation.Answer(choice=choice)))
            voted.append(battle)
    assert Job.objects.filter(study=study, kind=arena.JOB_KIND, status=Job.Status.QUEUED).count() == 1
    run_queued()
    board = ArenaBoard.objects.get(study=study).data
    assert (board["votes"], board["counted"], board["prompts"]) == (6, 6, 6)
    assert sum(c["votes"] for c in board["per_system"]) == 12
    cats = {(c["kind"], c["name"]): c["votes"] for c in board["categories"]}
    assert cats[("category", "writing")] == 3 and cats[("category", "coding")] == 3
    assert any(kind == "tag" and name.startswith("language") for kind, name in cats)
    rating_battles.do_flag_votes([voted[0].pk], "near-duplicate prompt: repeats battle 9")
    jobs.start(study, arena.JOB_KIND)
    run_queued()
    board = ArenaBoard.objects.get(study=study).data
    assert board["counted"] == 5 and board["flagged"]["reasons"] == [{"why": "near-duplicate prompt", "votes": 1}]
    assert assembly.compute(study).to_json()["elo"]["battles"] == 5  # the same battles as every board


def test_one_vote_shows_no_rating_it_cannot_stand_behind_on_the_board_and_in_the_report(researcher_client, researcher):
    """One vote, blue over red: Bradley-Terry's likelihood grows without bound (blue won every battle it was in),
    so the board and the report give the reason, not 2285 and -285; style control likewise; ELO and sep-ELO have no
    interval over one prompt (the bootstrap of one item has no spread), so both systems share rank 1 and no leader
    is named (docs/ratings.md#when-there-is-no-rating)."""
    study = make_arena(researcher, ("blue", "red"), 3, name="one vote")
    add_votes(study, [(0, "r1", "blue", "red", "blue")])
    add_separability(study, {0: 0.05})
    board = arena.board_data(study)
    for name in ("bradley_terry", "style_control"):
        assert not board[name]["available"], name
        assert "blue won every battle it was in; red lost every battle it was in" in board[name]["reason"]
    for name in ("elo", "sep_elo"):
        rows = board[name]["leaderboard"]
        assert [(r["low"], r["high"], r["rank"]) for r in rows] == [(None, None, 1), (None, None, 1)], name
    assert board["bradley_terry"] == assembly.compute(study).to_json()["bradley_terry"]  # the report's own refusal
    arena.do_refresh(study)
    page = researcher_client.get(reverse("arena_board", args=[study.pk])).content.decode()
    assert "2285" not in page and "2,285" not in page and "3238" not in page
    assert "No leader yet" in page and " leads " not in page and "blue won every battle it was in" in page
    assert "none yet (needs votes on two prompts or more)" in page
    assert "No order yet" in page
    from analytics import sentences

    card = sentences.answers(assembly.compute(study))[0]
    assert card.answer == "Not yet" and card.detail.startswith("No Bradley-Terry ratings yet: blue won")


def test_why_no_mle_reads_the_win_or_tie_graph():
    """Zermelo's condition: a win or a tie each way across every split of the systems."""
    from analytics.report.ratings import why_no_mle

    systems = ["a", "b", "c"]

    def why(battles):
        a = np.array([systems.index(x) for x, _, _ in battles])
        b = np.array([systems.index(y) for _, y, _ in battles])
        return why_no_mle(systems, a, b, np.array([s for _, _, s in battles], dtype=float))

    assert why([("a", "b", 1), ("b", "c", 1), ("c", "a", 1)]) == ""  # a cycle: every split crossed both ways
    assert why([("a", "b", 0.5), ("b", "c", 0.5)]) == ""  # ties count half a win each way
    assert "a won every battle it was in" in why([("a", "b", 1), ("b", "c", 0.5), ("a", "c", 1)])
    assert "c lost every battle it was in" in why([("a", "b", 0.5), ("a", "c", 1), ("b", "c", 1)])
    assert "a and b won every battle against the other systems" in why(
        [("a", "b", 1), ("b", "a", 1), ("a", "c", 1), ("c", "b", 0)]
    )
    assert "c has no battles yet" in why([("a", "b", 1), ("b", "a", 1)])


def test_systems_shown_with_the_same_rating_share_a_rank():
    """Ranks from the bounds in whole points: 1000.44 and 999.56 with zero-width intervals both show 1000."""
    from analytics.core import ratings as core
    from analytics.leaderboards import rows

    point = np.array([1000.44, 999.56, 1040.0])
    low, high = point.copy(), point.copy()
    board = rows(["blue", "red", "green"], core.Interval(point, point, low, high, core.ci_ranks(low, high)), "elo")
    assert [(r.system, r.rank) for r in board] == [("green", 1), ("blue", 2), ("red", 2)]


def test_the_summary_names_a_leader_only_when_its_rank_is_its_own(small_arena):
    board = arena.board_data(small_arena)
    rows = [{**r, "interval": "x"} for r in board["bradley_terry"]["leaderboard"]]
    tied = [{**r, "rank": 1} for r in rows]
    assert arena.leader_words(board, tied).startswith(f"No leader yet: {rows[0]['system']} has the highest")
    alone = [{**r, "rank": i + 1} for i, r in enumerate(rows)]
    assert arena.leader_words(board, alone).startswith(f"{rows[0]['system']} leads (")
    missing = [{**r, "low": None} for r in alone]
    assert arena.leader_words(board, missing).startswith("No leader yet: the Bradley-Terry ratings have no interval")


def test_the_boards_tables_stack_on_a_phone_each_cell_named_by_its_column(researcher_client, small_arena):
    """On a narrow screen (seplab.css, ``table.stacked``) each row reads as a card, every cell labelled by its
    column, instead of a 701 px table cut inside a 390 px card."""
    import re

    arena.do_refresh(small_arena)
    page = researcher_client.get(reverse("arena_board", args=[small_arena.pk])).content.decode()
    tables = re.findall(r"<table[^>]*>.*?</table>", page, flags=re.S)
    assert tables and all('class="data stacked"' in t for t in tables)
    for table in tables:
        cells = re.findall(r"<td[^>]*>", table)
        assert cells and all("data-label=" in c for c in cells)
    assert 'data-label="Order above the next"' in page and 'data-label="95 % interval"' in page


def test_the_empty_board_says_when_a_vote_appears(researcher_client, researcher):
    study = make_arena(researcher, SYSTEMS, 2, name="empty words")
    arena.do_refresh(study)
    page = researcher_client.get(reverse("arena_board", args=[study.pk])).content.decode()
    assert "within seconds" not in page
    assert "queues a refresh of this board for the background worker" in page and "every 5 seconds" in page
