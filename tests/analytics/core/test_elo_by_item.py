"""ELO's battle bootstrap (docs/ratings.md#bootstrap), what `manage.py leaderboard` gives a battles file without items,
when whole items are resampled: on PRD's real votes its intervals hold when a study's items (each with all its votes)
are drawn again -- the spread of ELO over orders (K = 4) is wider than the items' dependence adds there. The report's
boards resample whole items (tests/analytics/core/test_by_item_sep_elo.py: on the MTurk items this bootstrap falls
to 0.876)."""

from __future__ import annotations

import math

import numpy as np

from analytics.core import ratings
from tests.analytics.core.test_clustered_sandwich import prd_by_question


def test_the_elo_interval_covers_the_full_studys_rating_when_items_are_resampled_whole():
    """The target is the report's headline on all of PRD's 80 questions (the median of 1,000 bootstrap rounds); a
    study is 80 questions drawn with replacement, each with all its human votes, and its interval the report's (the
    2.5th to 97.5th percentile of 100 rounds, each its study's battles drawn with replacement in the order drawn).
    Every study's rounds run together through the bootstrap's compiled loop (``elo_loops.resampled_rounds``, which
    ``bootstrap_elo`` runs from COMPILED_FROM battles), shorter studies' rounds padded with a battle of K = 0, which
    changes nothing. Measured: 0.97 (0.95-0.99 per system): conservative."""
    from analytics.core import elo_loops

    a, b, score, _, _, n, members = prd_by_question()
    target = np.median(ratings.bootstrap_elo(a, b, score, n, rounds=1000, seed=1), axis=0)
    rng = np.random.default_rng(3)
    studies, rounds = 150, 100
    drawn = [np.concatenate([members[d] for d in rng.integers(0, len(members), len(members))]) for _ in range(studies)]
    length = max(map(len, drawn))
    index = np.full((studies, rounds, length), len(a), dtype=np.int32)  # the battle of K = 0 after the real ones
    for s, battles in enumerate(drawn):
        index[s, :, : len(battles)] = battles[rng.integers(0, len(battles), (rounds, len(battles)))]
    codes = ratings.battle_codes(np.r_[a, 0], np.r_[b, 1], np.r_[score, 0.5])
    k = np.r_[np.full(len(a), 4.0), 0.0]
    samples = np.full((studies * rounds, n), ratings.INITIAL)
    elo_loops.resampled_rounds(
        samples, np.column_stack([codes, k.view(np.uint64)]), 0.0, index.reshape(-1, length), math.log(10) / 400
    )
    low, high = np.percentile(samples.reshape(studies, rounds, n), [2.5, 97.5], axis=1)
    rate = ((low <= target) & (target <= high)).mean(axis=0)
    se = math.sqrt(0.95 * 0.05 / studies)  # one system's binomial standard error
    assert rate.mean() >= 0.95 - se and rate.min() >= 0.95 - 3 * se, rate
