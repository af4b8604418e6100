"""Score contributions summed within each item, for sandwich intervals that resample items, not votes
(docs/ratings.md#clustered-by-item).

An item's raters saw the same pair and largely agree, so its votes are not independent: a sandwich whose meat sums
the outer products of each vote's score treats three votes of one item as three items and is too narrow. Clustered
by item, the meat is the sum over items of the outer product of the item's summed scores, times G / (G - 1) for
G items (the CR1 factor of Cameron & Miller 2015, §VI.B), which is what resampling whole items estimates.

Pure: numpy in, numpy out.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def item_numbers(items: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], int]:
    """Each vote's item as a number 0 .. G-1 (any hashable ids, numbered in sorted order) and G."""
    _, numbers = np.unique(np.asarray(items), return_inverse=True)
    numbers = numbers.astype(np.int64).reshape(-1)
    return numbers, int(numbers.max()) + 1 if len(numbers) else 0


def item_scores(
    items: npt.NDArray[np.integer],
    n_items: int,
    residual: npt.NDArray[np.float64],
    a: npt.NDArray[np.integer],
    b: npt.NDArray[np.integer],
    n_systems: int,
    features: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """Per item g, the sum of its votes' score contributions: U_g = sum_(i in g) residual_i (e_(a_i) - e_(b_i), x_i),
    an (n_items, n_systems + k) array (k = 0 without ``features`` (n, k)); ``items`` (n,) numbered 0 .. n_items - 1
    (``item_numbers``), ``residual`` (n,) each vote's derivative of its log-likelihood by its log-odds (w (S - p))."""
    k = 0 if features is None else features.shape[1]
    width = n_systems + k
    base = np.asarray(items, dtype=np.int64) * width
    size = n_items * width
    # numpy's stubs type bincount as intp whatever the weights; with float weights it returns float64
    flat: npt.NDArray[np.float64] = np.bincount(base + a, residual, size) - np.bincount(  # type: ignore[assignment]
        base + b, residual, size
    )
    for j in range(k):
        assert features is not None
        flat += np.bincount(base + n_systems + j, residual * features[:, j], size)
    return flat.reshape(n_items, width)


def clustered_meat(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """sum_g U_g U_g^T * G / (G - 1) from the items' summed scores U (G, m): the meat of the sandwich clustered by
    item. With one vote per item it is the unclustered meat sum_i u_i u_i^T times G / (G - 1). With fewer than two
    items there is no spread between items to estimate (one item's summed scores are zero at the fit): NaN, so the
    interval is absent rather than of zero width."""
    n_items = len(scores)
    if n_items < 2:
        return np.full((scores.shape[1], scores.shape[1]), np.nan)
    meat: npt.NDArray[np.float64] = scores.T @ scores * (n_items / (n_items - 1))
    return meat


def critical_value(level: float, n_items: int | None = None) -> float:
    """The two-sided ``level`` quantile of the interval: the normal's for votes taken as independent, Student's t on
    G - 1 degrees of freedom for a sandwich clustered by G items (as Stata's and Cameron & Miller's, §VI.C)."""
    from scipy.special import ndtri, stdtrit  # the quantiles without importing scipy.stats (0.6 s)

    upper = 1 - (1 - level) / 2
    return float(ndtri(upper) if n_items is None else stdtrit(max(n_items - 1, 1), upper))
