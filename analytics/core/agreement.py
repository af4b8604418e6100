"""Inter-rater agreement: Krippendorff's alpha (nominal) over units, Cohen's kappa between two raters, and the
most common answer of a unit's raters under a named rule for splits."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypedDict

import numpy as np


def krippendorff_alpha_nominal(units: Sequence[Sequence[Hashable]]) -> float:
    """Krippendorff's alpha for nominal data. ``units``: for each unit (e.g. a pair), the values the
    raters gave it. Units with fewer than two values are not pairable and are skipped.
    alpha = 1 - D_o / D_e from the coincidence matrix. NaN when undefined."""
    pairable = [list(u) for u in units if len(u) >= 2]
    if not pairable:
        return float("nan")
    categories = sorted({v for u in pairable for v in u}, key=str)
    index = {c: i for i, c in enumerate(categories)}
    o = np.zeros((len(categories), len(categories)))
    for u in pairable:
        m = len(u)
        counts = np.zeros(len(categories))
        for v in u:
            counts[index[v]] += 1
        o += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    observed = o.sum() - np.trace(o)
    expected = (n * n - np.sum(n_c**2)) / (n - 1)
    if expected == 0:
        return float("nan") if observed else 1.0
    return float(1.0 - observed / expected)


SPLIT_RULES = ("tie", "first", "left_out")


def plurality(choices: Sequence[Hashable | None], split: str = "tie") -> Hashable | None:
    """The most common answer among ``choices`` (in the order given; None entries are no answer). When two or
    more answers are equally common (a *split*, e.g. one vote each for A, B and tie) ``split`` decides:
    "tie" answers "tie", "first" answers the first given among the equally common answers' votes (the first
    vote, in collection order), "left_out" answers None, so the unit drops out of whatever is counted.
    No answers: None."""
    if split not in SPLIT_RULES:
        raise ValueError(f"split must be one of {', '.join(SPLIT_RULES)}, not {split!r}")
    values = [c for c in choices if c is not None]
    if not values:
        return None
    counts: dict[Hashable, int] = {}
    for c in values:
        counts[c] = counts.get(c, 0) + 1
    best = max(counts.values())
    winners = [c for c in values if counts[c] == best]
    if len(set(winners)) == 1:
        return winners[0]
    return {"tie": "tie", "first": winners[0], "left_out": None}[split]


def cohen_kappa(x: Sequence[Hashable], y: Sequence[Hashable]) -> float:
    """Cohen's kappa between two raters' labels on the same units. NaN when undefined."""
    if len(x) != len(y) or not x:
        return float("nan")
    categories = sorted(set(x) | set(y), key=str)
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)))
    for a, b in zip(x, y, strict=True):
        table[index[a], index[b]] += 1
    n = table.sum()
    observed = np.trace(table) / n
    expected = float(np.sum(table.sum(axis=0) * table.sum(axis=1)) / n**2)
    if expected == 1:
        return float("nan")
    return float((observed - expected) / (1 - expected))


class PairKappa(TypedDict):
    """Cohen's kappa between two raters over the units both rated (``pairwise_kappas``)."""

    rater_1: str
    rater_2: str
    overlap: int
    kappa: float


def pairwise_kappas(labels: Mapping[str, Mapping[Hashable, Hashable]], min_overlap: int = 10) -> list[PairKappa]:
    """Cohen's kappa for every pair of raters sharing at least ``min_overlap`` units.
    ``labels``: rater -> {unit: label}."""
    raters = sorted(labels)
    out: list[PairKappa] = []
    for i, r1 in enumerate(raters):
        for r2 in raters[i + 1 :]:
            shared = sorted(set(labels[r1]) & set(labels[r2]), key=str)
            if len(shared) >= min_overlap:
                out.append(
                    {
                        "rater_1": r1,
                        "rater_2": r2,
                        "overlap": len(shared),
                        "kappa": cohen_kappa([labels[r1][u] for u in shared], [labels[r2][u] for u in shared]),
                    }
                )
    return out
