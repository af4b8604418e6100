"""Who won an item: an answer in model coordinates, each rater's preference (Eq. 7's sign) and the majority of
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


def test_an_answer_in_model_coordinates():
    assert winners.effective_choice("b", ["a"]) == "b"  # the forced choice comes first
    assert winners.effective_choice(None, ["a"]) == "a"
    assert winners.effective_choice(None, ["a", "b"]) == "tie"
    assert winners.effective_choice(None, None, 0.7) == "a"
    assert winners.effective_choice(None, None, 0.5) == "tie"
    # "neither is acceptable" (an empty response set) prefers neither output: no preference
    assert winners.effective_choice(None, [], None) == "tie"
    assert winners.effective_choice("tie", [], None) == "tie"  # a forced "both are bad"
    assert winners.effective_choice(None, None, None) is None
