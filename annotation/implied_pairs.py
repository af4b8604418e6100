"""What an answer on several outputs implies, pairwise (docs/ratings.md#rankings), pure: output ids in, (winner, loser)
pairs of them out. Rankings and best-worst answers are read by every analysis as these pairs.

- A ranking of K outputs, best first, implies all K (K - 1) / 2 pairs ("full breaking", Azari Soufiani, Parkes & Xia
  2014). Under the Plackett-Luce model, whose rankings are the order of independent exponential times with rates
  theta_i (Luce 1959), output i comes before j with probability theta_i / (theta_i + theta_j) whatever the other
  outputs: each implied pair follows the Bradley-Terry model of the same strengths, so a Bradley-Terry fit on the
  implied pairs (a pairwise composite likelihood) estimates the strengths the rankings came from.
- A best-worst answer on K shown outputs (best-worst scaling, Louviere, Flynn & Marley 2015) implies the best above
  each other output and each other output above the worst: 2 K - 3 pairs (for K = 3, the whole ranking). It is the
  standard "counting" reading of best-worst data; for K >= 4 its pairs are a selected subset, so on the same
  Bradley-Terry scale they estimate the order, not exactly the strengths of a Plackett-Luce or MaxDiff model.

The implied pairs of one answer are not independent (one judgment of one rater), nor are the answers of one item:
every interval over them resamples items whole or clusters by item (``analytics/core/clusters.py``), as the report's
boards do.
"""

from __future__ import annotations

from collections.abc import Sequence


class RankingError(ValueError):
    """A ranking or best-worst answer that implies nothing consistent; the message says what is wrong."""


def ranking_pairs(order: Sequence[int]) -> list[tuple[int, int]]:
    """The (winner, loser) pairs a strict ranking implies, ``order`` best first: every earlier output above every
    later one, in the order (0, 1), (0, 2), ..., (K - 2, K - 1) of their places."""
    if len(order) < 2:
        raise RankingError("a ranking orders at least two outputs")
    if len(set(order)) != len(order):
        raise RankingError("a ranking names each output once")
    return [(order[i], order[j]) for i in range(len(order)) for j in range(i + 1, len(order))]


def best_worst_pairs(shown: Sequence[int], best: int, worst: int) -> list[tuple[int, int]]:
    """The (winner, loser) pairs a best-worst answer implies: ``best`` above every other shown output, then every
    output but the best above ``worst`` (2 K - 3 pairs, in the order of ``shown``)."""
    if len(shown) < 3:
        raise RankingError("best-worst scaling shows at least three outputs")
    if len(set(shown)) != len(shown):
        raise RankingError("the shown outputs are each shown once")
    if best not in shown or worst not in shown:
        raise RankingError("the best and the worst are among the shown outputs")
    if best == worst:
        raise RankingError("the best and the worst are different outputs")
    above = [(best, other) for other in shown if other != best]
    below = [(other, worst) for other in shown if other not in (best, worst)]
    return above + below
