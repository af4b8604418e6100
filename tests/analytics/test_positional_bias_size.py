"""The positional-bias p-value and interval hold their size on real data (docs/comparative-assessment.md,
positional bias).

PRD's human votes (../shared/data/prd_vicuna80_human): 80 questions (the product's items), each rated on up to
31 system pairs, a (question, pair) by up to three people who saw it in the same order and largely agree. The null
keeps every vote in model coordinates (who preferred which system) and draws the display order at random per
(question, pair), all its raters seeing the same order, as the product shows a pair; so no one favours a position
and the true P(first shown chosen) is 1/2. The report clusters by item (question), as here. The old test, an exact
binomial test pooling every vote, rejects this true null far more often than 5 %; the sign-flip test over items
does not. The judges answer each (question, pair) in both orders: their null swaps, at random per judge and
(question, pair), which order each of the two verdicts came with.

Tolerances are the binomial standard error of the replication count: a rejection rate at most
0.05 + 2 sqrt(0.05 * 0.95 / R), a coverage at least 0.95 - 2 sqrt(0.05 * 0.95 / R).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pytest
from scipy.stats import binomtest

from analytics.core import bias
from bench.prd_data import FILE, JUDGES, MODELS, PRD

ALPHA = 0.05
SIDED = {1: "first", 2: "second"}  # the files' scores: 1 the first shown better, 2 the second, 3 a tie


def slack(replications: int) -> float:
    return 2 * math.sqrt(ALPHA * (1 - ALPHA) / replications)


@pytest.fixture(scope="module")
def humans() -> dict[str, np.ndarray]:
    """One row per (question, pair): the question and its votes for the pair's sorted-first system (A) and for B,
    ties left out; and one row per vote: its (question, pair) and whether it went to A."""
    files = sorted(PRD.glob("answer_*-human-reviewer*.jsonl"))
    if not files:
        pytest.skip(f"{PRD} has no human votes: the real data lives in ../shared/data (see its README)")
    counts: dict[tuple[int, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for path in files:
        match = FILE.match(path.name)
        assert match, path.name
        a, b = match["a"], match["b"]
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["score"] in SIDED:
                first_won = row["score"] == 1
                a_won = first_won == (a < b)  # in model coordinates: A is the pair's sorted-first system
                counts[(row["question_id"], *sorted((a, b)))][0 if a_won else 1] += 1
    units = sorted(counts)
    a_votes = np.array([counts[u][0] for u in units])
    b_votes = np.array([counts[u][1] for u in units])
    per_unit = a_votes + b_votes
    return {
        "question": np.array([u[0] for u in units]),
        "a_votes": a_votes,
        "b_votes": b_votes,
        "vote_unit": np.repeat(np.arange(len(units)), per_unit),
        "vote_for_a": np.concatenate([np.arange(n) < k for k, n in zip(a_votes, per_unit, strict=True)]),
    }


def test_the_clustered_test_holds_its_size_where_the_pooled_binomial_does_not(humans):
    replications = 600
    rng = np.random.default_rng(20260417)
    a_first = rng.random((replications, humans["question"].size)) < 0.5  # the display order per (question, pair)
    first = a_first[:, humans["vote_unit"]] == humans["vote_for_a"]  # each vote's first shown chosen
    items = humans["question"][humans["vote_unit"]]
    clustered = [bias.positional_bias(f, items) for f in first]
    pooled = np.array([binomtest(int(f.sum()), f.size).pvalue for f in first])
    bound = ALPHA + slack(replications)
    assert np.mean([c.p_value < ALPHA for c in clustered]) <= bound
    assert np.mean(pooled < ALPHA) > bound  # the votes taken as independent: a true null rejected too often
    # the interval, by the same null, covers 1/2
    assert np.mean([c.low <= 0.5 <= c.high for c in clustered]) >= 1 - ALPHA - slack(replications)


@pytest.mark.parametrize("n_items", [10, 30])
def test_size_and_coverage_at_small_item_counts(humans, n_items):
    """Studies of n_items questions drawn from PRD's 80, whole (every pair and vote of a question), with replacement;
    the null as above, and a real bias beside it: each vote for the second shown turns to the first with
    probability 0.2, so the true P(first shown chosen) is (1 + 0.2) / 2 = 0.6 whatever the votes (E f = n / 2 before,
    + 0.2 n / 2 after). The p-value keeps its size and the interval covers 1/2 and 0.6."""
    replications, shift = 400, 0.2
    truth = {"null": 0.5, "biased": (1 + shift) / 2}
    rng = np.random.default_rng(n_items)
    questions = np.unique(humans["question"])
    votes_of = {q: np.flatnonzero(humans["question"][humans["vote_unit"]] == q) for q in questions}
    rejected, covered = dict.fromkeys(truth, 0), dict.fromkeys(truth, 0)
    for _ in range(replications):
        drawn = rng.choice(questions, n_items)
        votes = np.concatenate([votes_of[q] for q in drawn])
        items = np.repeat(np.arange(n_items), [votes_of[q].size for q in drawn])  # a question drawn twice: 2 items
        a_first = rng.random((n_items, humans["question"].size)) < 0.5  # per (drawn question, pair)
        null = a_first[items, humans["vote_unit"][votes]] == humans["vote_for_a"][votes]
        for case, first in (("null", null), ("biased", null | (rng.random(votes.size) < shift))):
            result = bias.positional_bias(first, items)
            rejected[case] += result.p_value < ALPHA
            covered[case] += result.low <= truth[case] <= result.high
    assert rejected["null"] / replications <= ALPHA + slack(replications)
    assert min(covered.values()) / replications >= 1 - ALPHA - slack(replications)
    assert rejected["biased"] > rejected["null"]  # and the bias is seen more often than the null is rejected


def test_a_real_bias_is_found(humans):
    """Power on the whole of PRD: each vote for the second shown turned to the first with probability 0.1 (true
    P(first shown chosen) 0.55) is found in nearly every replication; and the judges' own positional bias, real and
    large for four of the five (P(first) 0.36-0.81 on 1,300-1,550 verdicts in both orders), is found by the
    clustered test."""
    rng = np.random.default_rng(7)
    items = humans["question"][humans["vote_unit"]]
    found = 0
    for _ in range(100):
        a_first = rng.random(humans["question"].size) < 0.5
        first = (a_first[humans["vote_unit"]] == humans["vote_for_a"]) | (rng.random(items.size) < 0.1)
        found += bias.positional_bias(first, items).p_value < ALPHA
    assert found >= 95
    for judge in JUDGES:
        first, questions = judge_verdicts(judge)
        result = bias.positional_bias(first, questions)
        if abs(result.rate - 0.5) > 0.05:
            assert result.p_value < ALPHA, judge


def judge_verdicts(judge: str) -> tuple[np.ndarray, np.ndarray]:
    """A PRD judge's non-tie verdicts on the 10 pairs among ``MODELS``, in both orders: first shown chosen, and the
    question (item) each is of."""
    folder = PRD / f"ratings-{judge}"
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing: the judges' verdicts live in ../shared/data (see its README)")
    first, questions = [], []
    for path in sorted(folder.glob("answer_*.jsonl")):
        match = FILE.match(path.name)
        if not match or match["who"] != judge or match["a"] not in MODELS or match["b"] not in MODELS:
            continue
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["score"] in SIDED:
                first.append(row["score"] == 1)
                questions.append(row["question_id"])
    return np.array(first), np.array(questions)


def test_the_judges_figure_holds_its_size():
    """All five judges pooled, clustered by question, as the report's judge population: each judge's two verdicts
    on a (question, pair) (one per order) swapped between the orders at random, so the order cannot matter."""
    # (question, pair, judge) -> whether it preferred the pair's sorted-first system A (NaN: a tie), shown A first
    # and shown B first
    prefers_a: dict[tuple[int, str, str, str], list[float]] = defaultdict(lambda: [math.nan, math.nan])
    for judge in JUDGES:
        folder = PRD / f"ratings-{judge}"
        if not folder.is_dir():
            pytest.skip(f"{folder} is missing: the judges' verdicts live in ../shared/data (see its README)")
        for path in sorted(folder.glob("answer_*.jsonl")):
            match = FILE.match(path.name)
            if not match or match["who"] != judge or match["a"] not in MODELS or match["b"] not in MODELS:
                continue
            a, b = match["a"], match["b"]
            shown_first_is_a = a < b
            for line in path.read_text().splitlines():
                row = json.loads(line)
                if row["score"] in SIDED:
                    first_won = row["score"] == 1
                    key = (row["question_id"], *sorted((a, b)), judge)
                    prefers_a[key][0 if shown_first_is_a else 1] = float(first_won == shown_first_is_a)
    keys = sorted(prefers_a)
    verdicts = np.array([prefers_a[k] for k in keys])  # columns: shown A first, shown B first
    question = np.array([k[0] for k in keys])
    replications = 400
    rng = np.random.default_rng(11)
    rejected = 0
    for swap in rng.random((replications, len(keys))) < 0.5:
        with_a_first = np.where(swap, verdicts[:, 1], verdicts[:, 0])
        with_b_first = np.where(swap, verdicts[:, 0], verdicts[:, 1])
        first = np.concatenate([with_a_first, 1 - with_b_first])  # first shown chosen (NaN: a tie)
        items = np.concatenate([question, question])
        sided = ~np.isnan(first)
        rejected += bias.positional_bias(first[sided] == 1, items[sided]).p_value < ALPHA
    assert rejected / replications <= ALPHA + slack(replications)
