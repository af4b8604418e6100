"""The arena's pair-choice rule, pure (docs/arena.md#which-two-systems): a system pair the ranking still needs -- open,
next to each other in the current ranking, its order not implied by decided pairs (``decisions.ranking_needs``, the
ranking goal's own rule) -- weighs ``OPEN_WEIGHT`` times any other pair. ``selection/arena.py`` applies it to the
stored decisions live; the replay bench (``bench/replay_arena.py``) to recorded battles, where it reached the same
decided adjacent orders with fewer votes than weighing every open pair alike (bench/README.md)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from selection.core import decisions

OPEN_WEIGHT = 4.0  # a pair the ranking needs against any other pair's 1 (chosen on PRD's dev half: bench/README.md)


def weight(*, needed: bool) -> float:
    return OPEN_WEIGHT if needed else 1.0


def pair_weights(
    pairs: Mapping[tuple[decisions.System, decisions.System], decisions.PairState],
) -> dict[tuple[decisions.System, decisions.System], float]:
    """Each pair's chance weight from every pair's decision and estimated win rate for its first system: the pairs
    the ranking needs ``OPEN_WEIGHT``, the others (decided, implied, or not next to each other) 1 -- all of them 1
    once the ranking needs none."""
    needs = decisions.ranking_needs(pairs)
    return {pair: weight(needed=pair in needs) for pair in pairs}


def draw(weights: dict[int, float], rng: np.random.Generator, avoid: int | None = None) -> int | None:
    """One pair id drawn with chance proportional to its weight; ``avoid`` (the rater's previous pair) is drawn only
    when it is the only pair. None when there is no pair."""
    keys = [k for k in weights if k != avoid] or [k for k in weights if k == avoid]
    if not keys:
        return None
    w = np.array([weights[k] for k in keys], dtype=np.float64)
    return int(keys[int(rng.choice(len(keys), p=w / w.sum()))])
