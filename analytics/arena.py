"""An arena's leaderboard, computed in the worker after votes and stored (``ArenaBoard``): the board page polls the
stored board, no request computes it (docs/arena.md#the-board).

The numbers are the report's, computed by the report's own code on the same judgments (``analytics/report``): the
Bradley-Terry board with its sandwich intervals clustered by prompt, sep-ELO (each vote's K weighted by its prompt's
separability, ``ratings.separability_k``, Eq. 6 of the separability paper), ELO, the style-controlled board, and each
adjacent order's decision from the stopping section (the pairs' anytime-valid decisions; the live plan's stored
``PairDecision`` where it has one). The board adds what an arena needs besides: per system the votes and prompts
each rating rests on, a Bradley-Terry board per category (the researcher's categories and the prompts' automatic
tags), and the votes kept but not counted and why. Before it computes, the job runs the outlier test
(``analytics/core/outliers.py``) and flags the votes of raters it finds unlikely, through the one writer of flagged
votes, ``annotation.rating.battles.do_flag_votes``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections import Counter, defaultdict

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from analytics import stored
from analytics.core import outliers, ratings
from analytics.models import ArenaBoard
from analytics.populations import Population
from analytics.report import data
from analytics.report.ratings import battles, bradley_terry_rows, ratings_section, why_no_mle
from analytics.report.serial import to_json
from analytics.report.stopping import stopping_section
from annotation import jobs
from annotation.models import Battle, Job, Study
from selection.core import winners
from selection.models import ItemSeparability

JOB_KIND = "arena_board"
BOARD_FORMAT = 1  # raised when what a stored board holds changes: boards stored by older code are computed again
# one refresh queued per arena: a vote arriving while one is queued joins it; while one runs, one more is queued
# behind it (the running one may have read the votes before this one)
LIMIT = jobs.Limit("arena board refreshes", key=(), coalesce="queued", per_study=1)
OUTLIER_WHY = "unlikely rater: their votes failed the outlier test (docs/arena.md#abuse)"


def reason_of(flag: str) -> str:
    """A flag's reason as the board groups it: its first reason (``do_flag_votes`` adds a second after "; "), its
    words before any ':' or '(' (the details after them -- which earlier battle a prompt repeats -- differ from vote
    to vote)."""
    return re.split(r"[:(]", flag.split("; ")[0], maxsplit=1)[0].strip() or "flagged"


def tag_categories(tags: dict) -> list[str]:
    """The automatic categories of a prompt from its tags (``Battle.tags``): a true tag is its name ("code"), a
    text its name and value ("language: en"); false and empty tags none."""
    out = []
    for name, value in sorted((tags or {}).items()):
        if value is True:
            out.append(str(name))
        elif isinstance(value, str) and value:
            out.append(f"{name}: {value}")
        elif isinstance(value, int | float) and not isinstance(value, bool) and value:
            out.append(f"{name}: {value}")
    return out


@dataclasses.dataclass(frozen=True)
class ArenaVotes:
    """What a refresh reads once: the report's rows of the people (``Population()``), the battles by prompt, and
    the systems in the study's order."""

    rows: list[data.Row]
    battles: dict[int, dict]  # item id -> the battle's id, rater, category, tags, flag, status
    refused: list[str]  # the flags of refused battles
    systems: list[str]


def read_votes(study: Study) -> ArenaVotes:
    rows = data.admitted(data.load_rows(study), Population())
    by_item: dict[int, dict] = {}
    refused = []
    for values in Battle.objects.filter(study=study).values(
        "id", "item_id", "category", "tags", "flag", "status", "gold_id"
    ):
        if values["status"] == Battle.Status.REFUSED:
            refused.append(values["flag"])
        by_item[values["item_id"]] = dict(values)
    systems = list(study.systems.values_list("name", flat=True))
    return ArenaVotes(rows, by_item, refused, systems)


def outlier_tests(votes: ArenaVotes, alpha: float = outliers.ALPHA) -> tuple[dict[str, outliers.RaterTest], list]:
    """Every voter's outlier test against the Bradley-Terry ratings of the counted votes (rater -> test), and the
    battles' votes read (rows with a choice, in the order cast; attention checks are judged by their known answer,
    not here)."""
    voted = [
        r
        for r in votes.rows
        if r.rating is not None and r.item_id in votes.battles and votes.battles[r.item_id]["gold_id"] is None
    ]
    counted = [r for r in voted if not r.superseded]
    if not counted:
        return {}, voted
    _, a, b, score = battles(counted, votes.systems)
    codes = np.unique(np.concatenate([a, b]))  # the systems with counted votes
    remap = np.full(len(votes.systems), -1, dtype=np.int64)
    remap[codes] = np.arange(len(codes))
    if why_no_mle([votes.systems[k] for k in codes], remap[a], remap[b], score):
        # no ratings to test against (a system that never lost, early on): a fit stopped at an arbitrary point
        # would make ordinary votes look unlikely
        return {}, voted
    fitted = ratings.bradley_terry(a, b, score, len(votes.systems))
    names = sorted({r.rater for r in voted})
    code = {name: i for i, name in enumerate(names)}
    index = {s: i for i, s in enumerate(votes.systems)}
    # every vote, flagged ones too (``battles`` leaves those out): a flagged rater's test reads all they cast
    va = np.array([index[r.system_a] for r in voted], dtype=np.int64)
    vb = np.array([index[r.system_b] for r in voted], dtype=np.int64)
    vscore = winners.score_for_a([r.rating for r in voted if r.rating is not None]).reshape(-1)
    tests = outliers.rater_tests([code[r.rater] for r in voted], va, vb, vscore, fitted, alpha=alpha)
    return {names[c]: t for c, t in tests.items()}, voted


def do_flag_outliers(study: Study, votes: ArenaVotes) -> tuple[int, dict]:
    """Flag the counted votes of every rater the outlier test finds unlikely, and of every rater it flagged before
    (a flagged rater stays flagged: their new votes are flagged too). Returns (votes flagged now, the test's
    summary for the board)."""
    from annotation.rating.battles import do_flag_votes  # the one writer of flagged votes (annotation's rating wing)

    tests, voted = outlier_tests(votes)
    earlier = {  # flagged by an earlier refresh
        r.rater for r in voted if r.superseded and OUTLIER_WHY in votes.battles[r.item_id]["flag"].split("; ")
    }
    unlikely = {rater for rater, test in tests.items() if test.flagged} | earlier
    ids = sorted({votes.battles[r.item_id]["id"] for r in voted if r.rater in unlikely and not r.superseded})
    flagged = do_flag_votes(ids, OUTLIER_WHY) if ids else 0
    summary = {
        "alpha": outliers.ALPHA,
        "flip": outliers.FLIP,
        "raters_tested": len(tests),
        "raters_flagged": len(unlikely),
        "votes_flagged_now": flagged,
    }
    return flagged, summary


def board_data(study: Study, votes: ArenaVotes | None = None, outlier_summary: dict | None = None) -> dict:
    """The whole board of an arena, as stored: the report's boards (Bradley-Terry, sep-ELO, ELO, style control),
    per system the votes and prompts it rests on, the adjacent orders and whether each is decided, a Bradley-Terry
    board per category, and the flagged and refused votes by reason."""
    votes = votes or read_votes(study)
    settings = data.analysis_parameters(study)
    systems = votes.systems
    counted = [r for r in votes.rows if not r.superseded]
    rated = [r for r in counted if r.rating is not None]
    deltas = data.separability_by_item(study)
    answers = data.Answers(study, {r.pair_id for r in rated})
    stopping = stopping_section(study, votes.rows, settings)  # leaves superseded votes out, as the report does
    decided = {(s.system_a, s.system_b): s.decision for s in stopping}
    section = ratings_section(settings, votes.rows, systems, deltas, answers, decided)
    flagged_rows = [r for r in votes.rows if r.superseded and r.rating is not None]
    reasons = Counter(
        reason_of(votes.battles[r.item_id]["flag"]) if r.item_id in votes.battles else "superseded"
        for r in flagged_rows
    )
    bt_json = to_json(section.bradley_terry)
    return {
        "format": BOARD_FORMAT,
        "systems": systems,
        "votes": len(rated) + len(flagged_rows),
        "counted": len(rated),
        "prompts": len({r.item_id for r in rated}),
        "parameters": to_json(settings.ratings()),
        "bradley_terry": bt_json,
        "sep_elo": to_json(section.sep_elo),
        "elo": to_json(section.elo),
        "style_control": to_json(section.style_control),
        "per_system": per_system(rated, systems, deltas, flagged_rows),
        "orders": adjacent_orders(bt_json),
        "decisions": [
            {
                "system_a": s.system_a,
                "system_b": s.system_b,
                "decision": s.decision,
                "low": s.win_rate_low,
                "high": s.win_rate_high,
                "items": s.decision_items,
                "design": s.decision_design,
                "live": s.decision_live,
            }
            for s in stopping
        ],
        "categories": category_boards(rated, systems, votes.battles, settings.ratings()),
        "flagged": {
            "votes": len(flagged_rows),
            "reasons": [{"why": why, "votes": n} for why, n in reasons.most_common()],
        },
        "refused": [
            {"why": why, "battles": n} for why, n in Counter(reason_of(f) for f in votes.refused).most_common()
        ],
        "outliers": outlier_summary or {},
    }


def per_system(rated: list[data.Row], systems: list[str], deltas: data.Deltas, flagged: list[data.Row]) -> list[dict]:
    """Per system: the counted votes and the prompts its ratings rest on, the prompts with a separability (what
    sep-ELO weights), and its flagged votes."""
    votes: Counter = Counter()
    flagged_votes: Counter = Counter()
    prompts: dict[str, set] = defaultdict(set)
    separable: dict[str, set] = defaultdict(set)
    for r in rated:
        has_delta = r.item_id in deltas.get((r.system_a, r.system_b), {})
        for s in (r.system_a, r.system_b):
            votes[s] += 1
            prompts[s].add(r.item_id)
            if has_delta:
                separable[s].add(r.item_id)
    for r in flagged:
        flagged_votes[r.system_a] += 1
        flagged_votes[r.system_b] += 1
    return [
        {
            "system": s,
            "votes": votes[s],
            "prompts": len(prompts[s]),
            "prompts_with_separability": len(separable[s]),
            "flagged": flagged_votes[s],
        }
        for s in systems
    ]


ORDER_WORDS = {
    "decided": "decided",
    "reversed": "decided the other way",
    "equivalent": "equivalent (within the margin)",
    "open": "open",
    "not compared": "not compared yet",
}


def adjacent_orders(board: dict) -> list[dict]:
    """The Bradley-Terry board's adjacent orders, each with its pair's decision (the report's ``order_below``)."""
    rows = board.get("leaderboard") or []
    return [
        {"upper": upper["system"], "lower": lower["system"], "order": upper.get("order_below") or "open"}
        for upper, lower in zip(rows, rows[1:], strict=False)
    ]


def category_boards(
    rated: list[data.Row], systems: list[str], by_item: dict[int, dict], params: data.RatingParameters
) -> list[dict]:
    """A Bradley-Terry board (sandwich intervals clustered by prompt, ``bradley_terry_rows``) per category: the
    researcher's (the rater's choice, ``Battle.category``) and the automatic ones (``Battle.tags``), each over the
    systems it has votes of. The battles are made once (a prompt is in one category, so aggregating them first and
    picking each category's after is the same as aggregating each category's)."""
    battle_rows, a, b, score = battles(rated, systems, params.aggregation, params.seed)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    named: dict[tuple, list[str]] = {}  # the tags' categories, once per distinct tags
    for i, r in enumerate(battle_rows):
        battle = by_item.get(r.item_id)
        if battle is None:
            continue
        if battle["category"]:
            groups[("category", battle["category"])].append(i)
        tags = battle["tags"] or {}
        try:
            key = tuple(sorted(tags.items()))
            names = named[key] if key in named else named.setdefault(key, tag_categories(tags))
        except TypeError:  # a tag whose value is a list or an object
            names = tag_categories(tags)
        for name in names:
            groups[("tag", name)].append(i)
    items = np.array([r.item_id for r in battle_rows], dtype=np.int64)
    out = []
    for (kind, name), picked in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]), kv[0][1])):
        index = np.array(picked, dtype=np.int64)
        ca, cb = a[index], b[index]
        codes = np.unique(np.concatenate([ca, cb]))  # the systems with votes in it, in the study's order
        entry: dict = {"kind": kind, "name": name, "votes": len(index), "prompts": len(np.unique(items[index]))}
        if len(codes) < 2:
            entry.update(reason="fewer than two systems have votes in it", leaderboard=[])
            out.append(entry)
            continue
        present = [systems[k] for k in codes]
        remap = np.full(len(systems), -1, dtype=np.int64)
        remap[codes] = np.arange(len(codes))
        ra, rb = remap[ca], remap[cb]
        infinite = why_no_mle(present, ra, rb, score[index])
        if infinite:  # as the report's own board refuses: no rating without a finite fit (docs/ratings.md)
            entry.update(reason=infinite, leaderboard=[])
            out.append(entry)
            continue
        board = bradley_terry_rows(present, [battle_rows[i] for i in picked], ra, rb, score[index])
        votes = np.bincount(ra, minlength=len(codes)) + np.bincount(rb, minlength=len(codes))
        prompts = [len(np.unique(items[index][(ra == k) | (rb == k)])) for k in range(len(codes))]
        position = {s: k for k, s in enumerate(present)}
        entry.update(
            reason="",
            leaderboard=[
                {**to_json(row), "votes": int(votes[position[row.system]]), "prompts": prompts[position[row.system]]}
                for row in board
            ],
        )
        out.append(entry)
    return out


def data_version(study: Study) -> str:
    """The fingerprint of what the board depends on: the report's (judgments, screened raters, settings ...), the
    prompts' separabilities, the battles' flags and refusals. (The board's decided orders are its own stopping
    section's, computed from the votes it reads, not the pairs' stored decisions.)"""
    parts = [
        stored.data_version(study),
        ItemSeparability.objects.filter(run__study=study).aggregate(n=Count("id"), newest=Max("id")),
        Battle.objects.filter(study=study).aggregate(
            flagged=Count("id", filter=~Q(flag="")), refused=Count("id", filter=Q(status=Battle.Status.REFUSED))
        ),
        {"format": BOARD_FORMAT},
    ]
    return hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()


def do_refresh(study: Study, flag_outliers: bool = True) -> ArenaBoard:
    """Run the outlier test (flagging what it finds), then compute and store the board. The version is read
    before computing, so votes arriving meanwhile leave the stored board stale (another refresh follows)."""
    started = time.perf_counter()
    votes = read_votes(study)
    summary = None
    if flag_outliers:
        flagged, summary = do_flag_outliers(study, votes)
        if flagged:
            votes = read_votes(study)  # the flagged votes are superseded now
    version = data_version(study)
    board = board_data(study, votes, summary)
    values = {
        "data": board,
        "votes": board["votes"],
        "version": version,
        "refreshed": timezone.now(),
        "seconds": time.perf_counter() - started,
    }
    try:
        with transaction.atomic():
            row, _ = ArenaBoard.objects.update_or_create(study=study, defaults=values)
    except IntegrityError:  # two workers stored it at once: the later one wins
        row = ArenaBoard.objects.get(study=study)
        ArenaBoard.objects.filter(pk=row.pk).update(**values)
    return row


def do_request_refresh(study: Study, version: str = "") -> Job | None:
    """The queued refresh of the board (or a new one queued; None when the researcher's job cap is reached, and
    the page asks again as it polls)."""
    try:
        return jobs.start(study, JOB_KIND, message="Computing the arena board", params={"version": version})
    except jobs.JobLimit:
        return None


@dataclasses.dataclass
class ServedBoard:
    """What the board page shows: the stored board (None before the first), whether newer votes or separabilities
    have arrived since, and the refresh job when one is queued or running."""

    board: ArenaBoard | None
    stale: bool
    job: Job | None

    @property
    def state(self) -> str:
        return "missing" if self.board is None else ("stale" if self.stale else "fresh")


def do_serve(study: Study) -> ServedBoard:
    """The stored board; queues a refresh when it is missing or older than the data (a vote queues one itself,
    this catches a separability computed, a setting changed or a refresh that failed)."""
    board = ArenaBoard.objects.filter(study=study).first()
    version = data_version(study)
    stale = board is None or board.version != version
    job = None
    if stale:
        latest = Job.objects.filter(study=study, kind=JOB_KIND).first()
        # a refresh that failed on this very data is shown, not queued again at every poll
        failed_here = (
            latest is not None and latest.status == Job.Status.FAILED and latest.params.get("version") == version
        )
        job = latest if latest is not None and (latest.active or failed_here) else do_request_refresh(study, version)
    return ServedBoard(board, stale, job)


def arena_board_job(job: Job, progress: jobs.Progress) -> jobs.Outcome:
    """The board's refresh after votes (``jobs.start(study, "arena_board")``, coalesced: one queued at a time)."""
    row = do_refresh(job.study)
    # a refresh follows every vote: keep only the latest finished one
    Job.objects.filter(study=job.study, kind=JOB_KIND, status__in=(Job.Status.DONE, Job.Status.FAILED)).exclude(
        pk=job.pk
    ).delete()
    flagged = row.data.get("outliers", {}).get("votes_flagged_now", 0)
    more = f"; {flagged} vote{'s' if flagged != 1 else ''} of unlikely raters flagged" if flagged else ""
    return jobs.Outcome(f"Board computed from {row.votes} votes in {row.seconds:.1f} s{more}.", complete=True)


NO_INTERVAL = "none yet (needs votes on two prompts or more)"


def _interval(row: dict) -> str:
    """A row's 95 % interval in whole points, or why it has none (docs/ratings.md#when-there-is-no-rating)."""
    low, high = row.get("low"), row.get("high")
    return NO_INTERVAL if low is None or high is None else f"{low:.0f} – {high:.0f}"


def page(study: Study, served: ServedBoard) -> dict:
    """The board page's context from the stored board: a summary in words first, then the tables' rows."""
    context: dict = {
        "study": study,
        "served": served,
        "state": served.state,
        "since": served.board.refreshed.isoformat() if served.board else "",
        "board": None,
    }
    if served.board is None:
        return context
    board = served.board.data
    counts = {c["system"]: c for c in board["per_system"]}
    bt = board["bradley_terry"]
    rows = []
    for row in bt.get("leaderboard", []):
        count = counts.get(row["system"], {})
        rows.append(
            {
                **row,
                "interval": _interval(row),
                "votes": count.get("votes", 0),
                "prompts": count.get("prompts", 0),
                "order": ORDER_WORDS.get(row.get("order_below") or "", ""),
            }
        )
    sep = board["sep_elo"]
    elo = {r["system"]: r for r in board["elo"].get("leaderboard", [])}
    sep_rows = [
        {
            **row,
            "interval": _interval(row),
            "elo": elo.get(row["system"], {}).get("rating"),
            "separable": counts.get(row["system"], {}).get("prompts_with_separability", 0),
        }
        for row in sep.get("leaderboard", [])
    ]
    style = board["style_control"]
    style_rows = [{**row, "interval": _interval(row)} for row in style.get("leaderboard", [])]
    categories = [
        {**c, "rows": [{**row, "interval": _interval(row)} for row in c["leaderboard"]]} for c in board["categories"]
    ]
    orders = [{**o, "words": ORDER_WORDS.get(o["order"], o["order"])} for o in board["orders"]]
    decided = sum(o["order"] in ("decided", "reversed", "equivalent") for o in board["orders"])
    context.update(
        board=board,
        rows=rows,
        sep_rows=sep_rows,
        style_rows=style_rows,
        categories=categories,
        orders=orders,
        summary=summary_words(board, rows, decided),
    )
    return context


def summary_words(board: dict, rows: list[dict], decided: int) -> list[str]:
    """The board in a few sentences: what it rests on, who leads, which orders are decided, what was left out."""
    if not board["counted"]:
        return []
    words = [
        f"{board['counted']} vote{'s' if board['counted'] != 1 else ''} counted on {board['prompts']} "
        f"prompt{'s' if board['prompts'] != 1 else ''}."
    ]
    words.append(leader_words(board, rows))
    if board["orders"]:
        words.append(
            f"{decided} of {len(board['orders'])} adjacent order{'s' if len(board['orders']) != 1 else ''} "
            "decided by the pairs' anytime-valid decisions."
        )
    if board["sep_elo"].get("available"):
        without = board["sep_elo"].get("battles_without_separability") or 0
        words.append(
            f"Sep-ELO weighs each vote by its prompt's separability; {without} vote{'s' if without != 1 else ''} "
            "still wait for theirs (weighted as K)."
        )
    flagged = board["flagged"]["votes"]
    if flagged:
        why = "; ".join(f"{r['votes']} {r['why']}" for r in board["flagged"]["reasons"])
        words.append(f"{flagged} vote{'s' if flagged != 1 else ''} kept but not counted ({why}).")
    return words


def leader_words(board: dict, rows: list[dict]) -> str:
    """Who leads, named only when the Bradley-Terry board has a rating and an interval for it and its rank is its
    own; else why no one leads yet (the report's refusal, a missing interval, a shared rank)."""
    bt = board["bradley_terry"]
    if not bt.get("available", True) or not rows:
        reason = bt.get("reason") or "fewer than two systems have votes"
        return f"No leader yet: {reason}."
    top = rows[0]
    if top.get("low") is None or top.get("high") is None:
        return "No leader yet: the Bradley-Terry ratings have no interval yet (it needs votes on two prompts or more)."
    shared = [r["system"] for r in rows[1:] if r["rank"] == top["rank"]]
    if shared:
        return (
            f"No leader yet: {top['system']} has the highest Bradley-Terry rating ({top['rating']:.0f}, 95 % interval "
            f"{top['interval']}) but its interval overlaps {', '.join(shared)}'s, so they share rank {top['rank']}."
        )
    return (
        f"{top['system']} leads ({top['rating']:.0f}, 95 % interval {top['interval']}), ahead of every other "
        "system: its interval clears the next one's."
    )
