"""Rater reliability by one-coin Dawid-Skene (crowd-kit): planted spammers are found, and the answers it infers
restore a ranking the spammers turned over (docs/human-and-judge.md#rater-reliability)."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.core import agreement, reliability

SYSTEMS = {"x": 1.5, "y": 0.0, "z": -1.5}  # Bradley-Terry strengths: x beats y, and y beats z, 82 % of the time


def planted(spam: str, seed: int = 7, pairs: int = 300):
    """Three honest raters answer by the Bradley-Terry probabilities, each pair's first system fixed (as a study's
    comparison fixes it) and each judgment's display order random. ``spam`` "z": two spammers always pick z when it
    is shown (a coin otherwise) -- they agree with each other perfectly; "click": one always picks the output shown
    first, one flips a coin. Rows: (task, worker, label in model coordinates, A shown first)."""
    rng = np.random.default_rng(seed)
    shown, rows = {}, []
    for t in range(pairs):
        a, b = sorted(rng.choice(list(SYSTEMS), 2, replace=False))
        shown[t] = (a, b)
        p_a = 1 / (1 + np.exp(-(SYSTEMS[a] - SYSTEMS[b])))
        for w in range(3):
            rows.append((t, f"honest-{w}", "a" if rng.random() < p_a else "b", bool(rng.random() < 0.5)))
        if spam == "z":
            rows += [
                (
                    t,
                    f"spammer-{w}",
                    ("a" if a == "z" else "b") if "z" in (a, b) else str(rng.choice(["a", "b"])),
                    bool(rng.random() < 0.5),
                )
                for w in range(2)
            ]
        else:
            a_first = bool(rng.random() < 0.5)
            rows += [
                (t, "clicker", "a" if a_first else "b", a_first),
                (t, "coin", str(rng.choice(["a", "b"])), bool(rng.random() < 0.5)),
            ]
    return shown, rows


def win_rates(shown, labelled) -> dict[str, float]:
    """Each system's share of the battles it was in that it won."""
    won = {s: 0 for s in SYSTEMS}
    played = {s: 0 for s in SYSTEMS}
    for t, label in labelled:
        a, b = shown[t]
        won[a if label == "a" else b] += 1
        played[a] += 1
        played[b] += 1
    return {s: won[s] / played[s] for s in SYSTEMS}


def test_colluding_spammers_are_found_and_the_inferred_answers_restore_the_order():
    shown, rows = planted("z")
    fit = reliability.one_coin_dawid_skene(*zip(*rows, strict=True))
    kappa = dict(zip(fit.workers, fit.kappa, strict=True))
    assert all(kappa[f"honest-{w}"] >= 0.4 for w in range(3))
    assert all(kappa[f"spammer-{w}"] < 0.2 for w in range(2))
    every = win_rates(shown, [(t, label) for t, _, label, _ in rows])  # every judgment a battle, as the plain board
    assert every["z"] > every["y"]  # the spammers turned y and z over
    inferred = win_rates(shown, fit.labels.items())  # one battle per pair, the answer the model infers
    assert inferred["x"] > inferred["y"] > inferred["z"]


def test_a_clicker_and_a_coin_carry_no_information():
    shown, rows = planted("click", seed=3)
    fit = reliability.one_coin_dawid_skene(*zip(*rows, strict=True))
    kappa = dict(zip(fit.workers, fit.kappa, strict=True))
    # always the first shown: p_o = the inferred share of 'first' = the chance agreement p_e, so kappa = 0 exactly
    assert kappa["clicker"] == pytest.approx(0, abs=1e-12)
    assert kappa["coin"] < 0.2 and all(kappa[f"honest-{w}"] >= 0.4 for w in range(3))

    # reliability is Cohen's kappa of the rater's answers against the inferred ones, over the rater's pairs
    def seen(label, a_first):  # as the rater saw it
        return label if label == "tie" else ("first" if (label == "a") == a_first else "second")

    honest = [(t, label, a_first) for t, w, label, a_first in rows if w == "honest-0"]
    assert kappa["honest-0"] == pytest.approx(
        agreement.cohen_kappa([seen(lbl, f) for _, lbl, f in honest], [seen(fit.labels[t], f) for t, _, f in honest])
    )


def test_no_labels_no_fit():
    fit = reliability.one_coin_dawid_skene([], [], [])
    assert fit.workers == [] and fit.labels == {}


def three_raters_a_pair(seed: int = 0, pairs: int = 400, sparse: bool = False):
    """Six honest raters (right 80 % of the time on a balanced truth: kappa 0.6 against it) and one clicker who
    always picks the output shown first, three of them drawn for each pair (the MTurk design); ``sparse``: only one
    pair in ten gets three raters, the others one."""
    rng = np.random.default_rng(seed)
    workers = [f"honest-{i}" for i in range(6)] + ["clicker"]
    rows = []
    for t in range(pairs):
        truth = str(rng.choice(["a", "b"]))
        n = 3 if not sparse or t % 10 == 0 else 1
        for w in rng.choice(workers, n, replace=False):
            a_first = bool(rng.random() < 0.5)
            if w == "clicker":
                label = "a" if a_first else "b"
            else:
                label = truth if rng.random() < 0.8 else ("b" if truth == "a" else "a")
            rows.append((t, str(w), label, a_first))
    return rows


def test_with_three_raters_a_pair_a_rater_is_scored_against_the_other_two():
    """Leave one out: scored against the answer the other raters point to, an honest rater is not inflated by their
    own vote (against the truth their kappa is 0.6; against two noisy others it can only be lower), and the clicker
    stays near 0."""
    fit = reliability.one_coin_dawid_skene(*zip(*three_raters_a_pair(), strict=True))
    kappa = dict(zip(fit.workers, fit.kappa, strict=True))
    assert abs(kappa["clicker"]) < 0.1
    assert all(0.3 < kappa[f"honest-{i}"] <= 0.6 for i in range(6))
    assert all(n >= reliability.MIN_PAIRS for n in fit.scored_pairs)


def test_without_overlap_there_is_no_reliability():
    """One pair in ten has three raters: about five pairs each, fewer than MIN_PAIRS -- 'not enough overlap' (NaN),
    never a number from pairs only the rater saw."""
    fit = reliability.one_coin_dawid_skene(*zip(*three_raters_a_pair(sparse=True, pairs=120), strict=True))
    assert all(n < reliability.MIN_PAIRS for n in fit.scored_pairs)
    assert np.isnan(fit.kappa).all()
