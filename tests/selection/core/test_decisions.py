"""Is this pair decided (selection/core/decisions.py): the betting confidence sequence against its own formula, its
guarantees (nested, bounded, the incremental form equal to the batch one), and coverage however often one looks, on
the real PRD votes: every item score sequence drawn from a pair's own items, the interval checked after every item."""

from __future__ import annotations

import csv
import functools
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from selection.core import decisions

PRD = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "prd_vicuna80_human"


def reference_capital(x: list[float], m: float, alpha: float = 0.05, theta: float = 0.5, c: float = 0.5) -> float:
    """K_t(m) of Theorem 3 with Eq. (26)'s bets, written out in plain Python from the paper, one step at a time."""
    plus = minus = 1.0
    total, squares, var = 0.0, 0.0, 0.25
    for i, xi in enumerate(x, start=1):
        bet = math.sqrt(2 * math.log(2 / alpha) / (var * i * math.log(1 + i)))
        plus *= 1 + min(bet, c / m) * (xi - m)
        minus *= 1 - min(bet, c / (1 - m)) * (xi - m)
        total += xi
        mean = (0.5 + total) / (i + 1)
        squares += (xi - mean) ** 2
        var = (0.25 + squares) / (i + 1)
    return max(theta * plus, (1 - theta) * minus)


def test_the_interval_is_the_set_of_means_the_paper_s_capital_has_not_rejected():
    x = [1.0, 1.0, 0.5, 1.0, 0.0, 1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0]
    grid = 400
    lower, upper = decisions.betting_confidence_sequence(x, grid=grid)
    m = (np.arange(grid) + 0.5) / grid
    for t in range(1, len(x) + 1):
        kept = [i for i, mi in enumerate(m) if all(reference_capital(x[:s], mi) < 20 for s in range(1, t + 1))]
        # outwards: from the nearest rejected candidate below to the nearest above (0 and 1 when none is)
        assert lower[t - 1] == pytest.approx(m[kept[0] - 1] if kept[0] > 0 else 0.0)
        assert upper[t - 1] == pytest.approx(m[kept[-1] + 1] if kept[-1] < grid - 1 else 1.0)


def test_the_intervals_are_nested_bounded_and_the_incremental_form_agrees():
    rng = np.random.default_rng(7)
    x = rng.choice([0.0, 0.5, 1.0, 1 / 3, 2 / 3], size=300, p=[0.2, 0.1, 0.4, 0.1, 0.2])
    lower, upper = decisions.betting_confidence_sequence(x)
    assert np.all(np.diff(lower) >= 0) and np.all(np.diff(upper) <= 0)
    assert np.all((0 <= lower) & (lower <= upper) & (upper <= 1))
    sequence = decisions.BettingSequence()
    for value in x:
        sequence.update(float(value))
    assert sequence.interval == pytest.approx((lower[-1], upper[-1]))
    assert lower[-1] < x.mean() < upper[-1]
    stored = decisions.BettingSequence.from_bytes(sequence.to_bytes())  # kept between completed assignments
    stored.update(1.0)
    sequence.update(1.0)
    assert stored.interval == sequence.interval and stored.n == sequence.n == 301


def test_what_an_interval_decides():
    assert decisions.decide(0.52, 0.70, 0.05) == decisions.A_BETTER
    assert decisions.decide(0.30, 0.49, 0.05) == decisions.B_BETTER
    assert decisions.decide(0.46, 0.54, 0.05) == decisions.EQUIVALENT
    assert decisions.decide(0.44, 0.54, 0.05) == decisions.UNDECIDED
    assert decisions.decide(0.46, 0.54, 0.0) == decisions.UNDECIDED  # no margin: never equivalent
    assert decisions.pair_decision([]).decision == decisions.UNDECIDED
    assert decisions.pair_decision([1.0] * 40).decision == decisions.A_BETTER  # every item won by the first system


def test_bad_input_is_refused():
    for bad in ([1.2], [-0.1], [float("nan")], [[0.5]]):
        with pytest.raises(ValueError):
            decisions.betting_confidence_sequence(bad)
    with pytest.raises(ValueError):
        decisions.BettingSequence().update(2.0)


def prd_votes() -> dict[tuple[str, str], list[list[float]]]:
    """Each PRD system pair's human votes per question, as outcomes for the pair's first system (alphabetical):
    1 a win, 1/2 a tie, 0 a loss."""
    if not PRD.exists():
        pytest.skip("the PRD human votes (../shared/data/prd_vicuna80_human) are not on this machine")
    votes: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with open(PRD / "battles_prd_human_individual_votes.csv", newline="") as f:
        for row in csv.DictReader(f):
            first, second = sorted((row["model_a"], row["model_b"]))
            won = {"tie": 0.5, "model_a": float(row["model_a"] == first), "model_b": float(row["model_b"] == first)}
            votes[(first, second)][row["question_id"]].append(won[row["winner"]])
    return {pair: list(items.values()) for pair, items in votes.items()}


def prd_item_scores() -> dict[tuple[str, str], np.ndarray]:
    """Each PRD system pair's item scores: the mean of each question's votes."""
    return {pair: np.array([np.mean(v) for v in items]) for pair, items in prd_votes().items()}


def test_it_covers_however_often_one_looks_on_prd_pairs():
    """Each of the 32 system pairs the PRD human files hold, 40 sequences of 150 items drawn from its own item scores
    (so the true win rate is their mean), the interval read after every item: the share of sequences it ever misses
    is at most alpha."""
    scores = prd_item_scores()
    assert len(scores) == 32
    rng = np.random.default_rng(2028)
    missed = runs = 0
    for pair_scores in scores.values():
        truth = pair_scores.mean()
        for _ in range(40):
            lower, upper = decisions.betting_confidence_sequence(rng.choice(pair_scores, 150), grid=500)
            missed += bool(np.any((lower > truth) | (upper < truth)))
            runs += 1
    assert missed / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)  # 1,280 sequences: alpha and two SEs


def test_no_system_is_called_better_when_none_is_on_prd_items():
    """A/A: each item's score flipped at random (the first system wins as often as it loses), checked after every
    item: a direction is ever decided in at most alpha of the sequences."""
    scores = prd_item_scores()
    rng = np.random.default_rng(28)
    decided = runs = 0
    for pair_scores in scores.values():
        for _ in range(40):
            drawn = rng.choice(pair_scores, 150)
            flipped = np.where(rng.random(150) < 0.5, drawn, 1 - drawn)
            lower, upper = decisions.betting_confidence_sequence(flipped, grid=500)
            decided += bool(np.any((lower > 0.5) | (upper < 0.5)))
            runs += 1
    assert decided / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)


def test_a_replay_stops_at_the_first_decision_and_counts_what_it_bought():
    scores, votes = np.ones(200), np.full(200, 3)
    result = decisions.replay(scores, votes, np.random.default_rng(1))
    lower, _ = decisions.betting_confidence_sequence(np.ones(200))
    first = int(np.argmax(lower > 0.5)) + 1  # every item won by the first system: the first n whose interval clears
    assert result == decisions.Replay("a", first, 3 * first, 600)
    level = decisions.replay(np.full(30, 0.5), np.ones(30), np.random.default_rng(1), margin=0.0)
    assert level == decisions.Replay("undecided", 30, 30, 30)  # no margin, no winner: every judgment bought


def test_prd_replays_save_judgments_without_false_decisions():
    """The calibration on the 32 PRD pairs: items in random orders, stopped at the first decision; the
    A/A replays decide a direction in at most alpha of the runs."""
    scores = prd_item_scores()
    rng = np.random.default_rng(5)
    used = fixed = false = runs = 0
    for pair_scores in scores.values():
        for _ in range(5):
            votes = np.ones(len(pair_scores), dtype=np.int64)
            real = decisions.replay(pair_scores, votes, rng)
            used, fixed = used + real.judgments_used, fixed + real.judgments_fixed
            null = decisions.replay(pair_scores, votes, rng, null=True)
            false += null.decision in ("a", "b")
            runs += 1
    assert used < fixed and false / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)


def test_diffuse_s_hypergeometric_rule_is_read_through_the_same_home():
    """One home for "is this pair decided": DiffUse's rule (the pool's majority of item winners) reads as a Decision
    -- the leader once P(X >= k), X ~ Hypergeometric(N, N // 2, n), is at most the risk -- and never equivalent."""
    from scipy.stats import hypergeom

    from selection.core.stopping import stopping_status

    for wins_a, wins_b, ties, pool, risk in (
        (9, 1, 0, 20, 0.1),
        (6, 4, 0, 20, 0.1),
        (1, 8, 1, 40, 0.05),
        (5, 5, 2, 30, 0.5),
    ):
        decision = decisions.from_hypergeometric(stopping_status(wins_a, wins_b, ties, pool, risk))
        n, k = wins_a + wins_b + ties, max(wins_a, wins_b)
        tail = hypergeom.sf(k - 1, pool, pool // 2, n)
        leader = None if wins_a == wins_b else ("a" if wins_a > wins_b else "b")
        assert decision.rule == decisions.HYPERGEOMETRIC and decision.risk == pytest.approx(tail)
        assert decision.decision == (leader if leader and tail <= risk else decisions.UNDECIDED)
        assert decision.decided == (decision.decision != decisions.UNDECIDED) and decision.low is None


def state(decision: str, mean: float = 0.5, exhausted: bool = False) -> decisions.PairState:
    return decisions.PairState(decision, mean, exhausted)


def test_decided_orders_imply_others_through_a_third_system():
    pairs = {
        ("a", "b"): state("a"),
        ("c", "b"): state("b"),
        ("a", "c"): state("undecided"),
        ("d", "a"): state("undecided"),
        ("c", "d"): state("equivalent"),
    }
    # a above b, b above c: a above c; d is only equivalent to c, so nothing is implied for d and a
    assert decisions.implied(pairs) == {("a", "c"): "a"}
    assert decisions.implied({("x", "y"): state("b"), ("z", "y"): state("a"), ("x", "z"): state("undecided")}) == {
        ("x", "z"): "b"
    }  # y above x, z above y: z above x, the pair's second system


def test_the_ranking_needs_the_open_adjacent_orders_only():
    # current ranking by mean win rate (Borda): a, b, c, d
    means = {("a", "b"): 0.6, ("a", "c"): 0.7, ("a", "d"): 0.8, ("b", "c"): 0.6, ("b", "d"): 0.7, ("c", "d"): 0.6}
    undecided = {p: state("undecided", m) for p, m in means.items()}
    assert decisions.ranking(undecided) == ["a", "b", "c", "d"]
    assert decisions.ranking_needs(undecided) == {("a", "b"), ("b", "c"), ("c", "d")}
    some = {**undecided, ("a", "b"): state("a", 0.6), ("c", "d"): state("equivalent", 0.6)}
    assert decisions.ranking_needs(some) == {("b", "c")}
    assert decisions.ranking_needs({**some, ("b", "c"): state("undecided", 0.6, exhausted=True)}) == set()
    assert decisions.ranking_needs({**some, ("b", "c"): state("a", 0.6)}) == set()  # decided to the resolution
    # an adjacent pair decided against the current ranking: every open pair not implied is needed until it settles
    against = {**undecided, ("a", "b"): state("b", 0.6)}
    assert decisions.ranking_needs(against) == set(means) - {("a", "b")}


def test_the_ranking_mode_on_prd_decides_rightly_and_buys_less_than_half():
    """PRD's 32 human pairs among 9 systems, 20 random orders: every direction the ranking mode decides agrees with
    the full data's (errors at most alpha of the decisions), the A/A replays (every item mirrored at random) decide a
    direction in at most alpha of the pairs, and it buys fewer than half the fixed design's votes."""
    votes = prd_votes()
    pairs = {
        p: (np.array([np.mean(v) for v in items]), np.array([len(v) for v in items])) for p, items in votes.items()
    }
    truth = {p: s.mean() for p, (s, _) in pairs.items()}
    used = fixed = calls = wrong = false = 0
    for seed in range(20):
        for null, found in (
            (False, decisions.ranking_replay(pairs, np.random.default_rng(seed))),
            (True, decisions.ranking_replay(pairs, np.random.default_rng(seed), null=True)),
        ):
            for p, (result, _) in found.items():
                directional = result.decision in (decisions.A_BETTER, decisions.B_BETTER)
                if null:
                    false += directional
                    continue
                used, fixed = used + result.judgments_used, fixed + result.judgments_fixed
                calls += directional
                wrong += directional and (result.decision == decisions.A_BETTER) != (truth[p] > 0.5)
    assert calls > 0 and wrong <= 0.05 * calls
    assert false <= 0.05 * 20 * len(pairs)
    assert fixed >= 2 * used


def test_one_rater_first_decides_on_single_votes_or_buys_the_rest_at_half_the_error_rate():
    rng = np.random.default_rng(5)
    # every rater picks the first system: phase 1 decides on single votes, one judgment per item
    won = decisions.replay_one_rater_first([[1.0, 1.0, 1.0]] * 100, rng)
    call, at = decisions.first_decision([1.0] * 100, 0.025, 0.05)
    assert (won.decision, won.items_used, won.judgments_used, won.judgments_fixed) == (call, at + 1, at + 1, 300)
    # raters split on every item: single votes (0 or 1) cannot show equivalence within 0.2 in 20 items, whole items
    # (0.5 each) can: phase 2 buys the second rater of the items it observes, in its own order
    split = decisions.replay_one_rater_first([[0.0, 1.0]] * 20, rng, margin=0.2, costs=[[1, 1]] * 20)
    call, at = decisions.first_decision([0.5] * 20, 0.025, 0.2)
    assert (split.decision, split.judgments_used) == (call, 20 + at + 1) == ("equivalent", 20 + at + 1)
    assert decisions.replay_one_rater_first([[0.0, 1.0]] * 20, rng, margin=0.0).judgments_used == 40  # never


def test_one_rater_first_calls_no_system_better_when_none_is_on_prd_items():
    """A/A on PRD's human pairs with two or more votes per item (each item's votes mirrored together at random),
    looking after every observation in both phases: directions decided in at most alpha of the replays."""
    votes = {p: v for p, v in prd_votes().items() if min(len(x) for x in v) >= 2}
    rng = np.random.default_rng(41)
    runs = [decisions.replay_one_rater_first(items, rng, null=True) for items in votes.values() for _ in range(25)]
    false = sum(r.decision in (decisions.A_BETTER, decisions.B_BETTER) for r in runs)
    assert len(runs) >= 400 and false <= 0.05 * len(runs)


# ------------------------------------------------------------------------------------------------------------
# Group-sequential looks (selection/core/group_sequential.py) and the replay designs (selection/core/designs.py)


def test_obrien_fleming_spending_boundaries_are_the_published_ones_and_spend_alpha():
    """Lan-DeMets O'Brien-Fleming-type spending, K = 5 equal looks, alpha = 0.05 two-sided (alpha / 2 a side): the
    tabulated 4.877, 3.357, 2.680, 2.290, 2.031; and, independently of the recursive integration, the chance under
    the null that |Z_k| crosses some c_k -- Z_k the standardised means of Brownian motion at t_k, corr sqrt(t_j/t_k)
    -- is alpha by scipy's multivariate normal probability."""
    from scipy import stats

    from selection.core import group_sequential

    t = np.array([0.2, 0.4, 0.6, 0.8, 1.0])
    c = group_sequential.boundaries(t, 0.05)
    assert c == pytest.approx([4.877, 3.357, 2.680, 2.290, 2.031], abs=6e-4)
    for fractions, alpha in ((t, 0.05), (np.array([0.25, 0.6, 1.0]), 0.01)):
        bounds = group_sequential.boundaries(fractions, alpha)
        corr = np.sqrt(np.minimum.outer(fractions, fractions) / np.maximum.outer(fractions, fractions))
        law = stats.multivariate_normal(np.zeros(len(fractions)), corr, seed=1)
        assert 1 - law.cdf(bounds, lower_limit=-bounds) == pytest.approx(alpha, abs=2e-4)
        # what each look may spend: the spending function's increments
        first = 2 * stats.norm.sf(bounds[0])
        assert first == pytest.approx(group_sequential.obf_spending(fractions[:1], alpha)[0], rel=1e-6)
    assert group_sequential.boundaries([1.0], 0.05) == pytest.approx([stats.norm.isf(0.025)])  # one look: the z-test
    assert group_sequential.look_sizes(80, 5) == [16, 32, 48, 64, 80]


def test_a_group_sequential_look_decides_by_its_repeated_confidence_interval():
    """At a look of n items the interval is the score form's, mean +- c s / sqrt(n - c^2) (s the root mean square
    about the mean, c the boundary), widened by half the scores' smallest step over n (here 1/2: the scores are 0,
    1/2 and 1); the replay stops at the first look that settles."""
    from selection.core import group_sequential

    x = np.array([1.0, 0.0, 1.0, 1.0, 0.5, 1.0, 1.0, 0.0, 1.0, 1.0] * 8)  # 80 items, mean 0.75
    seen = group_sequential.looks_at(x, 5, 0.05, 0.05)
    c = group_sequential.boundaries([0.2, 0.4, 0.6, 0.8, 1.0], 0.05)
    for look, bound in zip(seen, c, strict=False):
        part = x[: look.n]
        # no interval while n <= c^2 (the first look, 16 items against 4.877^2 = 23.8)
        room = look.n - bound**2
        width = bound * part.std() / np.sqrt(room) + 0.5 / (2 * look.n) if room > 0 else np.inf
        assert (look.low, look.high) == pytest.approx((max(0.0, part.mean() - width), min(1.0, part.mean() + width)))
    assert seen[-1].decision == "a" and all(s.decision == "undecided" for s in seen[:-1])
    assert group_sequential.first_decision(x, 5, 0.05, 0.05) == ("a", seen[-1].n)
    assert group_sequential.first_decision(np.tile([0.0, 1.0], 40), 5, 0.05, 0.0) == ("undecided", None)
    # prediction-powered observations: the labels carry the variance, n - c^2 read as n (1 - c^2 / labels): with 16
    # labels of 48 the third look (48 items, c = 2.680) is open, with 4 of 16 the first cannot be read at all
    labelled = np.arange(80) % 4 == 0
    first = group_sequential.looks_at(x, 5, 0.05, 0.05, labelled=labelled)[0]
    assert (first.n, first.low, first.high) == (16, 0.0, 1.0)  # 4 labels <= c_1^2 = 23.8
    third = group_sequential.looks_at(x, 5, 0.05, 0.05, labelled=np.arange(80) % 3 == 0)[2]
    width = c[2] * x[:48].std() / np.sqrt(48 * (1 - c[2] ** 2 / 16)) + 0.5 / (2 * 48)
    assert third.n == 48 and third.high == pytest.approx(min(1.0, x[:48].mean() + width))


def test_a_futility_stop_is_the_conditional_power_of_the_trend_below_the_threshold():
    """Conditional power (Lan & Wittes' B-value): with Z_t at information t and drift Z_t / sqrt(t), the chance that
    Z at t = 1 crosses the last boundary is Phi((Z_t sqrt(t) + Z_t (1 - t) / sqrt(t) - c_K) / sqrt(1 - t)); a look
    stops the pair undecided when it is below the threshold, and never at the last look."""
    from scipy import stats

    from selection.core import group_sequential

    z, t, last = 1.2, 0.4, 2.031
    expected = stats.norm.cdf((z * math.sqrt(t) + z * (1 - t) / math.sqrt(t) - last) / math.sqrt(1 - t))
    assert group_sequential.conditional_power(0.5 + 1.2 * 0.1, 0.1, t, last) == pytest.approx(expected)
    level = np.tile([0.0, 1.0, 0.5, 1.0, 0.0], 16)  # 80 items, mean exactly a half: no trend at all
    looks = group_sequential.looks_at(level, 5, 0.05, 0.0, futility=0.1)
    assert [(s.n, s.decision, s.futile) for s in looks] == [(16, "undecided", True)]
    assert group_sequential.first_decision(level, 5, 0.05, 0.0, futility=0.1) == ("undecided", 16)
    assert group_sequential.first_decision(level, 5, 0.05, 0.0) == ("undecided", None)  # no futility: to the end


def test_a_futility_stop_keeps_a_pair_heading_to_equivalent():
    """With a margin, a level pair heads to "equivalent": the chance of the last look's interval inside the margin,
    if the mean seen is the truth, is Phi((room - shift) / s) - Phi((-room - shift) / s), room = margin - c_K se
    sqrt(t), s = se sqrt(t (1 - t)); a look stops for futility only when that chance too is below the threshold. On
    level pairs of 1,500 items, five looks at 0.05 with margin 0.05, futility 0.1 keeps (nearly) every equivalence
    call the looks make without it (a stop that ignored equivalence once kept 65 of 200)."""
    from scipy import stats

    from selection.core import group_sequential

    mean, se, t, last, margin = 0.51, 0.02, 0.2, 2.031, 0.05
    room, s = margin - last * se * math.sqrt(t), se * math.sqrt(t * (1 - t))
    expected = stats.norm.cdf((room - 0.01) / s) - stats.norm.cdf((-room - 0.01) / s)
    assert group_sequential.equivalence_chance(mean, se, t, last, margin) == pytest.approx(expected)
    assert group_sequential.equivalence_chance(mean, se, t, last, 0.0) == 0.0  # no margin, no equivalence
    assert group_sequential.equivalence_chance(mean, se, 1.0, last, margin) == 0.0  # the last look is read
    rng = np.random.default_rng(11)
    runs = 100
    level = rng.choice([0.0, 0.5, 1.0], size=(runs, 1500), p=[0.4, 0.2, 0.4])  # true rate exactly a half
    with_stop = [group_sequential.first_decision(x, 5, 0.05, 0.05, futility=0.1)[0] for x in level]
    without = [group_sequential.first_decision(x, 5, 0.05, 0.05)[0] for x in level]
    assert without.count("equivalent") >= 0.9 * runs  # the pool is large enough to show equivalence
    assert with_stop.count("equivalent") >= without.count("equivalent") - 0.03 * runs
    assert with_stop.count("a") + with_stop.count("b") <= without.count("a") + without.count("b")


def test_prediction_powered_observations_are_unbiased_and_people_alone_at_rate_one():
    """Delta_i = f_i + (y_i - f_i) xi_i / pi has the people's mean whatever the judges say (xi independent of the
    item), and with pi = 1 it is the people's labels."""
    from selection.core import designs

    rng = np.random.default_rng(3)
    y = rng.choice([0.0, 0.5, 1.0], size=200_000, p=[0.3, 0.2, 0.5])
    judge = np.clip(y + rng.normal(0, 0.4, len(y)), 0, 1)
    labelled = rng.random(len(y)) < 0.4
    delta = designs.ppi_observations(y, judge, labelled, 0.4)
    se = delta.std() / np.sqrt(len(y))
    assert abs(delta.mean() - y.mean()) < 4 * se
    assert np.all((delta >= 1 - 1 / 0.4 - 1e-12) & (delta <= 1 / 0.4 + 1e-12))
    assert designs.ppi_observations(y[:50], judge[:50], np.ones(50, bool), 1.0) == pytest.approx(y[:50])


def test_design_replays_count_people_and_verdicts():
    """Every rater picks the first system on every item: whole items at alpha decide when the sequence over ones
    first clears a half; items first decide on single votes at alpha / 2, one judgment per item; the judges inside,
    at pi = 1, buy people on every item they observe and count every verdict seen."""
    from selection.core import designs

    raters, costs = [[1.0, 1.0, 1.0]] * 100, [[1, 1, 1]] * 100
    whole = designs.replay(raters, np.random.default_rng(1), designs.Design(one_first=False), costs=costs)
    _, at = decisions.first_decision([1.0] * 100, 0.05, 0.05)
    assert whole == designs.DesignReplay("a", at + 1, 3 * (at + 1), 300, 0)
    first = designs.replay(raters, np.random.default_rng(1), designs.Design(), costs=costs)
    _, at = decisions.first_decision([1.0] * 100, 0.025, 0.05)
    assert (first.decision, first.judgments_used) == ("a", at + 1)
    shared = designs.replay(raters, np.random.default_rng(1), designs.Design(first_share=0.3), costs=costs)
    _, at = decisions.first_decision([1.0] * 100, 0.05 * 0.3, 0.05)  # phase 1 at 0.3 alpha
    assert (shared.decision, shared.judgments_used) == ("a", at + 1)
    judged = designs.replay(
        raters,
        np.random.default_rng(1),
        designs.Design(one_first=False, judges=True, label_rate=1.0),
        costs=costs,
        predictions=np.ones(100),
        verdicts=np.full(100, 10),
    )
    _, at = decisions.first_decision([1.0] * 100, 0.05, 0.05)
    assert judged == designs.DesignReplay("a", at + 1, 3 * (at + 1), 300, 10 * (at + 1))
    looks = designs.replay(raters, np.random.default_rng(1), designs.Design(one_first=False, looks=5), costs=costs)
    # the first look (20 items) cannot be read: 20 <= c_1^2 = 4.877^2 (20 unanimous items under the null: 2^-19, more
    # than the 5e-7 it spends); the second (40) settles
    assert (looks.decision, looks.items_used) == ("a", 40)


@functools.cache
def prd_pairs_with_judges() -> dict[tuple[str, str], tuple[list[list[float]], list[float], list[int]]]:
    """PRD's 10 system pairs among the five systems the judges judged (as ``load_prd`` reads them, no database): per
    item, each human vote's outcome for the pair's first system, the judges' item score (mean over the five judges'
    verdicts in both orders) and the number of verdicts."""
    from analytics.management.commands.load_prd import JUDGES, Command

    if not (PRD / "ratings-gpt4").exists():
        pytest.skip("the PRD votes and judge verdicts (../shared/data/prd_vicuna80_human) are not on this machine")

    def outcome(line: dict) -> float:
        return 1.0 if line["choice"] == line["system_a"] else 0.5 if line["choice"] == "tie" else 0.0

    people: dict = defaultdict(lambda: defaultdict(list))
    judges: dict = defaultdict(lambda: defaultdict(list))
    for line in Command._verdicts(PRD, "human", "human"):
        people[(line["system_a"], line["system_b"])][line["item"]].append(outcome(line))
    for judge in JUDGES:
        for line in Command._verdicts(PRD / f"ratings-{judge}", judge, "judge"):
            judges[(line["system_a"], line["system_b"])][line["item"]].append(outcome(line))
    return {
        pair: (
            [items[k] for k in sorted(items)],
            [float(np.mean(judges[pair][k])) for k in sorted(items)],
            [len(judges[pair][k]) for k in sorted(items)],
        )
        for pair, items in people.items()
    }


# each design as ``simulate --replay`` names it; on these seeds every one reaches the t-test's decision in at least
# 90 % of the records at alpha = 0.05 per pair (measured 0.911-1.000; bench/README.md has the study-wide figures,
# where the target is not met)
PRD_DESIGNS = {
    "continuous, one rater first": {},
    "continuous, whole items": {"one_first": False},
    "group-sequential, one rater first": {"looks": 5, "first_share": 0.3},
    "group-sequential, whole items": {"looks": 5, "one_first": False},
    "judges, continuous, one rater first": {"judges": True},
    "judges, group-sequential, one rater first": {"judges": True, "looks": 5, "first_share": 0.3},
    "judges, group-sequential, whole items": {"judges": True, "looks": 5, "one_first": False},
    "group-sequential with futility stops, one rater first": {"looks": 5, "futility": 0.1, "first_share": 0.3},
}


@pytest.mark.parametrize("name", list(PRD_DESIGNS))
def test_each_replay_design_on_prd_holds_its_error_rates(name):
    """Each design on PRD's 10 pairs at alpha = 0.05 per pair (items whole: an item's votes and verdicts move
    together, mirrored together in the A/A): A/A directions decided in at most alpha + 2 SE of 200 replays; direction
    errors (against the sign of the pair's win rate on all its items) at most alpha of the directions decided; at
    least 90 % of the records of the pairs a t-test on all items decides at 0.05 reach its decision. The betting
    sequence on a grid of 200 (any grid keeps its guarantee; the product's is 1,000)."""
    from scipy import stats

    from selection.core import designs

    design = designs.Design(**PRD_DESIGNS[name])
    pairs = prd_pairs_with_judges()
    assert len(pairs) == 10
    rng = np.random.default_rng(42)
    false = runs = agree = tested = wrong = directional = 0
    for raters, judged, verdicts in pairs.values():
        scores = np.array([np.mean(v) for v in raters])
        truth = "a" if scores.mean() > 0.5 else "b"
        t_test = truth if stats.ttest_1samp(scores, 0.5).pvalue < 0.05 else "undecided"
        for _ in range(20):
            null = designs.replay(raters, rng, design, 0.05, 0.05, True, None, judged, verdicts, grid=200)
            false += null.decision in ("a", "b")
            runs += 1
        for _ in range(5):
            real = designs.replay(raters, rng, design, 0.05, 0.05, False, None, judged, verdicts, grid=200)
            if real.decision in ("a", "b"):
                directional += 1
                wrong += real.decision != truth
            if t_test != "undecided":
                tested += 1
                agree += real.decision == t_test
    assert runs == 200 and false / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)
    assert directional > 0 and wrong <= 0.05 * directional
    assert tested == 45  # the t-test decides 9 of the 10 pairs (not bard vs gpt35, win rate 0.477)
    assert agree / tested >= 0.9


@pytest.mark.slow(seconds=4)
def test_group_sequential_looks_with_futility_hold_the_study_wide_targets_on_prd():
    """The design that meets the issue's targets study-wide (bench/README.md): 5 looks, futility stops below 0.1
    conditional power, one rater first at 0.3 / 0.7 of alpha, each of PRD's 10 pairs at alpha / 10
    (``multiplicity.pair_alpha``). In 100 A/A studies (every pair's items mirrored at random) some pair decides a
    direction in at most alpha + 2 SE of them; over 10 real orders it reaches a t-test's decision on at least 90 %
    of the pairs that test decides, with no direction error, for fewer than half the fixed design's judgments."""
    from scipy import stats

    from selection.core import designs, multiplicity

    pairs = prd_pairs_with_judges()
    alpha = multiplicity.pair_alpha(0.05, multiplicity.pair_count(5), "auto")
    assert alpha == pytest.approx(0.005)
    design = designs.Design(looks=5, futility=0.1, first_share=0.3)
    rng = np.random.default_rng(2026)
    studies = 100
    false_studies = sum(
        any(designs.replay(r, rng, design, alpha, 0.05, True).decision in ("a", "b") for r, _, _ in pairs.values())
        for _ in range(studies)
    )
    assert false_studies / studies <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / studies)
    agree = tested = wrong = used = fixed = 0
    for raters, _, _ in pairs.values():
        scores = np.array([np.mean(v) for v in raters])
        truth = "a" if scores.mean() > 0.5 else "b"
        t_test = truth if stats.ttest_1samp(scores, 0.5).pvalue < 0.05 else "undecided"
        for _ in range(10):
            real = designs.replay(raters, rng, design, alpha, 0.05)
            used, fixed = used + real.judgments_used, fixed + real.judgments_fixed
            wrong += real.decision in ("a", "b") and real.decision != truth
            if t_test != "undecided":
                tested += 1
                agree += real.decision == t_test
    assert wrong == 0 and agree / tested >= 0.9 and fixed >= 2 * used
