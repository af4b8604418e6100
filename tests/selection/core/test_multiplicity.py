import pytest

from selection.core import multiplicity


def test_pairs_and_split():
    assert [multiplicity.pair_count(k) for k in (0, 1, 2, 3, 5)] == [0, 0, 1, 3, 10]
    # Bonferroni over the pairs decided: alpha / 10 for every pair of five systems, alpha / 4 for four of them
    # against a baseline, alpha itself for one pair
    assert multiplicity.pair_alpha(0.05, multiplicity.pair_count(5)) == pytest.approx(0.005)
    assert multiplicity.pair_alpha(0.05, 4) == pytest.approx(0.0125)
    assert multiplicity.pair_alpha(0.05, 1) == 0.05
    assert multiplicity.pair_alpha(0.05, 10, "per_pair") == 0.05
    assert multiplicity.pair_alpha(0.05, 3, "study_wide") == pytest.approx(0.05 / 3)
    assert multiplicity.in_force("auto", 3) == "study_wide"
    assert multiplicity.in_force("auto", 1) == "per_pair"


def test_refuses_unknown_control_and_alpha():
    with pytest.raises(ValueError, match="control"):
        multiplicity.pair_alpha(0.05, 4, "holm")
    with pytest.raises(ValueError, match="alpha"):
        multiplicity.pair_alpha(1.5, 4)
