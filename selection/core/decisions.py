"""Is this system pair decided: an anytime-valid confidence sequence for a pair's win rate over items, and the
decision read off it (docs/decisions.md).

An item's score is the mean of its raters' outcomes for the pair's first system (1 a win, 1/2 a tie, 0 a loss),
bounded in [0, 1]; the pair's win rate is the mean score of the items the study stands for. The confidence sequence
is the *hedged capital* betting construction of Waudby-Smith & Ramdas, "Estimating means of bounded random variables
by betting" (JRSS-B 2024; arXiv:2010.09686), Theorem 3 with the predictable plug-in bets of its Eq. (26): for each
candidate mean m, two gamblers bet for and against m with a bet sized by the running variance,

    K_t(m) = max( theta * prod_i (1 + l+_i(m) (x_i - m)),  (1 - theta) * prod_i (1 - l-_i(m) (x_i - m)) ),
    l_i = sqrt( 2 log(2 / alpha) / (s2_{i-1} * i * log(1 + i)) ),
    l+_i(m) = min(l_i, c / m),  l-_i(m) = min(l_i, c / (1 - m)),

and by Ville's inequality P(exists t: K_t(mu) >= 1 / alpha) <= alpha at the true mean mu, so
``{m : K_t(m) < 1 / alpha}`` covers mu at every t at once -- however often anyone looks, and whenever the study
stops. The running intersection over t keeps that guarantee and makes the intervals nested.

No maintained Python package fits (measured 2026-11): ``expectation`` is a yanked 6 kB placeholder on the package
index this project installs from, and ``confseq`` (last release 2021) ships only a C++ source distribution that
needs Boost to build; the construction is a few lines of numpy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from selection.core.stopping import StoppingStatus

GRID = 1000  # candidate means m on (0, 1): the interval's ends reach the nearest rejected candidate (outwards)


def betting_confidence_sequence(
    x: npt.ArrayLike, alpha: float = 0.05, theta: float = 0.5, c: float = 0.5, grid: int = GRID
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Lower and upper ends of the hedged-capital betting confidence sequence after each observation.

    Parameters
    ----------
    x : array of shape (t,)
        Observations in [0, 1], in the order they arrived (an item's mean score, ties as halves).
    alpha : float
        The sequence covers the mean at every t simultaneously with probability at least 1 - alpha.
    theta : float
        The hedge between betting for and against a candidate mean (1/2: symmetric).
    c : float
        The largest fraction of capital a bet may stake (Waudby-Smith & Ramdas use 1/2 or 3/4).
    grid : int
        Candidate means tested on the open interval (0, 1).

    Returns
    -------
    lower, upper : arrays of shape (t,)
        The running intersection of ``{m : K_s(m) < 1 / alpha}`` for s <= t; lower = 0 and upper = 1 while every
        candidate is still plausible. Should every candidate be rejected (an event of probability at most alpha),
        both ends are the running mean.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or np.any(~np.isfinite(x)) or np.any((x < 0) | (x > 1)):
        raise ValueError("observations must be a 1-d array of numbers in [0, 1]")
    if not 0 < alpha < 1 or not 0 <= theta <= 1 or not 0 < c < 1:
        raise ValueError("need 0 < alpha < 1, 0 <= theta <= 1 and 0 < c < 1")
    t = len(x)
    if t == 0:
        return np.zeros(0), np.zeros(0)
    i = np.arange(1, t + 1, dtype=np.float64)
    mean = (0.5 + np.cumsum(x)) / (i + 1)  # mu_hat_i, Eq. (26)'s regularised running mean
    var = (0.25 + np.cumsum((x - mean) ** 2)) / (i + 1)
    var_before = np.concatenate([[0.25], var[:-1]])  # predictable: s2_{i-1}
    bet = np.sqrt(2 * np.log(2 / alpha) / (var_before * i * np.log1p(i)))
    m = (np.arange(grid, dtype=np.float64) + 0.5) / grid  # candidate means, shape (grid,)
    up = np.minimum(bet[:, None], c / m[None, :])  # shape (t, grid)
    down = np.minimum(bet[:, None], c / (1 - m[None, :]))
    diff = x[:, None] - m[None, :]
    log_plus = np.cumsum(np.log1p(up * diff), axis=0)
    log_minus = np.cumsum(np.log1p(-down * diff), axis=0)
    with np.errstate(divide="ignore"):
        log_capital = np.maximum(
            np.log(theta) + log_plus if theta > 0 else -np.inf, np.log(1 - theta) + log_minus if theta < 1 else -np.inf
        )
    rejected = np.logical_or.accumulate(log_capital >= np.log(1 / alpha), axis=0)  # running intersection
    kept = ~rejected
    any_kept = kept.any(axis=1)
    first = np.argmax(kept, axis=1)
    last = grid - 1 - np.argmax(kept[:, ::-1], axis=1)
    # outwards: the interval reaches the nearest rejected candidate on each side (0 and 1 when there is none)
    lower = np.where(any_kept, np.where(first > 0, m[np.maximum(first - 1, 0)], 0.0), mean)
    upper = np.where(any_kept, np.where(last < grid - 1, m[np.minimum(last + 1, grid - 1)], 1.0), mean)
    return lower, upper


class BettingSequence:
    """The same confidence sequence kept up to date one observation at a time (O(grid) per observation), for a plan
    that checks a pair after every completed assignment. ``interval`` equals the last row of
    ``betting_confidence_sequence`` on the observations so far."""

    def __init__(self, alpha: float = 0.05, theta: float = 0.5, c: float = 0.5, grid: int = GRID) -> None:
        if not 0 < alpha < 1 or not 0 <= theta <= 1 or not 0 < c < 1:
            raise ValueError("need 0 < alpha < 1, 0 <= theta <= 1 and 0 < c < 1")
        self.alpha, self.theta, self.c, self.grid = alpha, theta, c, grid
        self.m: npt.NDArray[np.float64] = (np.arange(grid, dtype=np.float64) + 0.5) / grid
        self.n, self.total, self.squares, self.var = 0, 0.0, 0.0, 0.25
        self.log_plus: npt.NDArray[np.float64] = np.zeros(grid)
        self.log_minus: npt.NDArray[np.float64] = np.zeros(grid)
        self.rejected: npt.NDArray[np.bool_] = np.zeros(grid, dtype=bool)

    def update(self, x: float) -> None:
        if not 0 <= x <= 1:
            raise ValueError("observations must be in [0, 1]")
        self.n += 1
        i = self.n
        bet = np.sqrt(2 * np.log(2 / self.alpha) / (self.var * i * np.log1p(i)))
        diff = x - self.m
        self.log_plus += np.log1p(np.minimum(bet, self.c / self.m) * diff)
        self.log_minus += np.log1p(-np.minimum(bet, self.c / (1 - self.m)) * diff)
        with np.errstate(divide="ignore"):
            log_capital = np.maximum(
                np.log(self.theta) + self.log_plus if self.theta > 0 else -np.inf,
                np.log(1 - self.theta) + self.log_minus if self.theta < 1 else -np.inf,
            )
        self.rejected |= log_capital >= np.log(1 / self.alpha)
        self.total += x
        mean = (0.5 + self.total) / (i + 1)
        self.squares += (x - mean) ** 2
        self.var = (0.25 + self.squares) / (i + 1)

    def to_bytes(self) -> bytes:
        """The whole state, to store between observations (``from_bytes`` reads it back)."""
        head = np.array(
            [self.alpha, self.theta, self.c, self.grid, self.n, self.total, self.squares, self.var], dtype="<f8"
        )
        return (
            head.tobytes()
            + self.log_plus.astype("<f8").tobytes()
            + self.log_minus.astype("<f8").tobytes()
            + np.packbits(self.rejected).tobytes()
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> BettingSequence:
        head = np.frombuffer(data[:64], dtype="<f8")
        alpha, theta, c, grid = float(head[0]), float(head[1]), float(head[2]), int(head[3])
        sequence = cls(alpha, theta, c, grid)
        sequence.n, sequence.total, sequence.squares, sequence.var = int(head[4]), *map(float, head[5:8])
        at = 64 + 8 * grid
        sequence.log_plus = np.frombuffer(data[64:at], dtype="<f8").copy()
        sequence.log_minus = np.frombuffer(data[at : at + 8 * grid], dtype="<f8").copy()
        sequence.rejected = np.unpackbits(np.frombuffer(data[at + 8 * grid :], dtype=np.uint8))[:grid].astype(bool)
        return sequence

    @property
    def interval(self) -> tuple[float, float]:
        kept = np.flatnonzero(~self.rejected)
        if self.n == 0:
            return 0.0, 1.0
        if len(kept) == 0:
            mean = (0.5 + self.total) / (self.n + 1)
            return mean, mean
        low = float(self.m[kept[0] - 1]) if kept[0] > 0 else 0.0  # outwards, as in betting_confidence_sequence
        high = float(self.m[kept[-1] + 1]) if kept[-1] < self.grid - 1 else 1.0
        return low, high


A_BETTER, B_BETTER, EQUIVALENT, UNDECIDED = "a", "b", "equivalent", "undecided"


BETTING, HYPERGEOMETRIC = "betting", "hypergeometric"


@dataclasses.dataclass(frozen=True)
class Decision:
    """One system pair's decision after ``n`` items, and the rule it comes from: the betting confidence sequence
    (the interval for the first system's win rate, ``low`` to ``high``, and what it settles -- ``a`` / ``b``: that
    system wins more than half; ``equivalent``: within ``margin`` of a half) or DiffUse's hypergeometric rule (the
    pool's majority of item winners, with its ``risk``; no interval, never equivalent)."""

    decision: str
    low: float | None
    high: float | None
    n: int
    margin: float
    rule: str = BETTING
    risk: float | None = None

    @property
    def decided(self) -> bool:
        return self.decision != UNDECIDED


def from_hypergeometric(status: StoppingStatus) -> Decision:
    """DiffUse's hypergeometric stopping rule (``selection.core.stopping``) read as a decision: the leader of the
    pool's item winners once the risk of a lead that large between equal systems is at most the threshold."""
    call = status.leader if status.leader is not None and status.risk <= status.threshold else UNDECIDED
    return Decision(call, None, None, status.n, 0.0, HYPERGEOMETRIC, status.risk)


def decide(low: float, high: float, margin: float) -> str:
    """What an interval for the first system's win rate settles at a margin of equivalence (0: never
    equivalent)."""
    if low > 0.5:
        return A_BETTER
    if high < 0.5:
        return B_BETTER
    if margin > 0 and low > 0.5 - margin and high < 0.5 + margin:
        return EQUIVALENT
    return UNDECIDED


def pair_decision(scores: npt.ArrayLike, alpha: float = 0.05, margin: float = 0.05) -> Decision:
    """The decision after the item scores seen so far (in arrival order), and the interval it rests on."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(scores) == 0:
        return Decision(UNDECIDED, 0.0, 1.0, 0, margin)
    lower, upper = betting_confidence_sequence(scores, alpha)
    return Decision(
        decide(float(lower[-1]), float(upper[-1]), margin), float(lower[-1]), float(upper[-1]), len(scores), margin
    )


@dataclasses.dataclass(frozen=True)
class Replay:
    """One replay of a system pair's items: what was decided, after how many items and judgments, against the
    fixed design that buys every judgment of every item."""

    decision: str
    items_used: int
    judgments_used: int
    judgments_fixed: int


def replay(
    scores: npt.ArrayLike,
    votes: npt.ArrayLike,
    rng: np.random.Generator,
    alpha: float = 0.05,
    margin: float = 0.05,
    null: bool = False,
) -> Replay:
    """The pair's items in a random order, each with all its judgments at once, the decision checked after every
    item and the replay stopped at the first one (as a plan that stops buying a decided pair would).

    Parameters
    ----------
    scores : array of shape (n,)
        Each item's score for the pair's first system, in [0, 1].
    votes : array of shape (n,)
        Each item's number of judgments (what the item costs).
    null : bool
        A/A: each item's score is mirrored (1 - score) with probability 1/2, so neither system is better and any
        direction decided is a false one.
    """
    scores = np.asarray(scores, dtype=np.float64)
    votes = np.asarray(votes, dtype=np.int64)
    if scores.shape != votes.shape or scores.ndim != 1:
        raise ValueError("scores and votes must be 1-d arrays of the same length")
    order = rng.permutation(len(scores))
    drawn, cost = scores[order], votes[order]
    if null:
        drawn = np.where(rng.random(len(drawn)) < 0.5, drawn, 1 - drawn)
    fixed = int(votes.sum())
    call, at = first_decision(drawn, alpha, margin)
    if at is None:
        return Replay(UNDECIDED, len(drawn), fixed, fixed)
    return Replay(call, at + 1, int(cost[: at + 1].sum()), fixed)


def first_decision(x: Sequence[float] | npt.NDArray[np.float64], alpha: float, margin: float) -> tuple[str, int | None]:
    """The first decision of the confidence sequence over ``x`` and after how many observations (None: none)."""
    if len(x) == 0:
        return UNDECIDED, None
    lower, upper = betting_confidence_sequence(np.asarray(x, dtype=np.float64), alpha)
    for t, (lo, hi) in enumerate(zip(lower.tolist(), upper.tolist(), strict=True)):
        call = decide(lo, hi, margin)
        if call != UNDECIDED:
            return call, t
    return UNDECIDED, None


def replay_one_rater_first(
    raters: Iterable[npt.ArrayLike],
    rng: np.random.Generator,
    alpha: float = 0.05,
    margin: float = 0.05,
    null: bool = False,
    costs: Iterable[npt.ArrayLike] | None = None,
) -> Replay:
    """One rater per item while items remain, the other raters only where that leaves the pair undecided (the plan's
    "one rater per item first"), replayed. Phase 1 observes one randomly chosen rater's score of each item, items in
    a random order, with a sequence at alpha / 2; if the pool runs out undecided, phase 2 buys the other raters of
    items in a fresh random order and observes each item's mean over all its raters, with a sequence of its own at
    alpha / 2. Each sequence covers the pair's win rate (both observe items of the same mean), so the two together
    err with probability at most alpha (union bound), however the second depends on the first.

    ``raters``: per item, each rater's score for the pair's first system in [0, 1]; ``costs``: per item, each
    rater's judgments (default one each); ``null`` mirrors every score of an item together with probability 1/2
    (A/A)."""
    items = [np.asarray(r, dtype=np.float64) for r in raters]
    paid = (
        [np.ones(len(r), dtype=np.int64) for r in items]
        if costs is None
        else [np.asarray(c, dtype=np.int64) for c in costs]
    )
    if null:
        items = [1 - r if flip else r for r, flip in zip(items, rng.random(len(items)) < 0.5, strict=True)]
    fixed = int(sum(c.sum() for c in paid))
    order = rng.permutation(len(items))
    chosen = [int(rng.integers(len(items[i]))) for i in order]
    first_cost = np.array([paid[i][k] for i, k in zip(order, chosen, strict=True)], dtype=np.int64)
    call, at = first_decision([items[i][k] for i, k in zip(order, chosen, strict=True)], alpha / 2, margin)
    if at is not None:
        return Replay(call, at + 1, int(first_cost[: at + 1].sum()), fixed)
    second = rng.permutation(len(items))
    call, at = first_decision([items[i].mean() for i in second], alpha / 2, margin)
    if at is None:
        return Replay(UNDECIDED, len(items), fixed, fixed)
    picked = dict(zip(order.tolist(), chosen, strict=True))
    extra = sum(int(paid[i].sum() - paid[i][picked[i]]) for i in second[: at + 1])
    return Replay(call, len(items), int(first_cost.sum()) + extra, fixed)


# ------------------------------------------------------------------------------------------------------------
# Ranking mode: with three or more systems, buy only the pairs whose decision the ranking still needs


# a system as the ranking mode keys it: its name (replays) or its id (the live plan); only compared and sorted
System = TypeVar("System", str, int)


@dataclasses.dataclass(frozen=True)
class PairState:
    """What the ranking reads of one system pair: its decision and its first system's estimated win rate."""

    decision: str
    mean: float
    exhausted: bool = False  # no item of the pair is left to buy: undecided for good, as far as the pool goes


def implied(pairs: Mapping[tuple[System, System], PairState]) -> dict[tuple[System, System], str]:
    """Directions the decided pairs imply through other systems (A above B and B above C put A above C), for the
    undecided pairs: {pair: "a" | "b"}. Read as a ranking's consequence -- a pair so implied is not bought, and is
    not itself called decided."""
    above: dict[System, set[System]] = {}
    for (x, y), state in pairs.items():
        if state.decision == A_BETTER:
            above.setdefault(x, set()).add(y)
        elif state.decision == B_BETTER:
            above.setdefault(y, set()).add(x)
    reach: dict[System, set[System]] = {}
    for start in above:  # who each system is (transitively) decided above
        seen: set[System] = set()
        todo = list(above[start])
        while todo:
            nxt = todo.pop()
            if nxt not in seen:
                seen.add(nxt)
                todo.extend(above.get(nxt, ()))
        reach[start] = seen
    out: dict[tuple[System, System], str] = {}
    for (x, y), state in pairs.items():
        if state.decision == UNDECIDED:
            if y in reach.get(x, ()):
                out[(x, y)] = A_BETTER
            elif x in reach.get(y, ()):
                out[(x, y)] = B_BETTER
    return out


def ranking(pairs: Mapping[tuple[System, System], PairState]) -> list[System]:
    """The systems best first by their mean estimated win rate over the pairs they are in (Borda), ties by name."""
    share: dict[System, list[float]] = {}
    for (x, y), state in pairs.items():
        share.setdefault(x, []).append(state.mean)
        share.setdefault(y, []).append(1 - state.mean)
    return sorted(share, key=lambda s: (-float(np.mean(share[s])), s))


def ranking_needs(pairs: Mapping[tuple[System, System], PairState]) -> set[tuple[System, System]]:
    """The pairs the ranking still needs (racing, as LUCB-style algorithms do): the undecided pairs of systems
    adjacent in the current ranking whose order the decided pairs do not imply. Empty once every adjacent order is
    decided -- a winner, or equivalent within the margin (the researcher's resolution) -- or as decided as the pool
    allows (an exhausted pair is bought no more). Should a decided adjacent
    pair contradict the current ranking, every undecided pair not implied is needed until the ranking settles."""
    order = ranking(pairs)
    at = {s: i for i, s in enumerate(order)}
    known = implied(pairs)
    open_pairs = {
        p for p, state in pairs.items() if state.decision == UNDECIDED and not state.exhausted and p not in known
    }
    for (x, y), state in pairs.items():
        if abs(at[x] - at[y]) == 1 and state.decision in (A_BETTER, B_BETTER):
            if (state.decision == A_BETTER) != (at[x] < at[y]):  # decided against the current order
                return open_pairs
    return {(x, y) for (x, y) in open_pairs if abs(at[x] - at[y]) == 1}


def ranking_replay(
    pairs: Mapping[tuple[str, str], tuple[npt.ArrayLike, npt.ArrayLike]],
    rng: np.random.Generator,
    alpha: float = 0.05,
    margin: float = 0.05,
    null: bool = False,
) -> dict[tuple[str, str], tuple[Replay, str | None]]:
    """The ranking mode replayed: each pair's items in a random order (all their judgments at once), one item at a
    time to each pair the ranking still needs (``ranking_needs``), until it needs none. Per pair: its replay (its own
    decision, items and judgments bought) and the direction the decided pairs imply for it, if any.

    ``pairs``: (item scores for the first system, judgments per item) of each system pair; ``null`` mirrors each
    item at random (A/A), as ``replay`` does."""
    order = {}
    for pair, (scores, votes) in pairs.items():
        scores, votes = np.asarray(scores, dtype=np.float64), np.asarray(votes, dtype=np.int64)
        perm = rng.permutation(len(scores))
        drawn = scores[perm]
        if null:
            drawn = np.where(rng.random(len(drawn)) < 0.5, drawn, 1 - drawn)
        order[pair] = (drawn, votes[perm], int(votes.sum()))
    sequences = {pair: BettingSequence(alpha) for pair in pairs}
    taken = dict.fromkeys(pairs, 0)
    calls = dict.fromkeys(pairs, UNDECIDED)

    def states() -> dict[tuple[str, str], PairState]:
        return {
            p: PairState(
                calls[p], sequences[p].total / sequences[p].n if sequences[p].n else 0.5, taken[p] == len(order[p][0])
            )
            for p in pairs
        }

    while need := ranking_needs(states()):
        for pair in sorted(need):
            sequence = sequences[pair]
            sequence.update(float(order[pair][0][taken[pair]]))
            taken[pair] += 1
            calls[pair] = decide(*sequence.interval, margin)
    known = implied(states())
    return {
        p: (Replay(calls[p], taken[p], int(order[p][1][: taken[p]].sum()), order[p][2]), known.get(p)) for p in pairs
    }
