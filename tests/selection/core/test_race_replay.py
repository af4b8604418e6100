"""Racing replayed: ``designs.PairStream`` (a pair's replay an item at a time) and ``racing.race_replay`` (every pair
under one budget of human judgments, to the pairs closest to a decision first)."""

from __future__ import annotations

import numpy as np
import pytest

from selection.core import designs, group_sequential, racing

ALPHA = 0.05
LOOKS = 5


def first_deciding_look(pool: int, looks: int, alpha: float) -> int:
    """Items at the first planned look that can settle anything for scores with no spread: a look's interval has
    finite width only once its items outnumber the square of its boundary (``group_sequential.score_width``)."""
    sizes = group_sequential.look_sizes(pool, looks)
    bounds = group_sequential.boundaries([n / pool for n in sizes], alpha)
    return next(n for n, c in zip(sizes, bounds.tolist(), strict=True) if n > c * c)


def constant_pairs(pool: int) -> dict[str, designs.PairStream]:
    """Two pairs of one rater per item: the first system wins every item of "clear"; every item of "stuck" is a tie,
    which with no margin can never be decided."""
    design = designs.Design(looks=LOOKS)
    return {
        "clear": designs.PairStream([[1.0]] * pool, np.random.default_rng(0), design, ALPHA, 0.0),
        "stuck": designs.PairStream([[0.5]] * pool, np.random.default_rng(1), design, ALPHA, 0.0),
    }


def test_race_gives_the_budget_to_the_pair_that_can_be_decided_and_even_splits_it():
    pool = 100
    decides_at = first_deciding_look(pool, LOOKS, ALPHA)
    assert racing.WARMUP < decides_at < pool
    # on its own, the clear pair decides at that look
    alone = designs.replay([[1.0]] * pool, np.random.default_rng(0), designs.Design(looks=LOOKS), ALPHA, 0.0)
    assert (alone.decision, alone.items_used) == ("a", decides_at)
    # race: both measured on WARMUP items, then "stuck" is behind (a tie needs infinitely many items) and "clear"
    # gets every item up to its deciding look
    budget = racing.WARMUP + decides_at
    raced = racing.race_replay(constant_pairs(pool), budget, ALPHA, 0.0, "race")
    assert (raced["clear"].decision, raced["clear"].judgments_used) == ("a", decides_at)
    assert (raced["stuck"].decision, raced["stuck"].judgments_used) == ("undecided", racing.WARMUP)
    # even: item by item in turn, so neither reaches the deciding look within the same budget
    even = racing.race_replay(constant_pairs(pool), budget, ALPHA, 0.0, "even")
    assert [r.judgments_used for r in even.values()] == [budget // 2, budget - budget // 2]
    assert all(r.decision == "undecided" for r in even.values())
    assert 2 * decides_at - 1 > budget  # what even would need: the clear pair's items and one fewer of the other's


def test_serial_buys_one_pair_at_a_time_in_its_order():
    pool = 100
    decides_at = first_deciding_look(pool, LOOKS, ALPHA)
    # in key order ("clear" before "stuck"): "clear" gets every item up to its deciding look, then "stuck" the rest
    budget = decides_at + 5
    found = racing.race_replay(constant_pairs(pool), budget, ALPHA, 0.0, "serial")
    assert (found["clear"].decision, found["clear"].judgments_used) == ("a", decides_at)
    assert (found["stuck"].decision, found["stuck"].judgments_used) == ("undecided", 5)
    # "stuck" first: it takes the whole budget (it can never be decided and has no futility stop), "clear" nothing;
    # race, which reads the pairs' progress, gives "clear" its look whatever the order
    order = ["stuck", "clear"]
    found = racing.race_replay(constant_pairs(pool), budget, ALPHA, 0.0, "serial", order)
    assert [found[k].judgments_used for k in order] == [budget, 0]
    assert all(r.decision == "undecided" for r in found.values())
    # with its whole pool plus the clear pair's look, "stuck" runs out of items and "clear" then decides
    found = racing.race_replay(constant_pairs(pool), pool + decides_at, ALPHA, 0.0, "serial", order)
    assert [(found[k].decision, found[k].judgments_used) for k in order] == [("undecided", pool), ("a", decides_at)]


def test_serial_moves_on_when_the_pair_being_bought_no_longer_fits():
    """A pair whose items cost 3 judgments each, bought first, for 5 items (fewer than WARMUP, so nothing is
    decided); the 2 judgments left cannot buy a sixth, so the next pair in the order gets 2 items of 1 judgment."""
    design = designs.Design(looks=LOOKS)
    pool, cost, bought, left = 40, 3, 5, 2
    assert bought < racing.WARMUP < first_deciding_look(pool, LOOKS, ALPHA)
    live = {
        "costly": designs.PairStream(
            [[1.0]] * pool, np.random.default_rng(0), design, ALPHA, 0.0, False, [[cost]] * pool
        ),
        "cheap": designs.PairStream([[1.0]] * pool, np.random.default_rng(1), design, ALPHA, 0.0),
    }
    found = racing.race_replay(live, cost * bought + left, ALPHA, 0.0, "serial", ["costly", "cheap"])
    assert (found["costly"].items_used, found["costly"].judgments_used) == (bought, cost * bought)
    assert (found["cheap"].items_used, found["cheap"].judgments_used) == (left, left)
    assert all(r.decision == "undecided" for r in found.values())


def random_pairs(seed: int, design: designs.Design, null: bool = False) -> dict[str, dict]:
    """Pairs of 30-60 items, 1-3 raters each with 1-2 judgments, scores drawn from the votes 0, 1/2, 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for k in range(4):
        n = int(rng.integers(30, 61))
        raters = [rng.choice([0.0, 0.5, 1.0], p=[0.3, 0.2, 0.5], size=int(rng.integers(1, 4))) for _ in range(n)]
        costs = [rng.integers(1, 3, size=len(r)) for r in raters]
        predictions = rng.random(n) if design.judges else None
        out[f"pair-{k}"] = {"raters": raters, "costs": costs, "predictions": predictions, "null": null}
    return out


def streams(pairs: dict[str, dict], design: designs.Design, seed: int) -> dict[str, designs.PairStream]:
    return {
        key: designs.PairStream(
            p["raters"], np.random.default_rng([seed, i]), design, ALPHA, 0.05, p["null"], p["costs"], p["predictions"]
        )
        for i, (key, p) in enumerate(pairs.items())
    }


DESIGNS = [
    designs.Design(looks=LOOKS, futility=0.1, first_share=0.3),
    designs.Design(looks=0),
    designs.Design(looks=LOOKS, one_first=False),
    designs.Design(looks=LOOKS, judges=True, first_share=0.3),
]


@pytest.mark.parametrize("design", DESIGNS, ids=lambda d: d.name)
@pytest.mark.parametrize("allocation", racing.ALLOCATIONS)
def test_the_budget_is_never_exceeded_and_stops_only_when_no_next_item_fits(design, allocation):
    pairs = random_pairs(3, design)
    fixed = sum(int(sum(map(sum, p["costs"]))) for p in pairs.values())
    for share in (0.05, 0.2, 0.5):
        budget = int(share * fixed)
        live = streams(pairs, design, 11)
        found = racing.race_replay(live, budget, ALPHA, 0.05, allocation)
        spent = sum(r.judgments_used for r in found.values())
        assert spent <= budget
        # stopped only because every pair still open costs more than what is left
        assert all(s.next_cost() > budget - spent for s in live.values() if s.open)
        # a pair the budget did not cut off replayed exactly as on its own (same draws, same decision)
        for i, (key, p) in enumerate(pairs.items()):
            if not live[key].open:
                alone = designs.replay(
                    p["raters"],
                    np.random.default_rng([11, i]),
                    design,
                    ALPHA,
                    0.05,
                    False,
                    p["costs"],
                    p["predictions"],
                )
                assert found[key] == alone


@pytest.mark.parametrize("design", DESIGNS, ids=lambda d: d.name)
def test_with_budget_for_everything_every_pair_replays_as_designs_replay(design):
    for null in (False, True):
        pairs = random_pairs(5, design, null)
        fixed = sum(int(sum(map(sum, p["costs"]))) for p in pairs.values())
        for allocation in racing.ALLOCATIONS:
            found = racing.race_replay(streams(pairs, design, 2), fixed, ALPHA, 0.05, allocation)
            for i, (key, p) in enumerate(pairs.items()):
                rng = np.random.default_rng([2, i])
                alone = designs.replay(p["raters"], rng, design, ALPHA, 0.05, null, p["costs"], p["predictions"])
                assert found[key] == alone


def test_a_stream_bought_item_by_item_reports_what_each_item_cost():
    design = DESIGNS[0]
    p = random_pairs(8, design)["pair-1"]
    stream = designs.PairStream(p["raters"], np.random.default_rng(4), design, ALPHA, 0.05, False, p["costs"])
    total, steps = 0, 0
    while stream.open:
        total += stream.next_cost()
        stream.buy()
        steps += 1
        assert stream.result().judgments_used == total
        assert stream.n == len(stream.scores) and 0 <= stream.mean <= 1
    assert stream.steps == steps and stream.result().judgments_used <= stream.fixed
    with pytest.raises(ValueError, match="over"):
        stream.buy()


def test_race_replay_checks_its_arguments():
    with pytest.raises(ValueError, match="allocation"):
        racing.race_replay(constant_pairs(20), 10, ALPHA, 0.0, "fastest")
    with pytest.raises(ValueError, match="budget"):
        racing.race_replay(constant_pairs(20), -1, ALPHA, 0.0)
    for order in (["clear"], ["clear", "clear"], ["clear", "stuck", "other"]):
        with pytest.raises(ValueError, match="order must name every pair once"):
            racing.race_replay(constant_pairs(20), 10, ALPHA, 0.0, "serial", order)
    nothing = racing.race_replay(constant_pairs(20), 0, ALPHA, 0.0)
    assert all(r.judgments_used == 0 and r.decision == "undecided" for r in nothing.values())
