"""Coverage and realised efficiency of every estimate of a win rate the product shows, on real data: the PRD
Vicuna-80 human votes with five LLM judges (../shared/data/prd_vicuna80_human) and, for people alone, the MTurk
ratings of the separability study (../shared/data/separability_human_study).

The setting is the one an independent check of issue 25 used. Each of PRD's 10 system pairs has ~80 questions with
a human score Y (the votes' mean for the pair's first system) and the judges' scores f; these 80 stand for the
population the questions come from (*items like these*). A study is 64 questions drawn from them at random (with
replacement), of which people label n by the design under test, and the target is the mean of Y over the 80. For
the *these items* target, the study is the 80 questions themselves and the target their mean.

For each estimator and n = 10, 20, 40:
- coverage of its 95 % interval, averaged over the pairs, at least 0.92 at n = 10 and 0.93 at n = 20 and 40 (and no
  pair below that by more than 0.05);
- the efficiency it claims (``MeanEstimate.efficiency``: labels of people alone one of its labels is worth),
  averaged over the draws, within 10 % of the realised efficiency: the mean squared error people alone have with
  n labels drawn at random (exactly sigma^2 / n, or (1 - n / N) S^2 / n for these items) over the estimator's mean
  squared error in the simulation.
"""

from __future__ import annotations

import csv
from collections import defaultdict

import numpy as np
import pytest

from analytics.core import ppi
from bench.prd_data import PRD, load
from selection.core.sampling import active_inclusion, judge_disagreement, judge_stratified_selection, systematic_pps
from tests.analytics.conftest import SHARED

SIZES = (10, 20, 40)
FLOOR = {10: 0.92, 20: 0.93, 40: 0.93}
POOL = 64
ROUNDS = 200  # per pair and n: 2,000 draws per estimator and n


@pytest.fixture(scope="module")
def prd():
    if not (PRD / "ratings-gpt4").is_dir():
        pytest.skip(f"{PRD} has no judge verdicts: the real data lives in ../shared/data (see its README)")
    return load()


def _check(name: str, n: int, per_pair: list[tuple[float, float, float, float]]) -> None:
    """per pair: (coverage, the estimator's mean squared error, people alone's exact mean squared error, mean
    claimed efficiency)."""
    coverage = np.array([p[0] for p in per_pair])
    realised = sum(p[2] for p in per_pair) / sum(p[1] for p in per_pair)
    claimed = float(np.mean([p[3] for p in per_pair]))
    assert coverage.mean() >= FLOOR[n], f"{name} at n = {n}: coverage {coverage.mean():.3f}"
    assert coverage.min() >= FLOOR[n] - 0.05, f"{name} at n = {n}: a pair covers {coverage.min():.3f}"
    assert abs(claimed / realised - 1) <= 0.10, f"{name} at n = {n}: claims {claimed:.3f}, delivers {realised:.3f}"


def _summary(estimates: list[ppi.MeanEstimate], truth: float, reference_mse: float) -> tuple:
    values = np.array([(e.estimate, e.low, e.high, e.efficiency) for e in estimates])
    covered = np.mean((values[:, 1] <= truth + 1e-12) & (truth - 1e-12 <= values[:, 2]))
    return float(covered), float(np.mean((values[:, 0] - truth) ** 2)), reference_mse, float(values[:, 3].mean())


ESTIMATORS = ("people", "people + gpt4", "people + all judges", "judge-disagreement design",
              "judges' strata, proportional", "judges' strata, Neyman")


def _items_like_these(pair, n: int, rng: np.random.Generator) -> dict[str, list[ppi.MeanEstimate]]:
    out: dict[str, list[ppi.MeanEstimate]] = defaultdict(list)
    size = len(pair.y)
    for _ in range(ROUNDS):
        index = rng.integers(0, size, POOL)
        y, f4, f_all, verdicts = pair.y[index], pair.f["gpt4"][index], pair.f_all[index], pair.verdicts[index]
        labelled = np.zeros(POOL, dtype=bool)
        labelled[:n] = True  # the pool is in random order: its first n are a uniform sample
        out["people"].append(ppi.classical_mean(y[labelled]))
        out["people + gpt4"].append(ppi.ppi_mean(y[labelled], f4[labelled], f4[~labelled]))
        out["people + all judges"].append(ppi.ppi_mean(y[labelled], f_all[labelled], f_all[~labelled]))
        pi = active_inclusion(judge_disagreement(verdicts), n, 0.5)
        drawn = np.zeros(POOL, dtype=bool)
        drawn[systematic_pps(pi, rng)] = True
        out["judge-disagreement design"].append(ppi.active_mean(np.where(drawn, y, np.nan), f_all, pi, drawn))
        for name, neyman in (("judges' strata, proportional", False), ("judges' strata, Neyman", True)):
            chosen, strata, _ = judge_stratified_selection(f_all, n, rng, neyman=neyman)
            drawn = np.zeros(POOL, dtype=bool)
            drawn[chosen] = True
            out[name].append(ppi.stratified_mean(np.where(drawn, y, np.nan), strata, drawn))
    return out


@pytest.mark.parametrize("n", SIZES)
def test_every_estimate_covers_items_like_these_and_claims_what_it_delivers(prd, n):
    rng = np.random.default_rng([25, n])
    results: dict[str, list[tuple]] = defaultdict(list)
    for pair in prd:
        truth, sigma2 = float(pair.y.mean()), float(np.var(pair.y))
        for name, estimates in _items_like_these(pair, n, rng).items():
            assert all(e.target == ppi.ITEMS_LIKE_THESE for e in estimates)
            results[name].append(_summary(estimates, truth, sigma2 / n))
    assert set(results) == set(ESTIMATORS)
    for name, per_pair in results.items():
        _check(name, n, per_pair)


@pytest.mark.parametrize("n", SIZES)
def test_every_estimate_covers_these_items_with_the_finite_population_correction(prd, n):
    rng = np.random.default_rng([26, n])
    results: dict[str, list[tuple]] = defaultdict(list)
    for pair in prd:
        y, f4, f_all = pair.y, pair.f["gpt4"], pair.f_all
        size = len(y)
        truth, reference = float(y.mean()), (1 - n / size) * float(np.var(y, ddof=1)) / n
        pi = active_inclusion(judge_disagreement(pair.verdicts), n, 0.5)
        found: dict[str, list[ppi.MeanEstimate]] = defaultdict(list)
        for _ in range(ROUNDS // 2):
            labelled = np.zeros(size, dtype=bool)
            labelled[rng.choice(size, n, replace=False)] = True
            found["people"].append(ppi.classical_mean(y[labelled], population_size=size))
            found["people + gpt4"].append(ppi.ppi_mean(y[labelled], f4[labelled], f4[~labelled], finite=True))
            found["people + all judges"].append(ppi.ppi_mean(y[labelled], f_all[labelled], f_all[~labelled],
                                                             finite=True))
            drawn = np.zeros(size, dtype=bool)
            drawn[systematic_pps(pi, rng)] = True
            found["judge-disagreement design"].append(ppi.active_mean(np.where(drawn, y, np.nan), f_all, pi, drawn,
                                                                      finite=True))
            for name, neyman in (("judges' strata, proportional", False), ("judges' strata, Neyman", True)):
                chosen, strata, _ = judge_stratified_selection(f_all, n, rng, neyman=neyman)
                drawn = np.zeros(size, dtype=bool)
                drawn[chosen] = True
                found[name].append(ppi.stratified_mean(np.where(drawn, y, np.nan), strata, drawn, finite=True))
        for name, estimates in found.items():
            assert all(e.target == ppi.THESE_ITEMS for e in estimates)
            results[name].append(_summary(estimates, truth, reference))
    assert set(results) == set(ESTIMATORS)
    for name, per_pair in results.items():
        _check(name, n, per_pair)


def test_the_judges_are_weak_predictors_of_the_human_votes_on_prd(prd):
    """Why a judge is worth little here: per question, gpt4's mean verdict correlates with the human vote mean at
    about 0.27 on average over the pairs (0.08 for vicuna-13b), the figure bench/README.md reports."""
    def correlation(judge):
        return np.mean([np.corrcoef(p.y, p.f[judge])[0, 1] for p in prd])

    assert len(prd) == 10 and all(len(p.y) == 80 for p in prd)
    assert correlation("gpt4") == pytest.approx(0.27, abs=0.03)
    assert correlation("vicuna-13b") == pytest.approx(0.08, abs=0.03)


def test_the_bradley_terry_strengths_from_people_and_a_judge_cover_and_claim_what_they_deliver(prd):
    """The report's strengths section: n questions of every pair labelled, the judge on the rest of a 64-question
    study per pair; the four non-reference strengths against the fit on all 80 questions per pair."""
    index = {m: i for i, m in enumerate(sorted({s for p in prd for s in p.pair}))}
    a = np.concatenate([[index[p.pair[0]]] * len(p.y) for p in prd])
    b = np.concatenate([[index[p.pair[1]]] * len(p.y) for p in prd])
    y_all = np.concatenate([p.y for p in prd])
    truth = ppi.ppi_bradley_terry(a, b, y_all, y_all, a[:1], b[:1], y_all[:1], len(index), lam=0.0).theta
    rng = np.random.default_rng(27)
    for n in (10, 20):
        covered = cells = 0
        errors, errors_people, claims = [], [], []
        for _ in range(60):
            la, lb, ly, lf, ua, ub, uf = ([] for _ in range(7))
            for p in prd:
                pick = rng.integers(0, len(p.y), POOL)
                y, f = p.y[pick], p.f["gpt4"][pick]
                la += [index[p.pair[0]]] * n
                lb += [index[p.pair[1]]] * n
                ua += [index[p.pair[0]]] * (POOL - n)
                ub += [index[p.pair[1]]] * (POOL - n)
                ly += list(y[:n])
                lf += list(f[:n])
                uf += list(f[n:])
            args = [np.array(v) for v in (la, lb, ly, lf, ua, ub, uf)] + [len(index)]
            hybrid, people = ppi.ppi_bradley_terry(*args), ppi.ppi_bradley_terry(*args, lam=0.0)
            covered += int(np.sum((hybrid.low[1:] <= truth[1:]) & (truth[1:] <= hybrid.high[1:])))
            cells += len(index) - 1
            errors.append((hybrid.theta[1:] - truth[1:]) ** 2)
            errors_people.append((people.theta[1:] - truth[1:]) ** 2)
            claims.append(np.mean(((people.high - people.low)[1:] / (hybrid.high - hybrid.low)[1:]) ** 2))
        realised = np.sum(errors_people) / np.sum(errors)
        assert covered / cells >= FLOOR[n]
        assert abs(np.mean(claims) / realised - 1) <= 0.10


@pytest.fixture(scope="module")
def mturk():
    path = SHARED / "separability_human_study" / "human_ratings_long.csv"
    if not path.exists():
        pytest.skip(f"{path} is missing: the real data lives in ../shared/data (see its README)")
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    with path.open() as handle:
        for row in csv.DictReader(handle):
            # pref_model: -1 model A preferred, 0 none, +1 model B: model A's score 1, 1/2, 0
            scores[(row["file"], row["instance"])].append((1 - int(row["pref_model"])) / 2)
    by_file: dict[str, list[float]] = defaultdict(list)
    for (file, _), values in sorted(scores.items()):
        by_file[file].append(float(np.mean(values)))
    return [np.array(v) for _, v in sorted(by_file.items())]


@pytest.mark.parametrize("n", SIZES)
def test_people_alone_cover_on_the_mturk_ratings(mturk, n):
    """The separability study's 4 configurations, 50 instances each (an instance's score: model A's mean over its
    15 judgments by 3 workers); n instances drawn at random from the 50, the target their mean."""
    rng = np.random.default_rng([28, n])
    per_config = []
    for y in mturk:
        assert len(y) == 50
        estimates = [ppi.classical_mean(y[rng.integers(0, len(y), n)]) for _ in range(1000)]
        per_config.append(_summary(estimates, float(y.mean()), float(np.var(y)) / n))
    _check("people (MTurk)", n, per_config)
