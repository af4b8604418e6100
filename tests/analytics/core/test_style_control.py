"""Style control as arena-rank's ContextualBradleyTerry (docs/ratings.md#style-control): the features, the weights, the
fit (its objective's gradient is zero there) and its sandwich intervals from their definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import norm

from analytics.core import ratings


def simulated(n_battles: int = 3000, n: int = 5, seed: int = 2):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, n_battles)
    b = (a + rng.integers(1, n, n_battles)) % n
    counts_a = rng.poisson([400, 2, 4, 3], (n_battles, 4)).astype(float)
    counts_b = rng.poisson([400, 2, 4, 3], (n_battles, 4)).astype(float)
    strength = np.linspace(-0.5, 0.5, n)
    longer = (counts_a[:, 0] - counts_b[:, 0]) / (counts_a[:, 0] + counts_b[:, 0])
    score = np.where(
        rng.random(n_battles) < 0.1,
        0.5,
        (rng.random(n_battles) < expit(strength[a] - strength[b] + 4 * longer)).astype(float),
    )
    return a, b, score, counts_a, counts_b, n


def test_the_features_are_z_scored_relative_differences_and_the_weights_inverse_pair_counts():
    counts_a = np.array([[10, 0], [30, 2], [0, 0], [5, 1]], dtype=float)
    counts_b = np.array([[30, 0], [10, 2], [0, 4], [5, 3]], dtype=float)
    raw = np.array([[-0.5, 0.0], [0.5, 0.0], [0.0, -1.0], [0.0, -0.5]])  # a total of 0 counts as 1
    np.testing.assert_allclose(ratings.style_features(counts_a, counts_b), (raw - raw.mean(0)) / raw.std(0))
    a, b = np.array([0, 1, 0, 2, 2]), np.array([1, 0, 2, 0, 1])
    w = 1 / np.maximum(np.array([2, 2, 2, 2, 1]), 50)  # (0,1) twice, (0,2) twice, (1,2) once; the floor is 50
    np.testing.assert_allclose(ratings.pair_weights(a, b, 3), w / w.mean())
    w = 1 / np.maximum(np.array([2, 2, 2, 2, 1]), 1)
    np.testing.assert_allclose(ratings.pair_weights(a, b, 3, floor=1), w / w.mean())


def test_the_fit_minimises_the_penalised_mean_loss_and_finds_the_length_preference():
    a, b, score, counts_a, counts_b, n = simulated(20000)
    x = ratings.style_features(counts_a, counts_b)
    w = ratings.pair_weights(a, b, n)
    fit = ratings.contextual_bradley_terry(a, b, score, x, n, reg=1.0)
    theta = (fit.ratings - 1000) * math.log(10) / 400
    params = np.concatenate([theta, fit.coefficients])

    def objective(p):
        logit = p[:n][a] - p[:n][b] + x @ p[n:]
        return -np.mean(w * (score * logit - np.logaddexp(0, logit))) + 0.5 * np.sum(p[n:] ** 2)

    step = 1e-6
    gradient = [(objective(params + step * e) - objective(params - step * e)) / (2 * step) for e in np.eye(len(params))]
    np.testing.assert_allclose(gradient, 0, atol=1e-6)  # a minimum, to the optimiser's tolerance
    # the simulated raters prefer the longer answer (0.14 log-odds per standard deviation) and nothing else; the
    # default penalty (reg = 1 on the mean loss, whose curvature here is about 0.25) shrinks it about fivefold
    unpenalised = ratings.contextual_bradley_terry(a, b, score, x, n, reg=0.0)
    assert 0.08 < unpenalised.coefficients[0] < 0.2 and np.all(np.abs(unpenalised.coefficients[1:]) < 0.045)  # 3 s.e.
    assert 0.1 < fit.coefficients[0] / unpenalised.coefficients[0] < 0.35


def test_the_intervals_are_the_sandwich_of_the_mean_loss():
    a, b, score, counts_a, counts_b, n = simulated(seed=4)
    x = ratings.style_features(counts_a, counts_b)
    w = ratings.pair_weights(a, b, n)
    reg = 1.0
    fit = ratings.contextual_bradley_terry(a, b, score, x, n, reg=reg)
    theta = (fit.ratings - 1000) * math.log(10) / 400
    m = len(score)
    design = np.zeros((m, n + x.shape[1]))
    design[np.arange(m), a] += 1
    design[np.arange(m), b] -= 1
    design[:, n:] = x
    p = expit(design @ np.concatenate([theta, fit.coefficients]))
    hessian = design.T @ (design * (p * (1 - p) * w / m)[:, None]) + 1e-5 * np.eye(design.shape[1])
    scores = design * ((score - p) * w)[:, None]  # each battle's gradient of the log-likelihood
    penalty = np.concatenate([np.zeros(n), reg * fit.coefficients])
    spread = scores.T @ scores / m - np.outer(penalty, penalty) / m
    inverse = np.linalg.inv(hessian)
    half = norm.ppf(0.975) * np.sqrt(np.diag(inverse @ spread @ inverse)[:n] / m) * 400 / math.log(10)
    np.testing.assert_allclose(fit.high - fit.ratings, half, rtol=1e-6)
    np.testing.assert_allclose(fit.ratings - fit.low, half, rtol=1e-6)


def prd_styled_battles(with_questions: bool = False):
    """PRD's human votes among the five answered systems, with each battle's style counts from the real answers (and,
    ``with_questions``, each battle's question)."""
    import json

    from analytics.core import style
    from bench.prd_data import MODELS, PRD, read

    if not (PRD / "generations").is_dir():
        pytest.skip(f"{PRD} is absent: the real data lives in ../shared/data (see its README)")
    counts = {}
    for model in MODELS:
        rows = [json.loads(line) for line in (PRD / "generations" / f"answer_{model}.jsonl").read_text().splitlines()]
        for row, c in zip(rows, style.style_counts([r["text"] for r in rows]), strict=True):
            counts[model, row["question_id"]] = c
    index = {m: i for i, m in enumerate(MODELS)}
    a, b, score, counts_a, counts_b, questions = [], [], [], [], [], []
    for (first, second), by_question in sorted(read(PRD, "human").items()):
        for question, votes in by_question.items():
            for v in votes:
                questions.append(question)
                a.append(index[first])
                b.append(index[second])
                score.append(v)
                counts_a.append(counts[first, question])
                counts_b.append(counts[second, question])
    battles = (np.array(a), np.array(b), np.array(score), np.array(counts_a), np.array(counts_b), len(MODELS))
    return (*battles, np.array(questions)) if with_questions else battles


def test_the_style_controlled_intervals_cover_on_prds_real_answers():
    """Fixed design: PRD's 1,760 human battles with the real answers' style. Outcomes are drawn from the
    unpenalised fit (people prefer longer answers strongly: 0.8 log-odds per standard deviation), and the target of
    the default fit (penalty reg = 1, which shrinks that coefficient about tenfold) is the penalised model's value
    on this design, found by fitting the expected outcomes. Each system's rating (centred) must lie in its 95 %
    interval about 95 % of the time, on all the battles and on half of them, with the penalty's curvature in the
    Hessian (the report's, whose meat is also clustered by item: tests/analytics/core/test_clustered_sandwich.py);
    arena-rank's, without it, are conservative (0.986 measured)."""
    a, b, score, counts_a, counts_b, n = prd_styled_battles()
    x = ratings.style_features(counts_a, counts_b)
    truth = ratings.contextual_bradley_terry(a, b, score, x, n, reg=0.0)
    theta = (truth.ratings - 1000) * math.log(10) / 400
    p = expit(theta[a] - theta[b] + x @ truth.coefficients)
    target = ratings.contextual_bradley_terry(a, b, p, x, n).ratings
    rng = np.random.default_rng(29)
    for size in (len(a), len(a) // 2):
        covered, wider = [], []
        for _ in range(200):
            keep = rng.choice(len(a), size, replace=False) if size < len(a) else np.arange(len(a))
            y = (rng.random(size) < p[keep]).astype(float)
            features = ratings.style_features(counts_a[keep], counts_b[keep])  # z-scored on the battles at hand
            fit = ratings.contextual_bradley_terry(a[keep], b[keep], y, features, n, penalty_curvature=True)
            arena = ratings.contextual_bradley_terry(a[keep], b[keep], y, features, n)
            expected = (
                target
                if size == len(a)
                else ratings.contextual_bradley_terry(a[keep], b[keep], p[keep], features, n).ratings
            )
            covered.append((fit.low <= expected) & (expected <= fit.high))
            wider.append((arena.low <= expected) & (expected <= arena.high))
        rate = np.mean(covered)
        assert 0.93 <= rate <= 0.97, (size, rate, np.mean(covered, axis=0))
        assert np.mean(wider) > 0.97  # arena-rank's own: conservative


def test_the_compiled_loss_is_the_numpy_loss():
    """From ratings.COMPILED_FROM battles the fit evaluates its objective compiled (analytics/core/style_loops.py):
    the same value, gradient and Hessian as the definition in numpy, at any point."""
    from analytics.core import style_loops

    a, b, score, counts_a, counts_b, n = simulated(5000)
    x = ratings.style_features(counts_a, counts_b)
    w = ratings.pair_weights(a, b, n)
    params = np.random.default_rng(3).normal(0, 0.5, n + 4)

    def objective(p):
        logit = p[:n][a] - p[:n][b] + x @ p[n:]
        return -np.mean(w * (score * logit - np.logaddexp(0, logit))) + 0.5 * 0.7 * np.sum(p[n:] ** 2)

    hessian = np.empty((n + 4, n + 4))
    loss, gradient = style_loops.loss_and_gradient(params, a, b, x, score, w, n, 0.7, hessian)
    assert loss == pytest.approx(objective(params), rel=1e-12)
    step = 1e-6
    numeric = [(objective(params + step * e) - objective(params - step * e)) / (2 * step) for e in np.eye(n + 4)]
    np.testing.assert_allclose(gradient, numeric, atol=1e-8)
    # the Hessian of the mean loss (the penalty's reg * I left to the caller), from differences of the gradient

    def gradient_at(p):
        return style_loops.loss_and_gradient(p, a, b, x, score, w, n, 0.7, np.empty((0, 0)))[1]

    numeric = np.array(
        [(gradient_at(params + step * e) - gradient_at(params - step * e)) / (2 * step) for e in np.eye(n + 4)]
    )
    penalty = np.diag(np.r_[np.zeros(n), np.full(4, 0.7)])
    np.testing.assert_allclose(hessian + penalty, numeric, atol=1e-7)
