"""Length-controlled win rates (AlpacaEval 2's GLM; docs/ratings.md#length-controlled-win-rates): the fit from its
definition and against scikit-learn's logistic regression fitted as AlpacaEval fits it (soft labels as two weighted
rows), and the interval's coverage on PRD's real votes and real answer lengths."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import expit, logit
from scipy.stats import t
from sklearn.linear_model import LogisticRegression

from analytics.core.length_control import MIN_ITEMS, NoEstimate, cr2_variance, length_controlled_win_rate
from annotation.text import newlines
from bench.prd_data import MODELS, PRD, read


def test_without_length_differences_it_is_the_plain_win_rate():
    score = np.array([1, 1, 0.5, 0, 1, 0, 1, 1, 0.5, 1] * 3)
    lengths = np.full(len(score), 100)
    fit = length_controlled_win_rate(score, lengths, lengths)
    assert fit.estimate == pytest.approx(score.mean()) and fit.win_rate == pytest.approx(score.mean())
    assert fit.length_coefficient == 0.0
    # the interval: Wald on the log-odds, its variance p(1-p) / n over p(1-p) squared (independent judgments), with
    # CR2's factor n / (n - 1) (each judgment's leverage is 1 / n) and Satterthwaite's df n - 1
    p, n = score.mean(), len(score)
    se = np.sqrt(((score - p) ** 2).sum() * n / (n - 1)) / (n * p * (1 - p))
    assert fit.low == pytest.approx(expit(logit(p) - t.ppf(0.975, n - 1) * se), rel=1e-6)


def test_the_fit_is_alpaca_evals_glm_unpenalised():
    rng = np.random.default_rng(4)
    n = 400
    length_a, length_b = rng.lognormal(7, 0.6, n), rng.lognormal(7, 0.6, n)
    tanh = np.tanh((length_a - length_b) / (length_a - length_b).std(ddof=1))
    score = np.where(rng.random(n) < 0.15, 0.5, (rng.random(n) < expit(0.3 + 0.9 * tanh)).astype(float))
    fit = length_controlled_win_rate(score, length_a, length_b)
    # AlpacaEval's fit_LogisticRegressionCV with soft labels: every judgment twice, labelled 1 with weight p and 0
    # with weight 1 - p, no intercept (the constant column is the model's theta); here without its L1 penalty
    x = np.column_stack([np.ones(n), tanh])
    reference = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12, max_iter=10000).fit(
        np.vstack([x, x]), np.r_[np.ones(n), np.zeros(n)], sample_weight=np.r_[score, 1 - score]
    )
    theta, phi = reference.coef_[0]
    assert fit.estimate == pytest.approx(expit(theta), abs=1e-6)
    assert fit.length_coefficient == pytest.approx(phi, abs=1e-5)
    assert fit.length_coefficient > 0.5 and fit.low < fit.estimate < fit.high


def test_a_pair_without_enough_judgments_or_with_one_winner_gets_no_estimate():
    with pytest.raises(NoEstimate, match="fewer than"):
        length_controlled_win_rate(np.ones(5), np.arange(5), np.zeros(5))
    with pytest.raises(NoEstimate, match="won"):
        length_controlled_win_rate(np.ones(40), np.arange(40), np.zeros(40))
    rng = np.random.default_rng(1)  # A's answers always far longer: tanh(d / sd(d)) is 1 for every judgment
    with pytest.raises(NoEstimate, match="cannot be told apart"):
        length_controlled_win_rate(np.tile([1.0, 0.0, 1.0], 20), rng.normal(2000, 50, 60), rng.normal(500, 50, 60))


def prd_pairs():
    """Per system pair of PRD's five answered systems: per question, the human votes for the first system and the
    character lengths of the two answers."""
    if not (PRD / "generations").is_dir():
        pytest.skip(f"{PRD} is absent: the real data lives in ../shared/data (see its README)")
    lengths = {}
    for model in MODELS:
        for line in (PRD / "generations" / f"answer_{model}.jsonl").read_text().splitlines():
            row = json.loads(line)
            lengths[model, row["question_id"]] = len(newlines(row["text"]))  # as a study stores it
    out = []
    for (a, b), by_question in sorted(read(PRD, "human").items()):
        questions = [q for q in sorted(by_question) if (a, q) in lengths and (b, q) in lengths]
        out.append([(np.array(by_question[q]), lengths[a, q], lengths[b, q]) for q in questions])
    return out


def estimate(questions, chosen):
    score = np.concatenate([questions[i][0] for i in chosen])
    length_a = np.concatenate([np.full(len(questions[i][0]), questions[i][1]) for i in chosen])
    length_b = np.concatenate([np.full(len(questions[i][0]), questions[i][2]) for i in chosen])
    cluster = np.concatenate([np.full(len(questions[i][0]), k) for k, i in enumerate(chosen)])
    return length_controlled_win_rate(score, length_a, length_b, cluster)


def test_the_cr2_variance_and_its_degrees_of_freedom_are_their_definitions():
    """CR2 and Satterthwaite's degrees of freedom from the full matrices (Pustejovsky & Tipton 2018, Eq. 5 and
    §3.1): A_g = (I - H_gg)^-1/2, V = c'M (sum X_g'A_g e_g e_g'A_g X_g) M c, and df = (sum l)^2 / sum l^2 over the
    eigenvalues l of G'G, G's columns (I - H)_g' A_g X_g M c; and the two cases with a known answer."""
    from scipy.linalg import sqrtm

    rng = np.random.default_rng(7)
    n = 50
    x = np.column_stack([np.ones(n), rng.normal(size=n)]) * rng.uniform(0.3, 0.5, n)[:, None]
    groups = np.unique(rng.integers(0, 15, n), return_inverse=True)[1]
    residual, bread, c = rng.normal(size=n), np.linalg.inv(x.T @ x), np.array([1.0, 0.0])
    variance, df = cr2_variance(x, residual, groups, bread, c)
    hat, meat, columns = x @ bread @ x.T, np.zeros((2, 2)), []
    for g in range(groups.max() + 1):
        s = groups == g
        adjust = np.linalg.inv(sqrtm(np.eye(s.sum()) - hat[np.ix_(s, s)]).real)
        u = x[s].T @ adjust @ residual[s]
        meat += np.outer(u, u)
        columns.append((np.eye(n) - hat)[:, s] @ adjust @ x[s] @ bread @ c)
    eigen = np.linalg.eigvalsh(np.column_stack(columns).T @ np.column_stack(columns))
    assert variance == pytest.approx(c @ bread @ meat @ bread @ c, rel=1e-10)
    assert df == pytest.approx(eigen.sum() ** 2 / (eigen**2).sum(), rel=1e-10)
    # a mean over G equal clusters: CR2 is the cluster means' variance over G (the usual t-test's), on G - 1 df
    g, size = 12, 3
    ones = np.ones((g * size, 1))
    e = rng.normal(size=g * size)
    variance, df = cr2_variance(ones, e - e.mean(), np.repeat(np.arange(g), size), np.array([[1 / (g * size)]]), [1.0])
    means = e.reshape(g, size).mean(axis=1)
    assert variance == pytest.approx(means.var(ddof=1) / g) and df == pytest.approx(g - 1)


@pytest.mark.parametrize(("items", "rounds"), [(MIN_ITEMS, 300), (60, 100)])
def test_the_interval_covers_on_prds_real_votes_and_lengths(items, rounds):
    """Each pair's ~80 questions (their real votes and real answer lengths) stand for the population; a study is
    ``items`` questions drawn with replacement (the fewest the report estimates from, and a larger study), all
    their votes kept (about 3 per question, the clusters), and the target is the estimate on all the questions
    (the model's value in that population). Every pair, not only the pool, must cover: the plain clustered sandwich
    covered 0.93 pooled at 20 items but 0.83 on the hardest pair; CR2 with Satterthwaite's df 0.94 or more on each
    (0.975 pooled: conservative where a pair's df are few)."""
    rng = np.random.default_rng(items)
    rates, totals = [], []
    for questions in prd_pairs():
        target = estimate(questions, range(len(questions))).estimate
        covered, total = 0, 0
        for _ in range(rounds):
            try:
                fit = estimate(questions, rng.integers(0, len(questions), items))
            except NoEstimate:
                continue  # the page shows no interval then
            covered += fit.low <= target <= fit.high
            total += 1
        rates.append(covered / total)
        totals.append(total)
    assert sum(totals) >= 0.97 * len(totals) * rounds  # a draw where one side won nearly everything: no estimate
    se = np.sqrt(0.95 * 0.05 / rounds)  # one pair's binomial standard error at the nominal level
    assert min(rates) >= 0.95 - 2 * se if rounds < 300 else min(rates) >= 0.92, rates
    assert 0.94 <= np.mean(rates) <= 0.99, rates
