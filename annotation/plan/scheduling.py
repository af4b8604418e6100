"""The assignment builder's pure part: which (item, system pair) units exist, which sampled output
pairs each shows, and in which display order each rater sees them (docs/separability.md#the-consistency-protocol and
docs/comparative-assessment.md#comparison-scheduling).

No ORM here: items, systems and samples are plain indices, randomness comes from a seeded
``random.Random`` so every plan is reproducible from the study's seed.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence

RANDOM = "random"
NO_REPEAT = "no_repeat"
SYMMETRIC = "symmetric"
SCHEDULINGS = (RANDOM, NO_REPEAT, SYMMETRIC)
ONE_TO_ONE = "one_to_one"
GRID = "grid"
PAIRINGS = (ONE_TO_ONE, GRID)


@dataclasses.dataclass(frozen=True)
class Unit:
    """One (item, system pair) unit of work, before selection."""

    item: int
    comparison: int


@dataclasses.dataclass(frozen=True)
class TaskPlan:
    item: int
    comparison: int
    pairs: tuple[tuple[int, int], ...]  # (sample index of system A, sample index of system B)
    a_first: tuple[bool, ...]  # base display order of each pair


def candidate_units(n_items: int, n_comparisons: int, scheduling: str, rng: random.Random) -> list[Unit]:
    """The units a study could collect, per the comparison schedule.

    ``random``: each item is compared on one system pair drawn uniformly at random;
    ``no_repeat`` and ``symmetric``: each item is compared on every system pair once.
    With a single system pair all three give the same units.
    """
    if scheduling not in SCHEDULINGS:
        raise ValueError(f"unknown scheduling {scheduling!r}; choose one of {SCHEDULINGS}")
    if n_comparisons < 1:
        return []
    if scheduling == RANDOM:
        return [Unit(i, rng.randrange(n_comparisons)) for i in range(n_items)]
    return [Unit(i, c) for i in range(n_items) for c in range(n_comparisons)]


def sample_pairs(
    k_a: int, k_b: int, n: int, rng: random.Random, pairing: str = ONE_TO_ONE
) -> tuple[tuple[int, int], ...]:
    """The (sample_a, sample_b) pairs of one rating set.

    ``one_to_one`` (the separability paper's protocol, §3.1: P_AB = {(y_A^j, y_B^j)}, j = 1..N): a random
    matching of N samples of A with N samples of B, so each sample is shown at most once; with K_A = K_B = N
    every sample is shown exactly once. Gives min(N, K_A, K_B) pairs.
    ``grid``: N distinct pairs drawn uniformly without replacement from the K_A x K_B grid (a sample may
    appear in several pairs; allows N > K); fewer when the grid is smaller than N. A pair is never shown
    twice in one assignment either way.
    """
    if k_a < 1 or k_b < 1 or n < 1:
        raise ValueError("k_a, k_b and n must be at least 1")
    if pairing == GRID:
        grid = [(j, m) for j in range(k_a) for m in range(k_b)]
        return tuple(rng.sample(grid, min(n, len(grid))))
    if pairing != ONE_TO_ONE:
        raise ValueError(f"unknown pairing {pairing!r}; choose one of {PAIRINGS}")
    size = min(n, k_a, k_b)
    return tuple(zip(rng.sample(range(k_a), size), rng.sample(range(k_b), size), strict=True))


def plan_task(unit: Unit, k_a: int, k_b: int, n: int, rng: random.Random, pairing: str = ONE_TO_ONE) -> TaskPlan:
    pairs = sample_pairs(k_a, k_b, n, rng, pairing)
    return TaskPlan(unit.item, unit.comparison, pairs, tuple(rng.random() < 0.5 for _ in pairs))


def interleave(per_comparison: Mapping[int, Sequence[Unit]]) -> list[Unit]:
    """Round-robin over system pairs so raters see a mix of comparisons from the start."""
    queues = [list(units) for _, units in sorted(per_comparison.items())]
    out: list[Unit] = []
    while any(queues):
        for queue in queues:
            if queue:
                out.append(queue.pop(0))
    return out


def display_orders(base: Sequence[bool], slot: int, scheduling: str, rng: random.Random) -> list[bool]:
    """Whether A is shown first, for each pair of the assignment holding rater place ``slot``.

    ``symmetric`` mirrors the task's base orders for odd slots, so each pair is shown in both
    orders equally often across raters; the others flip an independent fair coin per pair.
    """
    if scheduling == SYMMETRIC:
        return [a_first if slot % 2 == 0 else not a_first for a_first in base]
    return [rng.random() < 0.5 for _ in base]
