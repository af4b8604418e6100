import pytest

from selection.core import multiplicity


def test_pairs_and_split():
    assert [multiplicity.pair_count(k) for k in (0, 1, 2, 3, 5)] == [0, 0, 1, 3, 10]
    # Bonferroni: alpha / K(K-1)/2 with more than two systems, alpha itself with two
    assert multiplicity.pair_alpha(0.05, 5) == pytest.approx(0.005)
    assert multiplicity.pair_alpha(0.05, 2) == 0.05
    assert multiplicity.pair_alpha(0.05, 5, "per_pair") == 0.05
    assert multiplicity.pair_alpha(0.05, 3, "study_wide") == pytest.approx(0.05 / 3)
    assert multiplicity.in_force("auto", 3) == "study_wide"
    assert multiplicity.in_force("auto", 2) == "per_pair"


def test_refuses_unknown_control_and_alpha():
    with pytest.raises(ValueError, match="control"):
        multiplicity.pair_alpha(0.05, 4, "holm")
    with pytest.raises(ValueError, match="alpha"):
        multiplicity.pair_alpha(1.5, 4)
