"""Who won an item: each rater's preference (Eq. 7's sign) and the majority of
raters -- the one rule the live DiffUse loop and the report share."""

from __future__ import annotations

from selection.core import winners


def test_a_raters_preference_is_the_sign_of_their_preference_strength():
    assert winners.rater_preference([-1, -1, 1]) == -1
    assert winners.rater_preference([-1, 1, 0]) == 0
    assert winners.rater_preference([1, 0, 0, 0, 0]) == 1
    assert winners.rater_preference([]) == 0


def test_an_item_goes_to_the_majority_of_its_raters_not_of_its_ratings():
    # a x5 / b, b, tie, tie, tie / b, tie x4: the raters prefer a, b, b -> b; the sum of the 15 ratings
    # (-5 + 2 + 1 = -2) would say a.
    sets = [[-1] * 5, [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]]
    assert winners.item_winner(sets) == "b"
    assert winners.item_winner([[-1, 1], [0, 0]]) == "tie"  # level: no rater prefers a system
    assert winners.item_winner([[-1], [1]]) == "tie"
    assert winners.item_winner([[0], [-1, 0]]) == "a"  # a tied rater does not outvote a preference


def test_an_item_s_score_is_the_mean_of_its_raters_mean_outcomes():
    # rater 1: a, a, tie -> (1 + 1 + 1/2) / 3; rater 2: b -> 0; the item: the mean of 5/6 and 0
    assert winners.item_score([[-1, -1, 0], [1]]) == 5 / 12
    assert winners.item_score([[0]]) == 0.5
