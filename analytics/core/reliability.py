"""How reliable each rater is, from the labels alone: the one-coin Dawid-Skene model (each rater answers right with
their own probability, and wrong uniformly otherwise; Dawid & Skene 1979, the one-parameter form) fitted by EM with
Toloka's maintained ``crowd-kit`` (``crowdkit.aggregation.OneCoinDawidSkene``), and the answers it infers.

A rater's *reliability* is their agreement beyond chance (Cohen's kappa) with the answer the *other* raters of each
pair point to under the fitted model -- the pair's posterior without the rater's own vote (leave one out: with three
raters a pair, a rater's own vote would otherwise pull the "truth" their way) -- over the pairs that at least
``MIN_OTHERS`` other raters rated, and only for a rater with ``MIN_PAIRS`` such pairs (else "not enough overlap":
a pair only they rated says nothing about them). Both answers are read as the rater saw the pair (the output shown
first / second / no preference): in model coordinates (A / B) the answer is often nearly constant (a study fixes each
pair's first system, and one system is usually better), which leaves kappa no variance to measure; the display order
is random, so there both vary. 1 is a perfect rater, 0 one whose answers carry no information (a random clicker, or
one who always picks the same side), below 0 one who answers against the others. The model's own accuracy
(``skill``) is reported beside it but not used for the verdict: it calls a rater who always gives the commonest
answer accurate.

Measured on planted raters (three honest raters answering by Bradley-Terry probabilities, 300 pairs of three
systems, each pair's first system fixed as studies fix it) and not used:

- crowd-kit's full ``DawidSkene`` (a confusion matrix per rater): two spammers who always pick the weakest system
  agree perfectly with each other and it took them for the truth (the weakest system won every inferred pair);
- ``NoisyBradleyTerry`` (1.4.2): it did not recover the planted order (the weakest system second) nor separate the
  spammers (skills 0.57 and 0.70 against the honest raters' 0.61-0.72), with ``n_iter`` 100 or 1,000 and
  ``regularization_ratio`` 1e-5 or 1e-2;
- ``MACE`` took 20 s on 3,600 labels and gave every rater theta ~0.5; ``GLAD`` was right but took 12-16 s.

One-coin Dawid-Skene found both kinds of spammer (tests/analytics/core/test_reliability.py) in under a second.
The model and the report's use of it: docs/human-and-judge.md#rater-reliability.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import defaultdict
from collections.abc import Hashable, Iterable

import numpy as np
import numpy.typing as npt

from analytics.core.agreement import cohen_kappa

MIN_OTHERS = 2  # other raters a pair needs to score a rater on it
MIN_PAIRS = 10  # such pairs a rater needs for a reliability (Cohen's kappa between raters needs as many elsewhere)


@dataclasses.dataclass(frozen=True)
class Reliability:
    workers: list[str]
    # (n_workers,) agreement with the others' answer beyond chance; NaN: not enough overlap
    kappa: npt.NDArray[np.float64]
    skill: npt.NDArray[np.float64]  # (n_workers,) the model's probability that the worker answers right
    scored_pairs: npt.NDArray[np.int64]  # (n_workers,) the pairs the kappa is over
    labels: dict[Hashable, str]  # task -> the answer the model infers from every rater


def _seen(label: str, a_first: bool) -> str:
    """A model-coordinate answer ("a", "b", "tie") as the rater saw it: the output shown first or second."""
    if label not in ("a", "b"):
        return label
    return "first" if (label == "a") == a_first else "second"


def one_coin_dawid_skene(
    tasks: Iterable[Hashable],
    workers: Iterable[str],
    labels: Iterable[str],
    a_shown_first: Iterable[bool] | None = None,
    n_iter: int = 100,
    tol: float = 1e-5,
) -> Reliability:
    """Fit one-coin Dawid-Skene to (task, worker, label) triples (three sequences of one length n; labels in model
    coordinates, "a" / "b" / "tie") and return each worker's reliability (above: Cohen's kappa of their labels
    against the leave-one-out answer of the others, read in display coordinates with ``a_shown_first``, one bool per
    triple, None: as given; NaN without ``MIN_PAIRS`` pairs that ``MIN_OTHERS`` others rated; 0 where kappa is
    undefined because both are constant), the model's skill, how many pairs the kappa is over, and the answer the
    model infers for every task from everyone. Deterministic (EM from the majority vote)."""
    import pandas as pd
    from crowdkit.aggregation import OneCoinDawidSkene

    data = pd.DataFrame({"task": list(tasks), "worker": list(workers), "label": list(labels)})
    if data.empty:
        return Reliability([], np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64), {})
    with warnings.catch_warnings():  # crowd-kit 1.4.2 uses pandas keywords pandas 3 deprecates; results unchanged
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        model = OneCoinDawidSkene(n_iter=n_iter, tol=tol).fit(data)
    fitted_labels, priors = model.labels_, model.priors_
    assert fitted_labels is not None and priors is not None  # fit sets both (crowd-kit types them Optional)
    inferred = {task: str(label) for task, label in fitted_labels.items()}
    classes = [str(c) for c in priors.index]
    k = len(classes)
    column = {c: i for i, c in enumerate(classes)}
    skill = {w: min(max(float(v), 1e-6), 1 - 1e-6) for w, v in model.skills_.items()}
    # each vote's log-likelihood contribution to each class of its task (one-coin: right with the worker's skill,
    # else uniformly one of the k - 1 others); a task's sum over its votes, minus one vote, is the leave-one-out score
    vote = np.zeros((len(data), k))
    for i, (worker, label) in enumerate(zip(data["worker"], data["label"], strict=True)):
        wrong = np.log((1 - skill[worker]) / max(k - 1, 1))
        vote[i] = wrong
        vote[i, column[str(label)]] = np.log(skill[worker])
    task_ids = data["task"].tolist()
    total: defaultdict[Hashable, npt.NDArray[np.float64]] = defaultdict(
        lambda: np.log(np.asarray(priors.values, dtype=np.float64))
    )
    raters_of: defaultdict[Hashable, set[str]] = defaultdict(set)
    for i, task in enumerate(task_ids):
        total[task] = total[task] + vote[i]
        raters_of[task].add(data["worker"].iat[i])
    firsts = [True] * len(data) if a_shown_first is None else list(a_shown_first)
    given: dict[str, tuple[list[str], list[str], set[Hashable]]] = defaultdict(lambda: ([], [], set()))
    for i, (task, worker, label) in enumerate(zip(task_ids, data["worker"], data["label"], strict=True)):
        if len(raters_of[task] - {worker}) < MIN_OTHERS:
            continue
        others = classes[int(np.argmax(total[task] - vote[i]))]
        given[worker][0].append(_seen(str(label), firsts[i]))
        given[worker][1].append(_seen(others, firsts[i]))
        given[worker][2].add(task)
    names = sorted(set(data["worker"]))
    kappa = np.full(len(names), np.nan)
    scored = np.zeros(len(names), dtype=np.int64)
    for j, w in enumerate(names):
        mine, theirs, pairs = given.get(w, ([], [], set()))
        scored[j] = len(pairs)
        if len(pairs) >= MIN_PAIRS:
            value = cohen_kappa(mine, theirs)
            kappa[j] = 0.0 if value != value else value
    return Reliability(names, kappa, np.array([skill[w] for w in names]), scored, inferred)


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
