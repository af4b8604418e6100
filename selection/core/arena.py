"""The arena's pair-choice rule, pure: a system pair whose decision is still open weighs ``OPEN_WEIGHT`` times a
decided one (docs/arena.md#which-two-systems). ``selection/arena.py`` applies it to the stored decisions live; the
replay bench to recorded battles."""

from __future__ import annotations

import numpy as np

OPEN_WEIGHT = 4.0  # an open pair's weight against a decided pair's 1 (bench/replay_arena.py measures the choice)


def weight(*, decided: bool) -> float:
    return 1.0 if decided else OPEN_WEIGHT


def draw(weights: dict[int, float], rng: np.random.Generator, avoid: int | None = None) -> int | None:
    """One pair id drawn with chance proportional to its weight; ``avoid`` (the rater's previous pair) is drawn only
    when it is the only pair. None when there is no pair."""
    keys = [k for k in weights if k != avoid] or [k for k in weights if k == avoid]
    if not keys:
        return None
    w = np.array([weights[k] for k in keys], dtype=np.float64)
    return int(keys[int(rng.choice(len(keys), p=w / w.sum()))])
