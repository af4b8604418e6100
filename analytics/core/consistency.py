"""Rating consistency and preference strength (Eq. 4 and Eq. 7 of "Compare without Despair";
docs/separability.md#consistency).

Ratings are in model coordinates: -1 (A preferred), 0 (no preference), +1 (B preferred). A rating set
is one rater's ratings of the N sampled pairs of one item. How an answer becomes a rating and who won an
item (the rule the live loop shares) are in ``selection.core.winners``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from analytics.core import clusters

MIN_RATINGS = 2  # ratings of one item by one rater before Eq. 4 says anything
NOT_APPLICABLE = (
    "not applicable: every rating set has one judgment, and consistency (Eq. 4) compares a rater's "
    "ratings of the N sampled pairs of one item (N >= 2 pairs per assignment)"
)


def rating_set_consistency(ratings: npt.ArrayLike) -> float:
    """c(R) = 0 when R holds both -1 and +1, else mean(|r|) (Eq. 4). Undefined (NaN) for fewer than two
    ratings: one rating of an item cannot agree or disagree with anything (``MIN_RATINGS``)."""
    r = np.asarray(ratings, dtype=np.float64)
    if r.size < MIN_RATINGS:
        return float("nan")
    if np.any(r < 0) and np.any(r > 0):
        return 0.0
    return float(np.mean(np.abs(r)))


def preference_strength(ratings: npt.ArrayLike) -> float:
    """mean(r) (Eq. 7): negative leans to A, positive to B."""
    r = np.asarray(ratings, dtype=np.float64)
    return float(np.mean(r)) if r.size else float("nan")


def equal_width_bins(values: npt.ArrayLike, n_bins: int = 4) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Bin index (0..n_bins-1) of each value over the observed range, and the bin edges (Fig. 6).
    NaN values get -1."""
    values = np.asarray(values, dtype=np.float64)
    index = np.full(values.shape, -1, dtype=np.int64)
    finite = ~np.isnan(values)
    if not finite.any():
        return index, np.array([])
    low, high = values[finite].min(), values[finite].max()
    edges = np.linspace(low, high, n_bins + 1) if high > low else np.linspace(low - 0.5, high + 0.5, n_bins + 1)
    index[finite] = np.clip(np.searchsorted(edges, values[finite], side="right") - 1, 0, n_bins - 1)
    return index, edges


def equal_count_bins(values: npt.ArrayLike, n_bins: int = 5) -> npt.NDArray[np.int64]:
    """Bin index of each value so that bins hold (nearly) equal counts, in value order (Fig. 8).
    NaN values get -1."""
    values = np.asarray(values, dtype=np.float64)
    index = np.full(values.shape, -1, dtype=np.int64)
    finite = np.flatnonzero(~np.isnan(values))
    order = finite[np.argsort(values[finite], kind="stable")]
    for b, chunk in enumerate(np.array_split(order, n_bins)):
        index[chunk] = b
    return index


@dataclasses.dataclass(frozen=True)
class ItemMean:
    """A mean of values (rating sets) with its standard error and ``level`` interval clustered by item; ``items``: G.
    se, low and high are NaN for fewer than two items."""

    mean: float
    se: float
    low: float
    high: float
    items: int


def mean_by_item(values: npt.ArrayLike, items: npt.ArrayLike | None = None, level: float = 0.95) -> ItemMean:
    """The mean of ``values`` (n,) and its standard error clustered by ``items`` (n,), each value's item (None: every
    value its own item). An item's rating sets come from raters who saw the same outputs and largely agree, so they
    are not independent: Var(mean) = G / (G - 1) sum_g (sum_(i in g) (y_i - mean))^2 / n^2 (the CR1 variance of a
    mean, ``clusters.clustered_meat``), what resampling whole items estimates, and the interval is Student's t on
    G - 1 degrees of freedom (``clusters.critical_value``). With one value per item it is the ordinary s / sqrt(n)
    and Student's t on n - 1 (docs/separability.md#consistency-intervals)."""
    y = np.asarray(values, dtype=np.float64).reshape(-1)
    n = y.size
    if n == 0:
        return ItemMean(float("nan"), float("nan"), float("nan"), float("nan"), 0)
    numbers, n_items = clusters.item_numbers(np.arange(n) if items is None else items)
    mean = float(y.mean())
    if n_items < 2:
        return ItemMean(mean, float("nan"), float("nan"), float("nan"), n_items)
    # numpy's stubs type bincount as intp whatever the weights; with float weights it returns float64
    per_item: npt.NDArray[np.float64] = np.bincount(numbers, y - mean, n_items)[:, None]  # type: ignore[assignment]
    se = float(np.sqrt(clusters.clustered_meat(per_item)[0, 0]) / n)
    half = clusters.critical_value(level, n_items) * se
    return ItemMean(mean, se, mean - half, mean + half, n_items)


@dataclasses.dataclass(frozen=True)
class BinSummary:
    bin: int
    low: float
    high: float
    count: int
    mean: float
    se: float  # standard error of the mean clustered by item (``mean_by_item``; NaN for fewer than two items)
    histogram: dict[float, int]  # consistency value -> number of rating sets


def summarize_bins(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    index: npt.NDArray[np.integer],
    n_bins: int,
    items: npt.ArrayLike | None = None,
) -> list[BinSummary]:
    """Per bin of x: the range, count, mean of y with its standard error clustered by ``items`` (each value's item;
    None: every value its own, ``mean_by_item``), and the distribution of y."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    item_of = np.arange(len(y)) if items is None else clusters.item_numbers(items)[0]
    out = []
    for b in range(n_bins):
        mask = index == b
        ys = y[mask]
        values, counts = np.unique(np.round(ys, 6), return_counts=True)
        out.append(
            BinSummary(
                bin=b,
                low=float(x[mask].min()) if mask.any() else float("nan"),
                high=float(x[mask].max()) if mask.any() else float("nan"),
                count=int(mask.sum()),
                mean=float(ys.mean()) if ys.size else float("nan"),
                se=mean_by_item(ys, item_of[mask]).se if ys.size else float("nan"),
                histogram={float(v): int(c) for v, c in zip(values, counts, strict=True)},
            )
        )
    return out
