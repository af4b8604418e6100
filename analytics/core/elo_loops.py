"""The sequential ELO loops, compiled with numba (kept apart so that importing analytics.core.ratings does
not load numba: the Bradley-Terry path of ``manage.py leaderboard`` never needs it).

Why numba: ELO is sequential within a pass. Advancing all bootstrap rounds together with one numpy step
per battle position (FastChat's ``fit_vectorized_elo``, and ours before) pays ~10 numpy calls per battle:
17.8 s for 10^6 battles x 100 rounds on this machine, against under 2 s compiled (bench/README.md).
Compiled functions are cached in __pycache__, so only the first run on a machine compiles them.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

_LOW_30 = (1 << 30) - 1


@numba.njit(cache=True, nogil=True)
def in_order(
    ratings: npt.NDArray[np.float64],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    score: npt.NDArray[np.float64],
    k: npt.NDArray[np.float64],
    alpha: float,
) -> None:
    """One online pass in the given order, in place: E_A = 1 / (1 + exp(alpha (R_B - R_A))) with
    alpha = ln(10) / 400, R_A += K (S_A - E_A), R_B -= the same. ``k`` (1,) or one per battle."""
    per_battle = k.shape[0] > 1
    for t in range(score.shape[0]):
        i, j = a[t], b[t]
        expected = 1.0 / (1.0 + math.exp(alpha * (ratings[j] - ratings[i])))
        update = (k[t] if per_battle else k[0]) * (score[t] - expected)
        ratings[i] += update
        ratings[j] -= update


@numba.njit(cache=True, nogil=True, parallel=True)
def resampled_rounds(
    ratings: npt.NDArray[np.float64],
    battles: npt.NDArray[np.uint64],
    k: float,
    index: npt.NDArray[np.integer],  # int32 or int64
    alpha: float,
) -> None:
    """Advance every round (row of ``ratings``, (rounds, n_systems)) by its row of ``index`` (rounds, m): the
    battles it plays next, in order. ``battles`` (n, 1) holds each battle's ``ratings.battle_codes`` value, or
    (n, 2) that and its own K as float64 bits (sep-ELO; ``k`` is then unused): one cache line per battle drawn.
    Rounds run in parallel."""
    per_battle = battles.shape[1] > 1
    own_k = battles.view(np.float64)
    for r in numba.prange(ratings.shape[0]):
        row = ratings[r]
        for t in range(index.shape[1]):
            battle = index[r, t]
            code = battles[battle, 0]
            i = code & _LOW_30
            j = (code >> 30) & _LOW_30
            score = (code >> 60) * 0.5
            expected = 1.0 / (1.0 + math.exp(alpha * (row[j] - row[i])))
            update = (own_k[battle, 1] if per_battle else k) * (score - expected)
            row[i] += update
            row[j] -= update
