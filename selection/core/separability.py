"""Generation separability (docs/separability.md; Eq. 1-3 of "Compare without Despair").

For one item with K_A samples of system A and K_B of system B:
self-alignment  A_AA = mean of s(y_A^j, y_A^l) over j != l,
cross-alignment A_AB = mean of s(y_A^j, y_B^l) over all K_A * K_B pairs (the paper's Eq. 2; the
reference code averages only half of the cross matrix, which we do not copy),
then every alignment of a (study, system pair, metric) is min-max normalised together and
delta = max(A'_AA, A'_BB) - A'_AB, in [-1, 1].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

METRICS = ("cosine", "rouge1", "bleu")
# The default similarity: cosine of the study encoder's embeddings with the paper's length adjustment (its
# default is length-adjusted BERTScore). On the paper's own human data it orders the four configurations as the
# paper does and its consistency rises over separability bins; plain cosine does neither (bench/README.md).
DEFAULT_METRIC = "cosine-la"


def length_penalty(len_x: int, len_y: int) -> float:
    """LP = exp(1 - |ref| / |hyp|) with the longer text as ``ref`` and the shorter as ``hyp``, so LP <= 1
    and LP = 1 for equal lengths. Lengths are word counts; an empty text gets LP = 0."""
    ref, hyp = max(len_x, len_y), min(len_x, len_y)
    if hyp == 0:
        return 0.0 if ref > 0 else 1.0
    return float(np.exp(1.0 - ref / hyp))


def cosine_matrix(x: npt.ArrayLike, y: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Cosine similarity between the rows of x (n, d) and y (m, d): (n, m)."""
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    xn: npt.NDArray[np.float64] = xa / np.maximum(np.linalg.norm(xa, axis=1, keepdims=True), 1e-12)
    yn: npt.NDArray[np.float64] = ya / np.maximum(np.linalg.norm(ya, axis=1, keepdims=True), 1e-12)
    return xn @ yn.T


def text_similarity_matrix(
    x: Sequence[str], y: Sequence[str], similarity: Callable[[str, str], float]
) -> npt.NDArray[np.float64]:
    """s(x_j, y_l) for every pair: (len(x), len(y))."""
    return np.array([[similarity(a, b) for b in y] for a in x], dtype=np.float64).reshape(len(x), len(y))


def length_adjust(matrix: npt.NDArray[np.float64], x: Sequence[str], y: Sequence[str]) -> npt.NDArray[np.float64]:
    """The length-adjusted form s_LA = s * LP of a similarity matrix between texts x and y."""
    lx = [len(t.split()) for t in x]
    ly = [len(t.split()) for t in y]
    penalties = np.array([[length_penalty(a, b) for b in ly] for a in lx], dtype=np.float64)
    return matrix * penalties.reshape(matrix.shape)


def self_alignment(matrix: npt.NDArray[np.float64]) -> float:
    """Mean of the off-diagonal entries of a K x K similarity matrix; NaN when K < 2 (undefined)."""
    k = matrix.shape[0]
    if matrix.shape != (k, k):
        raise ValueError(f"self-alignment needs a square matrix, got {matrix.shape}")
    if k < 2:
        return float("nan")
    return float((matrix.sum() - np.trace(matrix)) / (k * (k - 1)))


def cross_alignment(matrix: npt.NDArray[np.float64]) -> float:
    """Mean over all K_A x K_B entries (Eq. 2)."""
    return float(matrix.mean())


@dataclasses.dataclass(frozen=True)
class Separability:
    """Per-item alignments (raw) and delta (normalised), arrays of shape (n_items,). ``low``/``high``
    are the min-max normalisation bounds. Items with K < 2 for either system have NaN delta."""

    self_a: npt.NDArray[np.float64]
    self_b: npt.NDArray[np.float64]
    cross: npt.NDArray[np.float64]
    delta: npt.NDArray[np.float64]
    low: float
    high: float


def separability(self_a: npt.ArrayLike, self_b: npt.ArrayLike, cross: npt.ArrayLike) -> Separability:
    """Min-max normalise every alignment value of all items together (self A, self B and cross) and
    compute delta_i = max(A'_AA, A'_BB) - A'_AB (docs/separability.md#normalisation-and-delta, Eq. 3 of the separability
    paper).

    Items whose self-alignments are NaN (K = 1) keep NaN delta and do not enter the bounds.
    When all values are equal, every normalised value is 0 and so is delta.
    """
    self_a, self_b, cross = (np.asarray(v, dtype=np.float64) for v in (self_a, self_b, cross))
    if not (self_a.shape == self_b.shape == cross.shape):
        raise ValueError("self_a, self_b and cross must have the same shape")
    defined = ~(np.isnan(self_a) | np.isnan(self_b) | np.isnan(cross))
    values = np.concatenate([self_a[defined], self_b[defined], cross[defined]])
    if values.size == 0:
        nan = np.full(self_a.shape, np.nan)
        return Separability(self_a, self_b, cross, nan, float("nan"), float("nan"))
    low, high = float(values.min()), float(values.max())
    span = high - low

    def norm(v: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return (v - low) / span if span > 0 else np.zeros_like(v)

    delta = np.maximum(norm(self_a), norm(self_b)) - norm(cross)
    delta[~defined] = np.nan
    return Separability(self_a, self_b, cross, delta, low, high)


def rouge1_similarity() -> Callable[[str, str], float]:
    """ROUGE-1 F1 with stemming (``rouge-score``)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    return lambda hyp, ref: scorer.score(ref, hyp)["rouge1"].fmeasure


def bleu_similarity() -> Callable[[str, str], float]:
    """Sentence BLEU / 100 (``sacrebleu``) with the longer of the two texts (in words) as the reference,
    as the separability paper does ("we arbitrarily choose the longer generation as the reference"), so
    s(x, y) = s(y, x) and delta does not depend on which system is called A. Texts of equal length get
    the mean of both directions, which keeps the symmetry where sacrebleu's tokens would break the tie."""
    from sacrebleu.metrics.bleu import BLEU  # where it is defined: sacrebleu.metrics re-exports it implicitly

    bleu = BLEU(effective_order=True)

    def score(hyp: str, ref: str) -> float:
        return bleu.sentence_score(hyp, [ref]).score / 100.0

    def similarity(x: str, y: str) -> float:
        lx, ly = len(x.split()), len(y.split())
        if lx == ly:
            return (score(x, y) + score(y, x)) / 2
        return score(x, y) if lx < ly else score(y, x)

    return similarity
