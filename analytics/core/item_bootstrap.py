"""Bootstrap rounds that resample whole items (docs/ratings.md#bootstrap-by-item): each round draws the study's G
items with replacement and keeps every battle of every drawn item, so an item's battles -- its raters saw the same
outputs and largely agree -- move together, as they do when a study draws its items again.

Pure: numpy in, numpy out.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from analytics.core import clusters


def drawn_item_battles(items: npt.ArrayLike, rounds: int, rng: np.random.Generator, pad: int) -> npt.NDArray[np.int64]:
    """(rounds, L): row r the indices of the battles of G items drawn with replacement from ``items`` (n,), each
    battle's item (G distinct items), every battle of a drawn item once per draw, in a random order; rows shorter
    than the longest (L) are filled with ``pad`` (a battle that changes nothing, e.g. one with K = 0)."""
    numbers, n_items = clusters.item_numbers(items)
    order = np.argsort(numbers, kind="stable")  # the battles grouped by item
    counts = np.bincount(numbers, minlength=n_items)
    starts = np.cumsum(counts) - counts
    rows = []
    for _ in range(rounds):
        drawn = rng.integers(0, n_items, n_items)
        lengths = counts[drawn]
        within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        rows.append(rng.permutation(order[np.repeat(starts[drawn], lengths) + within]))
    out = np.full((rounds, max((len(r) for r in rows), default=0)), pad, dtype=np.int64)
    for r, row in enumerate(rows):
        out[r, : len(row)] = row
    return out
