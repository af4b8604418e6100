"""Who won an item: the one pure home of the item-winner rule, read by both the live DiffUse loop
(selection/live.py) and the study report's stopping table, win rates and leaderboards.

Ratings are in model coordinates: -1 (A preferred), 0 (no preference), +1 (B preferred). A rating set
is one rater's ratings of the N sampled pairs of one item (docs/separability.md#who-won-an-item).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

RATING = {"a": -1, "b": 1, "tie": 0}
WINNER = {-1: "a", 0: "tie", 1: "b"}


def rating_for(answer: str, flipped: bool = False) -> int:
    """The rating r of an answer in model coordinates ("a", "b", "tie"), seen from a system pair's order: as is when
    the judgment's A is the pair's first system, negated when it is the second (``flipped``)."""
    return -RATING[answer] if flipped else RATING[answer]


def score_for_a(rating: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """System A's score of a rating (or an array of them): 1 for a win (r = -1), 1/2 for no preference, 0 for a
    loss -- a battle's outcome for the leaderboards and an item's outcome for win rates."""
    return (1 - np.asarray(rating, dtype=np.float64)) / 2


def rater_preference(ratings: npt.ArrayLike) -> int:
    """One rater's preference on an item: the sign of their preference strength (Eq. 7) over their rating
    set, -1 (A), 0 (none, or no ratings) or +1 (B)."""
    if isinstance(ratings, list):  # a rater's few ratings, read one by one (the review's every pair): no array
        total = sum(ratings)
        return (total > 0) - (total < 0)
    r = np.asarray(ratings, dtype=np.float64)
    return int(np.sign(r.sum())) if r.size else 0


def item_winner(rating_sets: Iterable[npt.ArrayLike]) -> str:
    """Who won an item: each rater's preference (``rater_preference``), then the majority of the raters
    that prefer a system; a level count (including no rater with a preference) is a tie. Returns "a", "b"
    or "tie". This is the one rule the report's stopping table and the live DiffUse loop both use."""
    return WINNER[int(np.sign(sum(rater_preference(r) for r in rating_sets)))]


def item_score(rating_sets: Iterable[npt.ArrayLike]) -> float:
    """An item's score for system A: the mean over its raters of their mean outcome (``score_for_a``: 1 a win,
    1/2 no preference, 0 a loss) -- what a pair's anytime-valid decision observes per item
    (``selection.core.decisions``). ``rating_sets``: one list of ratings per rater."""
    return float(np.mean([np.mean(score_for_a(r)) for r in rating_sets]))


def raters_disagree(rating_sets: Iterable[npt.ArrayLike]) -> bool:
    """Whether the raters of an item (or pair) disagree: two or more raters whose preferences
    (``rater_preference``) are not all the same -- one preferring A and another B, or one with no preference
    against one with. The review queue's rule (``analytics.review``)."""
    return len({rater_preference(r) for r in rating_sets}) > 1
