"""How reliable each rater is, from the labels alone: the one-coin Dawid-Skene model (each rater answers right with
their own probability, and wrong uniformly otherwise; Dawid & Skene 1979, the one-parameter form) fitted by EM with
Toloka's maintained ``crowd-kit`` (``crowdkit.aggregation.OneCoinDawidSkene``), and the answers it infers.

A rater's *reliability* is their agreement with the inferred answers beyond chance, Cohen's kappa over the pairs
they rated, both answers read as the rater saw them (the output shown first / second / no preference): 1 a perfect
rater, 0 one whose answers carry no information (a random clicker, or one who always picks the same side), below 0
one who answers against the others. Read in model coordinates (A / B) the inferred answer is often nearly constant
(a study fixes each pair's first system, and one system is usually better), which leaves kappa no variance to
measure; the display order is random, so there both answers vary. The model's own accuracy (``skill``) is reported
beside it but not used for the verdict: it calls a rater who always gives the commonest answer accurate.

Measured on planted raters (three honest raters answering by Bradley-Terry probabilities, 300 pairs of three
systems, each pair's first system fixed as studies fix it) and not used:

- crowd-kit's full ``DawidSkene`` (a confusion matrix per rater): two spammers who always pick the weakest system
  agree perfectly with each other and it took them for the truth (the weakest system won every inferred pair);
- ``NoisyBradleyTerry`` (1.4.2): it did not recover the planted order (the weakest system second) nor separate the
  spammers (skills 0.57 and 0.70 against the honest raters' 0.61-0.72), with ``n_iter`` 100 or 1,000 and
  ``regularization_ratio`` 1e-5 or 1e-2;
- ``MACE`` took 20 s on 3,600 labels and gave every rater theta ~0.5; ``GLAD`` was right but took 12-16 s.

One-coin Dawid-Skene found both kinds of spammer (tests/analytics/core/test_reliability.py) in under a second.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import defaultdict

import numpy as np

from analytics.core.agreement import cohen_kappa


@dataclasses.dataclass(frozen=True)
class Reliability:
    workers: list[str]
    kappa: np.ndarray  # (n_workers,) agreement with the inferred answers beyond chance
    skill: np.ndarray  # (n_workers,) the model's probability that the worker answers right
    labels: dict  # task -> the answer the model infers


def _seen(label: str, a_first: bool) -> str:
    """A model-coordinate answer ("a", "b", "tie") as the rater saw it: the output shown first or second."""
    if label not in ("a", "b"):
        return label
    return "first" if (label == "a") == a_first else "second"


def one_coin_dawid_skene(tasks, workers, labels, a_shown_first=None, n_iter: int = 100,
                         tol: float = 1e-5) -> Reliability:
    """Fit one-coin Dawid-Skene to (task, worker, label) triples (three sequences of one length n; labels in model
    coordinates, "a" / "b" / "tie") and return each worker's reliability (Cohen's kappa of their labels against
    the inferred ones over their tasks, both read in display coordinates with ``a_shown_first`` (one bool per
    triple; None: as given); 0 where it is undefined, i.e. both constant), the model's skill, and the inferred
    label of every task. Deterministic (EM from the majority vote)."""
    import pandas as pd
    from crowdkit.aggregation import OneCoinDawidSkene

    data = pd.DataFrame({"task": list(tasks), "worker": list(workers), "label": list(labels)})
    if data.empty:
        return Reliability([], np.zeros(0), np.zeros(0), {})
    with warnings.catch_warnings():  # crowd-kit 1.4.2 uses pandas keywords pandas 3 deprecates; results unchanged
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        model = OneCoinDawidSkene(n_iter=n_iter, tol=tol).fit(data)
    inferred = {task: str(label) for task, label in model.labels_.items()}
    firsts = [True] * len(data) if a_shown_first is None else list(a_shown_first)
    given: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for task, worker, label, a_first in zip(data["task"], data["worker"], data["label"], firsts, strict=True):
        given[worker][0].append(_seen(str(label), a_first))
        given[worker][1].append(_seen(inferred[task], a_first))
    names = sorted(given)
    kappa = np.array([cohen_kappa(*given[w]) for w in names])
    skill = np.array([float(model.skills_[w]) for w in names])
    return Reliability(names, np.nan_to_num(kappa, nan=0.0), skill, inferred)


def words(kappa: float) -> str:
    """A rater's reliability in words (Landis & Koch's bands for kappa)."""
    if kappa < 0:
        return "answers against the others"
    if kappa < 0.2:
        return "answers carry almost no information"
    if kappa < 0.4:
        return "fair"
    if kappa < 0.6:
        return "moderate"
    if kappa < 0.8:
        return "substantial"
    return "almost perfect"
