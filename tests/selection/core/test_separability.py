"""Separability (docs/separability.md) on inputs whose values can be computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from selection.core import separability as sep

E1, E2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])


def alignments(emb_a: np.ndarray, emb_b: np.ndarray) -> tuple[float, float, float]:
    return (
        sep.self_alignment(sep.cosine_matrix(emb_a, emb_a)),
        sep.self_alignment(sep.cosine_matrix(emb_b, emb_b)),
        sep.cross_alignment(sep.cosine_matrix(emb_a, emb_b)),
    )


def test_identical_outputs_are_not_separable_and_disjoint_ones_fully():
    identical = alignments(np.stack([E1, E1]), np.stack([E1, E1]))
    disjoint = alignments(np.stack([E1, E1]), np.stack([E2, E2]))
    assert identical == (1.0, 1.0, 1.0) and disjoint == (1.0, 1.0, 0.0)
    result = sep.separability(*map(np.array, zip(identical, disjoint, strict=True)))
    np.testing.assert_allclose(result.delta, [0.0, 1.0])
    assert (result.low, result.high) == (0.0, 1.0)


def test_self_alignment_averages_the_off_diagonal():
    m = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.4], [0.2, 0.4, 1.0]])
    assert sep.self_alignment(m) == pytest.approx((0.5 + 0.2 + 0.4) * 2 / 6)


def test_cross_alignment_averages_all_k_squared_pairs_not_half():
    m = np.array([[0.9, 0.1], [0.3, 0.5]])
    assert sep.cross_alignment(m) == pytest.approx((0.9 + 0.1 + 0.3 + 0.5) / 4)


def test_k_of_one_is_undefined_not_zero():
    assert math.isnan(sep.self_alignment(np.ones((1, 1))))
    result = sep.separability(np.array([np.nan, 0.8, 0.6]), np.array([np.nan, 0.7, 0.9]), np.array([0.5, 0.2, 0.4]))
    assert math.isnan(result.delta[0])
    # bounds come from the defined items only: min 0.2, max 0.9
    np.testing.assert_allclose(result.delta[1:], [(0.8 - 0.2) / 0.7 - 0.0, (0.9 - 0.2) / 0.7 - (0.4 - 0.2) / 0.7])


def test_delta_is_bounded_and_invariant_to_affine_rescaling():
    rng = np.random.default_rng(0)
    a, b, c = rng.uniform(0, 1, (3, 50))
    first = sep.separability(a, b, c).delta
    second = sep.separability(3 * a + 1, 3 * b + 1, 3 * c + 1).delta
    np.testing.assert_allclose(first, second)
    assert np.all(first >= -1) and np.all(first <= 1)


def test_constant_alignments_give_zero_delta():
    result = sep.separability(np.full(3, 0.5), np.full(3, 0.5), np.full(3, 0.5))
    np.testing.assert_array_equal(result.delta, np.zeros(3))


def test_length_penalty():
    assert sep.length_penalty(7, 7) == 1.0
    assert sep.length_penalty(5, 10) == pytest.approx(math.exp(-1.0))
    assert sep.length_penalty(10, 5) == sep.length_penalty(5, 10)
    assert sep.length_penalty(0, 4) == 0.0
    assert all(sep.length_penalty(a, b) <= 1 for a in range(1, 20) for b in range(1, 20))


def test_length_adjusted_similarity_multiplies_by_the_penalty():
    x, y = ["one two three four", "one two"], ["one two three four"]
    adjusted = sep.length_adjust(np.ones((2, 1)), x, y)
    np.testing.assert_allclose(adjusted, [[1.0], [math.exp(1 - 4 / 2)]])


def test_rouge1_and_bleu_similarities():
    rouge, bleu = sep.rouge1_similarity(), sep.bleu_similarity()
    assert rouge("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1.0)
    assert rouge("alpha beta", "gamma delta") == 0.0
    assert rouge("cats running", "cat runs") == pytest.approx(1.0)  # stemming
    assert bleu("the cat sat on the mat today", "the cat sat on the mat today") == pytest.approx(1.0)
    assert bleu("alpha beta gamma delta", "one two three four") == pytest.approx(0.0, abs=1e-9)
    m = sep.text_similarity_matrix(["a b c", "d e f"], ["a b c"], rouge)
    assert m.shape == (2, 1) and m[0, 0] == pytest.approx(1.0) and m[1, 0] == 0.0


def test_bleu_takes_the_longer_text_as_the_reference_so_it_is_symmetric():
    from sacrebleu.metrics import BLEU

    bleu, reference = sep.bleu_similarity(), BLEU(effective_order=True)
    short, long = "the cat sat on the mat", "the black cat sat quietly on the old mat today"
    # the paper: "we arbitrarily choose the longer generation as the reference"
    assert bleu(short, long) == pytest.approx(reference.sentence_score(short, [long]).score / 100)
    assert bleu(long, short) == bleu(short, long)
    assert reference.sentence_score(long, [short]).score != reference.sentence_score(short, [long]).score
    same_length_x, same_length_y = "a cat sat on a red mat", "the cat sat on the mat ."
    assert bleu(same_length_x, same_length_y) == bleu(same_length_y, same_length_x)
