"""Display order <-> model order (annotation/orientation.py)."""

from __future__ import annotations

import pytest

from annotation import orientation


@pytest.mark.parametrize("a_first", [True, False])
def test_to_model_and_to_display_are_inverses(a_first):
    for display in ("first", "second", "tie"):
        assert orientation.to_display(orientation.to_model(display, a_first), a_first) == display
    for model in ("a", "b", "tie"):
        assert orientation.to_model(orientation.to_display(model, a_first), a_first) == model


def test_the_first_shown_output_is_a_exactly_when_a_was_shown_first():
    assert orientation.to_model("first", True) == "a" and orientation.to_model("first", False) == "b"
    assert orientation.to_model("second", True) == "b" and orientation.to_model("second", False) == "a"
    assert orientation.in_display_order("A", "B", True) == ("A", "B")
    assert orientation.in_display_order("A", "B", False) == ("B", "A")
    assert orientation.probability_first(0.8, True) == 0.8
    assert orientation.probability_first(0.8, False) == pytest.approx(0.2)
