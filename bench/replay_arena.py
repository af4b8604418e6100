"""Which two systems, replayed: PRD's recorded human votes fed to an arena one battle at a time, the pair of each
battle drawn by the live pair choice (``selection.core.arena``: the open pairs the ranking needs weigh more, never a
rater's previous pair) or uniformly, each pair's decision kept as the live decision step keeps it (a betting
confidence sequence per pair, one vote an observation, at the study's default error rate split over the pairs); how
many votes each needs to reach the same decided adjacent orders (bench/README.md, "Which two systems, replayed").

    python bench/replay_arena.py --seeds 50

Data: ../shared/data/prd_vicuna80_human/battles_prd_human_individual_votes.csv (7,040 votes, 9 systems, 32 pairs).
A battle of a pair is one of the pair's recorded votes drawn at random (with replacement: the arena's raters vote as
PRD's did), scored 1, 0 or 1/2 (a tie) for the pair's first system. The votes are split by question: odd question
ids are the **dev** half, the only one the rule and its weight were chosen on (``--tune``: every open pair weighing
more, the first rule, against only the pairs the ranking needs), even ones the **holdout** half, reported with the
rule chosen. The adjacent orders are those of the half's own ranking (``decisions.ranking`` over every pair's mean on
all its votes, the ranking the rule reads); one is settled when the decided pairs put its two systems in an order --
directly, through other decided pairs (``decisions.implied``), or equivalent within the margin; settled "below"
when the decisions put the two the other way round (the pair's own votes, which the ranking over all pairs need not
follow: counted in the last column). Per seed, both choices run to ``--cap`` votes; the orders both settled alike are
the target, and each choice's votes are those after which it had settled all of them. Raters: each battle's rater
drawn from ``--raters``, whose previous pair is not drawn again (both choices).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from selection.core import arena, decisions, multiplicity  # noqa: E402  (after the path is set)

VOTES = ROOT.parent / "shared" / "data" / "prd_vicuna80_human" / "battles_prd_human_individual_votes.csv"
ALPHA, MARGIN = 0.05, 0.05  # a new study's decision error rate (split over the pairs) and margin of equivalence

Pair = tuple[str, str]
Weigh = Callable[[dict[Pair, str], dict[Pair, float]], dict[Pair, float]]


def load(half: str) -> dict[Pair, np.ndarray]:
    """Each system pair's recorded votes of the half ("dev": odd question ids, "holdout": even, "all"), as scores
    for the pair's first system in name order."""
    out: dict[Pair, list[float]] = {}
    with VOTES.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            q = int(row["question_id"])
            if half != "all" and (q % 2 == 1) != (half == "dev"):
                continue
            a, b = row["model_a"], row["model_b"]
            score = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[row["winner"]]
            pair, score = ((a, b), score) if a < b else ((b, a), 1.0 - score)
            out.setdefault(pair, []).append(score)
    return {pair: np.array(scores) for pair, scores in sorted(out.items())}


def adjacent_orders(pools: dict[Pair, np.ndarray]) -> list[Pair]:
    """(upper, lower) of each two systems next to each other in the half's ranking."""
    states = {p: decisions.PairState(decisions.UNDECIDED, float(v.mean())) for p, v in pools.items()}
    order = decisions.ranking(states)
    return list(zip(order, order[1:], strict=False))


def reached(order: Pair, calls: dict[Pair, str], known: dict[Pair, str]) -> str | None:
    """What the decisions say of the two systems next to each other in ``order``: "above" (the upper one better,
    as the half's ranking has it), "below" (the other way round: the decisions read the pair's own votes, which
    the ranking over all pairs may not follow), "equivalent", or None (not yet) -- directly or through other decided
    pairs."""
    upper, lower = order
    pair, upper_first = ((upper, lower), True) if upper < lower else ((lower, upper), False)
    call = calls.get(pair, decisions.UNDECIDED)
    if call == decisions.EQUIVALENT:
        return "equivalent"
    call = call if call != decisions.UNDECIDED else known.get(pair, decisions.UNDECIDED)
    if call == decisions.UNDECIDED:
        return None
    return "above" if (call == decisions.A_BETTER) == upper_first else "below"


def every_open(open_weight: float) -> Weigh:
    """The first rule: every undecided pair ``open_weight`` times a decided one."""

    def weigh(calls: dict[Pair, str], means: dict[Pair, float]) -> dict[Pair, float]:
        return {p: 1.0 if c != decisions.UNDECIDED else open_weight for p, c in calls.items()}

    return weigh


def ranking_rule(open_weight: float) -> Weigh:
    """Only the pairs the ranking still needs (``decisions.ranking_needs``) weigh ``open_weight``; at
    ``arena.OPEN_WEIGHT`` the product's rule itself (``arena.pair_weights``)."""

    def weigh(calls: dict[Pair, str], means: dict[Pair, float]) -> dict[Pair, float]:
        states = {p: decisions.PairState(c, means[p]) for p, c in calls.items()}
        if open_weight == arena.OPEN_WEIGHT:
            return arena.pair_weights(states)
        needs = decisions.ranking_needs(states)
        return {p: open_weight if p in needs else 1.0 for p in calls}

    return weigh


def uniform(calls: dict[Pair, str], means: dict[Pair, float]) -> dict[Pair, float]:
    return dict.fromkeys(calls, 1.0)


def replay(
    pools: dict[Pair, np.ndarray], orders: list[Pair], weigh: Weigh, seed: int, cap: int, raters: int
) -> tuple[dict[Pair, tuple[int, str]], int]:
    """One arena of ``cap`` battles: for each adjacent order the decisions settled, the vote count at which they did
    and what they said (``reached``); and how many were settled against the half's ranking."""
    rng = np.random.default_rng(seed)
    pairs = list(pools)
    alpha = multiplicity.pair_alpha(ALPHA, len(pairs), "auto")
    sequences = {p: decisions.BettingSequence(alpha) for p in pairs}
    calls = dict.fromkeys(pairs, decisions.UNDECIDED)
    means = dict.fromkeys(pairs, 0.5)
    previous: dict[int, int] = {}
    first: dict[Pair, tuple[int, str]] = {}
    weights = weigh(calls, means)
    for vote in range(1, cap + 1):
        rater = int(rng.integers(raters))
        index = arena.draw({i: weights[p] for i, p in enumerate(pairs)}, rng, avoid=previous.get(rater))
        assert index is not None
        previous[rater] = index
        pair = pairs[index]
        sequence = sequences[pair]
        sequence.update(float(pools[pair][rng.integers(len(pools[pair]))]))
        means[pair] = sequence.total / sequence.n
        call = decisions.decide(*sequence.interval, MARGIN)
        changed = call != calls[pair]
        if changed:
            calls[pair] = call
            known = decisions.implied({p: decisions.PairState(c, means[p]) for p, c in calls.items()})
            for order in orders:
                if order not in first:
                    now = reached(order, calls, known)
                    if now is not None:
                        first[order] = (vote, now)
            if len(first) == len(orders):
                break
        if changed or vote % 20 == 0:  # the first rule reads the decisions; the ranking's the means too
            weights = weigh(calls, means)
    return first, sum(said == "below" for _, said in first.values())


Result = tuple[dict[Pair, tuple[int, str]], int]


def uniform_runs(pools: dict[Pair, np.ndarray], seeds: int, cap: int, raters: int) -> list[Result]:
    orders = adjacent_orders(pools)
    return [replay(pools, orders, uniform, seed, cap, raters) for seed in range(seeds)]


def compare(
    pools: dict[Pair, np.ndarray], weigh: Weigh, baseline: list[Result], cap: int, raters: int
) -> tuple[list[float], list[int], list[int], list[int], int]:
    """Per seed (the same seed as the uniform run of ``baseline``): the ratio uniform votes / rule votes to the orders
    both settled alike, each choice's votes, how many orders were the target; and the orders settled against the
    half's ranking, over all seeds and both choices."""
    orders = adjacent_orders(pools)
    ratios, rule_votes, uniform_votes, targets, wrong = [], [], [], [], 0
    for seed, (by_uniform, wrong_uniform) in enumerate(baseline):
        by_rule, wrong_rule = replay(pools, orders, weigh, seed, cap, raters)
        wrong += wrong_rule + wrong_uniform
        target = {o for o in set(by_rule) & set(by_uniform) if by_rule[o][1] == by_uniform[o][1]}
        if not target:
            continue
        r = max(by_rule[o][0] for o in target)
        u = max(by_uniform[o][0] for o in target)
        ratios.append(u / r)
        rule_votes.append(r)
        uniform_votes.append(u)
        targets.append(len(target))
    return ratios, rule_votes, uniform_votes, targets, wrong


def row(name: str, result: tuple[list[float], list[int], list[int], list[int], int], seeds: int) -> str:
    ratios, rule_votes, uniform_votes, targets, wrong = result
    if not ratios:
        return f"| {name} | no seed reached an order under both choices |"
    q1, median, q3 = np.percentile(ratios, [25, 50, 75])
    return (
        f"| {name} | {len(ratios)} of {seeds} | {statistics.mean(targets):.1f} "
        f"| {statistics.median(uniform_votes):,.0f} "
        f"| {statistics.median(rule_votes):,.0f} | **{median:.2f}** ({q1:.2f}-{q3:.2f}) "
        f"| {sum(uniform_votes) / sum(rule_votes):.2f} | {sum(r > 1 for r in ratios)} | {wrong} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="replays per rule (each against uniform, same seed)")
    parser.add_argument("--cap", type=int, default=20_000, help="battles a replay runs to at most")
    parser.add_argument("--raters", type=int, default=100, help="raters the battles' raters are drawn from")
    parser.add_argument("--tune", action="store_true", help="the dev half under several weights and the variant")
    parser.add_argument("--half", default="holdout", choices=("dev", "holdout", "all"), help="the votes reported")
    parser.add_argument("--first-rule", action="store_true", help="also the first rule (every open pair weighs 4)")
    args = parser.parse_args()
    header = (
        "| rule | seeds with a common target | adjacent orders settled alike by both (mean) | uniform: votes (median) "
        "| rule: votes (median) | ratio uniform / rule: median (quartiles) | ratio of the sums | seeds the rule "
        "needed fewer | orders settled against the ranking |\n|---|---|---|---|---|---|---|---|---|"
    )
    half = "dev" if args.tune else args.half
    pools = load(half)
    print(
        f"{half}: {sum(len(v) for v in pools.values()):,} votes, {len(pools)} pairs; "
        f"adjacent orders {adjacent_orders(pools)}; {args.seeds} seeds, {args.cap:,} battles, {args.raters} raters"
    )
    baseline = uniform_runs(pools, args.seeds, args.cap, args.raters)
    print(header)
    rules: list[tuple[str, Weigh]] = (
        [(f"every open pair, weight {w:g}", every_open(w)) for w in (2.0, 4.0, 8.0, 16.0)]
        + [(f"pairs the ranking needs, weight {w:g}", ranking_rule(w)) for w in (4.0, 16.0)]
        if args.tune
        else [(f"live: pairs the ranking needs, weight {arena.OPEN_WEIGHT:g}", ranking_rule(arena.OPEN_WEIGHT))]
        + ([("every open pair, weight 4 (the first rule)", every_open(4.0))] if args.first_rule else [])
    )
    for name, weigh in rules:
        print(row(name, compare(pools, weigh, baseline, args.cap, args.raters), args.seeds), flush=True)


if __name__ == "__main__":
    main()
