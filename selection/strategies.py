"""Selection strategies: which items of one system pair are sent to raters, and in which order.

The assignment builder (``annotation.plan.planning.do_rebuild_plan``) and the ``select`` command ask a
strategy for each system pair through a ``SelectionContext``; strategies look only at what they need
(difference vectors, separability) and that is computed lazily, once. New strategies register in
``STRATEGIES`` and plug in without touching the builder. The numerics live in ``selection.core``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np

from selection.core import sampling
from selection.core.diffuse import Dendrogram, static_clusters, ward_tree
from selection.core.separability import DEFAULT_METRIC

DEFAULT_PARAMS: dict[str, Any] = {
    "metric": DEFAULT_METRIC,
    "threshold": 0.2,
    "T": 0.4,
    "alpha": 2.0,
    "beta": 6.0,
    "bins": 4,
    "uniform_share": 0.5,
}
# Which stored selection setting (selection.models.SelectionSettings) feeds which strategy parameter.
SETTING_OF_PARAM = {
    "metric": "separability_metric",
    "threshold": "separability_threshold",
    "T": "sep_threshold_t",
    "alpha": "sep_alpha",
    "beta": "sep_beta",
}


def strategy_parameters(study: Any, **overrides: Any) -> dict[str, Any]:
    """The one mapping from a study's stored settings to strategy parameters, used by the plan, ``select``
    and ``simulate``; ``overrides`` (for example a command's ``--metric``) replace a setting when not None."""
    stored = study.selection_settings
    params = {param: getattr(stored, setting) for param, setting in SETTING_OF_PARAM.items()}
    params.update({k: v for k, v in overrides.items() if v is not None})
    unknown = set(params) - set(DEFAULT_PARAMS)
    if unknown:
        raise ValueError(f"unknown strategy parameters {sorted(unknown)}")
    return params


ITERATIVE_BUDGET = 200  # Algorithm 1's budget b without a study's own (docs/diffuse.md#iterative-diffuse-algorithm-1)


def iterative_parameters(study: Any, **overrides: Any) -> dict[str, Any]:
    """The one mapping from a study's stored settings to Algorithm 1's parameters (iterative DiffUse: risk p,
    minimum n, budget b, whether ties count in n), used by the live loop and ``simulate``; ``overrides``
    (a command's ``--risk`` ...) replace a setting when not None."""
    stored = study.selection_settings
    params = {
        "risk": stored.risk,
        "min_n": stored.min_n,
        "budget": stored.budget or ITERATIVE_BUDGET,
        "ties_count_in_n": stored.stopping_ties_in_n,
    }
    params.update({k: v for k, v in overrides.items() if v is not None})
    unknown = set(params) - {"risk", "min_n", "budget", "ties_count_in_n"}
    if unknown:
        raise ValueError(f"unknown iterative parameters {sorted(unknown)}")
    return params


@dataclasses.dataclass
class SelectionContext:
    """One system pair's candidates. ``vectors`` and ``deltas`` are loaders called on first use, so a
    strategy that needs neither (random) touches no encoder."""

    n: int
    load_vectors: Callable[[], np.ndarray] | None = None
    load_deltas: Callable[[str], np.ndarray] | None = None
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    load_tree: Callable[[np.ndarray], Dendrogram] | None = None
    # The LLM judges' verdicts on each candidate: one row per item, one column per verdict (a judge in one
    # presentation order), each the verdict's score for the pair's first system (1, 1/2, 0), NaN-padded.
    load_judges: Callable[[], np.ndarray] | None = None
    # What a strategy reports about its choice, stored with the run (DiffUse: each representative's cluster
    # size, aligned with the chosen items).
    notes: dict[str, Any] = dataclasses.field(default_factory=dict)

    def param(self, name: str) -> Any:
        return self.params.get(name, DEFAULT_PARAMS.get(name))

    @cached_property
    def vectors(self) -> np.ndarray:
        if self.load_vectors is None:
            raise ValueError("this strategy needs difference vectors, and none can be computed here")
        return self.load_vectors()

    @cached_property
    def tree(self) -> Dendrogram:
        return self.load_tree(self.vectors) if self.load_tree else ward_tree(self.vectors)

    @cached_property
    def judges(self) -> np.ndarray:
        scores = None if self.load_judges is None else np.asarray(self.load_judges(), dtype=np.float64)
        if scores is None or scores.size == 0 or np.isnan(scores).all():
            raise ValueError(
                "no LLM judge has judged these items: run a judge with 'Pairs to judge' set to every item "
                "of every system pair (the study's LLM judges page), or import a judge's verdicts, "
                "before selecting by the judges' disagreement"
            )
        return scores

    @cached_property
    def deltas(self) -> np.ndarray:
        if self.load_deltas is None:
            raise ValueError("this strategy needs separability, and none can be computed here")
        deltas = np.asarray(self.load_deltas(self.param("metric")), dtype=np.float64)
        if np.isnan(deltas).all():
            raise ValueError("separability is undefined for every item (each system needs K >= 2 samples)")
        return deltas


# What kind of sample a strategy draws (selection.services.SampleDesign reads it): a probability sample whose
# every item's chance is known -- equal ("uniform"), unequal and stored ("weighted"), or fixed per stratum and stored
# with the strata ("stratified") -- or items chosen on purpose ("purposive"), for which a mean over the labelled
# items describes those items and estimates nothing beyond them.
UNIFORM, WEIGHTED, STRATIFIED, PURPOSIVE = "uniform", "weighted", "stratified", "purposive"


@dataclasses.dataclass(frozen=True)
class Strategy:
    name: str
    label: str
    help: str
    select_fn: Callable[[SelectionContext, int, np.random.Generator], np.ndarray]
    uses_separability: bool = False
    design: str = UNIFORM
    # purposive designs: why the items people judge say nothing about the rest, in a person's words
    purposive_reason: str = ""
    # it reads the outputs' embeddings (difference vectors): the plan embeds the study first, in the background
    uses_vectors: bool = False
    # A sampling strategy that is asked for every item selects every item: release them in random
    # order without computing anything (no encoder for a study that sends all its items to raters).
    takes_all_at_random: bool = False
    # A live strategy releases items while judgments come in (selection.live), so it has no static choice.
    live: bool = False
    # it keeps only the items whose separability reaches the study's threshold (that setting applies)
    uses_threshold: bool = False

    def select(self, context: SelectionContext, budget: int | None, rng: np.random.Generator) -> list[int]:
        """Chosen candidate indices in release order (every candidate, in random order, without a budget
        for strategies that rank rather than cut)."""
        if self.live:
            raise ValueError(
                f"{self.name} releases items as judgments come in: make it the study's selection "
                "method (settings, or select --apply) instead of running it once"
            )
        budget = context.n if budget is None else min(budget, context.n)
        if context.n == 0 or budget == 0:
            return []
        if context.n == 1:
            return [0]
        if budget >= context.n and self.takes_all_at_random:
            return [int(i) for i in rng.permutation(context.n)]
        return [int(i) for i in self.select_fn(context, budget, rng)]


def _eligible(context: SelectionContext) -> np.ndarray:
    """Items whose separability reaches the threshold (undefined separability never does)."""
    deltas = context.deltas
    return np.flatnonzero(np.nan_to_num(deltas, nan=-np.inf) >= context.param("threshold"))


def _within(context: SelectionContext, index: np.ndarray, budget: int, rng, how: str) -> np.ndarray:
    if index.size == 0:
        raise ValueError(f"no item has separability >= {context.param('threshold')}; lower the threshold")
    if index.size <= budget:
        return rng.permutation(index)
    sub = SelectionContext(index.size, lambda: context.vectors[index], None, context.params)
    if how == "diffuse":
        return index[_diffuse(sub, min(budget, index.size), context.notes)]
    return index[sampling.random_selection(index.size, budget, rng)]


def _diffuse(context: SelectionContext, budget: int, notes: dict | None = None) -> np.ndarray:
    """Static DiffUse: one representative per cluster; each cluster's size goes into the run's notes."""
    clusters = static_clusters(context.tree, budget)
    (context.notes if notes is None else notes)["cluster_sizes"] = [size for _, size in clusters]
    return np.array([rep for rep, _ in clusters], dtype=np.int64)


def _weighted(context: SelectionContext, budget: int, rng) -> np.ndarray:
    """Items drawn with probability proportional to the sep-ELO logistic of their separability (an item without
    separability takes the weight of 0), by systematic sampling, so each item's inclusion probability is known
    exactly and stored (aligned with the chosen items) for the report's weighted estimate."""
    weights = sampling.separability_weight(
        np.nan_to_num(context.deltas, nan=0.0), context.param("T"), context.param("alpha"), context.param("beta")
    )
    pi = sampling.inclusion_probabilities(weights, budget)
    chosen = sampling.systematic_pps(pi, rng)
    context.notes["inclusion"] = [float(p) for p in pi[chosen]]
    return chosen


def _value_stratified(context: SelectionContext, budget: int, rng) -> np.ndarray:
    """Equal counts from each separability bin: a stratified sample over the items with a separability, each bin's
    items drawn uniformly, so an item's chance is its bin's count over its bin's size (stored with the bins)."""
    defined = np.flatnonzero(~np.isnan(context.deltas))
    values = context.deltas[defined]
    chosen = sampling.value_stratified_selection(values, budget, rng, context.param("bins"))
    bins = sampling.value_bins(values, context.param("bins"))
    sizes = np.bincount(bins, minlength=int(context.param("bins")))
    counts = np.bincount(bins[chosen], minlength=sizes.size)
    _stratified_notes(context, defined, bins, (counts / np.maximum(sizes, 1))[bins[chosen]])
    return defined[chosen]


def _stratified_notes(context: SelectionContext, frame: np.ndarray, strata: np.ndarray, inclusion) -> None:
    """A stratified design's record: the items it drew from (candidate indices), each one's stratum, and the chosen
    items' inclusion probabilities (aligned with the chosen items)."""
    context.notes["frame"] = [int(i) for i in frame]
    context.notes["strata"] = [int(h) for h in strata]
    context.notes["inclusion"] = [float(p) for p in inclusion]


def _judge_stratified(neyman: bool):
    def select(context: SelectionContext, budget: int, rng) -> np.ndarray:
        """Stratified sampling over bands of the judges' mean score (proportional or defensive Neyman allocation,
        ``sampling.judge_stratified_selection``); the bands and chances are stored with the run."""
        scores = context.judges
        counts = np.sum(~np.isnan(scores), axis=1)
        f = np.where(counts > 0, np.nansum(scores, axis=1) / np.maximum(counts, 1), 0.5)
        chosen, strata, pi = sampling.judge_stratified_selection(f, budget, rng, neyman=neyman)
        _stratified_notes(context, np.arange(context.n), strata, pi[chosen])
        return chosen

    return select


def _stratified(context: SelectionContext, budget: int, rng) -> np.ndarray:
    """Cluster-stratified sampling over the items whose two outputs differ at all: an item whose
    outputs are identical (zero difference vector) can only be judged a tie, so judging it is wasted."""
    distinct = np.flatnonzero(np.linalg.norm(context.vectors, axis=1) > IDENTICAL)
    if distinct.size < 2:
        return sampling.random_selection(context.n, budget, rng)
    if distinct.size < context.n:  # the items a sample of this design stands for
        context.notes["frame"] = [int(i) for i in distinct]
    sub = SelectionContext(distinct.size, lambda: context.vectors[distinct], None, context.params)
    return distinct[sampling.cluster_stratified_selection(sub.tree, min(budget, distinct.size), rng)]


def _judge_disagreement(context: SelectionContext, budget: int, rng) -> np.ndarray:
    """Items drawn with probability growing with the judges' disagreement (a floor of ``uniform_share`` kept
    for every item), by systematic sampling, so each item's inclusion probability is known exactly; they go into
    the run's notes (aligned with the chosen items) for the report's weighted estimate. Released in random order,
    so a study stopped part-way has a random part of the sample labelled. With fewer than three verdicts on the
    typical item the disagreement is too coarse to pay (``sampling.too_few_verdicts``): every item gets the same
    chance, and the notes say why (``COARSE_DISAGREEMENT``)."""
    scores = context.judges
    pi = sampling.disagreement_inclusion(scores, budget, context.param("uniform_share"))
    chosen = sampling.systematic_pps(pi, rng)
    context.notes["inclusion"] = [float(p) for p in pi[chosen]]
    if sampling.too_few_verdicts(scores):
        context.notes["uniform_because"] = COARSE_DISAGREEMENT
    return chosen


COARSE_DISAGREEMENT = (
    "every item had the same chance: the LLM judges gave fewer than three verdicts on most items, and two verdicts "
    "only say whether they agree, too coarse for sending people where they disagree to pay (on real data it cost "
    "17-27 % of the precision of a uniform sample); judge every item with more judges, or in both orders, to use it"
)


IDENTICAL = 1e-6  # difference-vector norm below which two outputs embed identically

STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy(
            "random",
            "Random",
            "Items uniformly at random: the honest baseline.",
            lambda c, b, rng: sampling.random_selection(c.n, b, rng),
            takes_all_at_random=True,
        ),
        Strategy(
            "stratified",
            "Cluster-stratified (recommended)",
            "Random items spread over clusters of how the two systems' outputs differ, in proportion to "
            "cluster size, skipping items whose two outputs are identical: unbiased like random. On real data "
            "(AlpacaEval-1) it was within a point of random on average, not measurably better, and a few points "
            "behind on some pairs.",
            _stratified,
            takes_all_at_random=True,
            uses_vectors=True,
        ),
        Strategy(
            "diffuse",
            "DiffUse (static)",
            "One representative per cluster of output differences (Ashury-Tahan et al.). Can over-weight rare, "
            "very different outputs; compare it with random in a simulation first.",
            lambda c, b, rng: _diffuse(c, b),
            design=PURPOSIVE,
            uses_vectors=True,
            purposive_reason="DiffUse picked one representative per cluster of output differences on purpose, so "
            "each judged item stands for a cluster of a different size and the rest had no known chance",
        ),
        Strategy(
            "separability-weighted",
            "Separability-weighted",
            "Random items with probability growing with separability (the sep-ELO logistic); each item's chance "
            "is known, so the report weights each judged item by it.",
            _weighted,
            True,
            design=WEIGHTED,
        ),
        Strategy(
            "separability-stratified",
            "Separability-stratified",
            "Equal numbers of items from each of 4 equal-width separability bins; each bin's share is known, so "
            "the report weights the bins by their sizes.",
            _value_stratified,
            True,
            design=STRATIFIED,
        ),
        Strategy(
            "separability-threshold",
            "Separability threshold",
            "Random items among those whose outputs are distinguishable (delta >= threshold).",
            lambda c, b, rng: _within(c, _eligible(c), b, rng, "random"),
            True,
            design=PURPOSIVE,
            uses_threshold=True,
            purposive_reason="items below the separability threshold could never be drawn, so the judged items "
            "stand for the separable items only",
        ),
        Strategy(
            "diffuse-threshold",
            "DiffUse within the separable items",
            "DiffUse over the items whose separability reaches the threshold.",
            lambda c, b, rng: _within(c, _eligible(c), b, rng, "diffuse"),
            True,
            design=PURPOSIVE,
            uses_vectors=True,
            uses_threshold=True,
            purposive_reason="DiffUse picked representatives of the separable items on purpose; the others could "
            "never be drawn",
        ),
        Strategy(
            "judge-disagreement",
            "Where the LLM judges disagree",
            "Random items, with people sent more often where the study's LLM judges disagree with each other or "
            "change their verdict with the presentation order (half the budget spread evenly, so every item keeps a "
            "chance). Each item's chance is known, so the report's estimate from people and judges stays unbiased. "
            "Run a judge over every item first.",
            _judge_disagreement,
            design=WEIGHTED,
        ),
        Strategy(
            "judge-stratified",
            "Stratified by the LLM judges' verdicts",
            "Items cut into bands of the judges' mean verdict (about one band per five items of the budget), each "
            "band sampled in proportion to its size: the report's stratified estimate then needs no weight fitted "
            "on people's labels. Run a judge over every item first.",
            _judge_stratified(neyman=False),
            design=STRATIFIED,
        ),
        Strategy(
            "judge-neyman",
            "Stratified by the LLM judges' verdicts, more where they are unsure",
            "As stratified by the judges' verdicts, with more items from bands where the verdicts are near a tie "
            "(half Neyman's allocation, half proportional: the judges' uncertainty is only a guess at people's). "
            "Run a judge over every item first.",
            _judge_stratified(neyman=True),
            design=STRATIFIED,
        ),
        Strategy(
            "diffuse-iterative",
            "DiffUse, iterative with live stopping",
            "Starts with the representatives of a few clusters of output differences; each time an item's "
            "judgments are in it re-checks the hypergeometric stopping rule and, while the risk of naming the "
            "wrong winner is above the threshold, releases the next split's representatives to raters. The "
            "budget caps the items judged (200 when empty).",
            lambda c, b, rng: np.array([], dtype=np.int64),
            live=True,
            design=PURPOSIVE,
            uses_vectors=True,
            purposive_reason="iterative DiffUse released cluster representatives until its stopping rule held, "
            "so the judged items were chosen on purpose",
        ),
    )
}
JUDGE_STRATEGIES = ("judge-disagreement", "judge-stratified", "judge-neyman")  # these read the judges' verdicts
STATIC_STRATEGIES = sorted(name for name, s in STRATEGIES.items() if not s.live)


def needs_embeddings(name: str, budget: int | None, metric: str) -> bool:
    """Whether planning with strategy ``name`` reads the outputs' embeddings: its difference vectors, or
    separability under an embedding metric; a sampling strategy asked for every item reads nothing."""
    strategy = STRATEGIES.get(name)
    if strategy is None or (budget is None and strategy.takes_all_at_random):
        return False
    return strategy.uses_vectors or (strategy.uses_separability and metric.startswith("cosine"))


def is_live(name: str) -> bool:
    """Whether the selection method ``name`` runs live (an unknown name is not)."""
    strategy = STRATEGIES.get(name)
    return strategy is not None and strategy.live


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown selection method {name!r}; choose one of {sorted(STRATEGIES)}") from None
