"""Raters whose votes are unlikely under the current ratings: a sequential likelihood-ratio test per rater, read
after every vote, with a false-flag rate that holds however often it is read (docs/arena.md#abuse).

FastChat's ``outlier_detect`` idea, made anytime-valid. Under the null hypothesis a rater votes as the
Bradley-Terry ratings say people do: A beats B with p = 1 / (1 + 10^((r_B - r_A) / 400)). The alternative
reverses a share ``flip`` (c) of their votes: A wins with (1 - c) p + c (1 - p). Each decisive vote multiplies the
rater's evidence by its likelihood ratio

    L = (1 - c) + c (1 - p) / p    when A won,        L = (1 - c) + c p / (1 - p)    when B won,

and a tie leaves it as it is (the ratings give no chance of a tie). Under the null each factor's expectation is
p L(A) + (1 - p) L(B) = 1, so the running product M_n is a test martingale, and Ville's inequality bounds the chance
that an honest rater's M_n *ever* reaches 1 / alpha by alpha: the rater is flagged at the first vote where it does,
whenever the test is read (after every vote, or once a day). p is clipped to [CLIP, 1 - CLIP], so no single vote
against a lopsided estimate can carry more than (1 - c) + c (1 - CLIP) / CLIP.

Pure numpy (tests/test_purity.py).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import numpy.typing as npt

ALPHA = 0.001  # the chance that an honest rater is ever flagged (1,000 honest raters: about one)
FLIP = 0.5  # c: the share of votes the alternative reverses (FastChat's c_param)
CLIP = 0.05  # p is read within [CLIP, 1 - CLIP]
SCALE, BASE = 400.0, 10.0  # the Arena scale of analytics.core.ratings


def win_probability(rating_a: npt.ArrayLike, rating_b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """P(A beats B) from Arena-scale ratings (Bradley-Terry's, analytics.core.ratings.bradley_terry)."""
    diff = np.asarray(rating_b, dtype=np.float64) - np.asarray(rating_a, dtype=np.float64)
    return 1.0 / (1.0 + BASE ** (diff / SCALE))


def vote_ratios(
    p: npt.ArrayLike, score: npt.ArrayLike, flip: float = FLIP, clip: float = CLIP
) -> npt.NDArray[np.float64]:
    """Each vote's likelihood ratio L (alternative over null): ``score`` 1 A won, 0 B won, 1/2 a tie (L = 1)."""
    if not 0 < flip <= 1:
        raise ValueError("flip must be in (0, 1]")
    q = np.clip(np.asarray(p, dtype=np.float64), clip, 1 - clip)
    s = np.asarray(score, dtype=np.float64)
    won = (1 - flip) + flip * (1 - q) / q
    lost = (1 - flip) + flip * q / (1 - q)
    return np.where(s == 1.0, won, np.where(s == 0.0, lost, 1.0))


@dataclasses.dataclass(frozen=True)
class RaterTest:
    """One rater's test: ``votes`` read (ties included), ``evidence`` the final log M_n, ``peak`` the largest log M
    reached, ``flagged_at`` the index (in the rater's order) of the vote at which M first reached 1 / alpha, or
    None."""

    votes: int
    evidence: float
    peak: float
    flagged_at: int | None

    @property
    def flagged(self) -> bool:
        return self.flagged_at is not None


def sequential_test(
    p: npt.ArrayLike, score: npt.ArrayLike, alpha: float = ALPHA, flip: float = FLIP, clip: float = CLIP
) -> RaterTest:
    """The test of one rater's votes in the order they were cast (``p``: each vote's P(A beats B) under the
    ratings, ``score`` its outcome for A)."""
    logs = np.cumsum(np.log(vote_ratios(p, score, flip, clip)))
    bound = math.log(1 / alpha)
    crossed = np.flatnonzero(logs >= bound - 1e-12)
    return RaterTest(
        votes=len(logs),
        evidence=float(logs[-1]) if len(logs) else 0.0,
        peak=float(max(0.0, logs.max())) if len(logs) else 0.0,
        flagged_at=int(crossed[0]) if len(crossed) else None,
    )


def rater_tests(
    rater: npt.ArrayLike,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    score: npt.ArrayLike,
    ratings: npt.ArrayLike,
    alpha: float = ALPHA,
    flip: float = FLIP,
    clip: float = CLIP,
) -> dict[int, RaterTest]:
    """Every rater's test at once: votes (``rater`` codes, systems ``a`` and ``b``, ``score``) in the order they were
    cast, ``ratings`` the systems' Arena-scale ratings. rater code -> its test."""
    codes = np.asarray(rater, dtype=np.int64)
    r = np.asarray(ratings, dtype=np.float64)
    p = win_probability(r[np.asarray(a, dtype=np.int64)], r[np.asarray(b, dtype=np.int64)])
    logs = np.log(vote_ratios(p, score, flip, clip))
    order = np.argsort(codes, kind="stable")  # each rater's votes together, in the order cast
    codes, logs = codes[order], logs[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.array([], dtype=np.int64)
    ends = np.r_[starts[1:], len(codes)]
    running = np.cumsum(logs)
    before = np.r_[0.0, running][starts]  # the sum before each rater's first vote
    bound = math.log(1 / alpha) - 1e-12
    out = {}
    for start, end, offset in zip(starts.tolist(), ends.tolist(), before.tolist(), strict=True):
        own = running[start:end] - offset
        crossed = np.flatnonzero(own >= bound)
        out[int(codes[start])] = RaterTest(
            votes=end - start,
            evidence=float(own[-1]),
            peak=float(max(0.0, own.max())),
            flagged_at=int(crossed[0]) if len(crossed) else None,
        )
    return out


def votes_to_flag(p: float, alpha: float = ALPHA, flip: float = FLIP, clip: float = CLIP) -> int:
    """How many votes, each against a favourite that wins with ``p`` (> 1/2), flag a rater: the least n with
    n log L >= log(1 / alpha), L = (1 - c) + c p / (1 - p)."""
    q = min(max(p, clip), 1 - clip)
    ratio = (1 - flip) + flip * q / (1 - q)
    if ratio <= 1:
        raise ValueError("votes against an even pair carry no evidence")
    return math.ceil(math.log(1 / alpha) / math.log(ratio) - 1e-12)
