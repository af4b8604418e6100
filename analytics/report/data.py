"""What the report reads from the database: a study's judgments as rows, each item's separability, the analysis
parameters (the one map from a study's stored settings), its system pairs, and the answers each rated pair compared
(their style and length, counted once per text)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import cast

import numpy as np

from analytics.core import style
from analytics.populations import Population
from annotation import elicitation, questions
from annotation.models import Comparison, Generation, Judgment, Pair, Study
from selection.core import winners
from selection.models import ItemSeparability
from selection.strategies import strategy_parameters


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One judgment, flattened; its answer read once (``elicitation.effective_choice``: "a" | "b" | "tie" | None,
    model coordinates) with its rating (``winners.rating_for``: -1 A preferred, 0 none, +1 B; None without an
    answer)."""

    item: str
    item_id: int
    pair_id: int
    system_a: str
    system_b: str
    rater: str
    kind: str
    choice: str | None  # "a" | "b" | "tie" | None, model coordinates
    response_set: list[str] | None
    probability_a: float | None
    a_shown_first: bool
    superseded: bool
    source: str
    screened_out: bool
    ranking: int | None  # the ranking or best-worst answer the judgment is implied by (annotation/implied_pairs.py)
    effective_choice: str | None = dataclasses.field(init=False)
    rating: int | None = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        choice = elicitation.effective_choice(self.choice, self.response_set, self.probability_a)
        object.__setattr__(self, "effective_choice", choice)
        object.__setattr__(self, "rating", None if choice is None else winners.RATING[choice])


_ROW_FIELDS = (
    "pair__item__external_id",
    "pair__item_id",
    "pair_id",
    "pair__generation_a__system__name",
    "pair__generation_b__system__name",
    "rater__external_id",
    "rater__kind",
    "choice",
    "response_set",
    "probability_a",
    "a_shown_first",
    "superseded",
    "rater__source",
    "rater__screened_out",
    "ranking_id",
)


def load_rows(study: Study, question: str = "") -> list[Row]:
    """The study's analysed judgments (``Judgment.objects.analysed``: revisions and excluded items left out), oldest
    first, as answers to ``question``: the main
    question (""), or a further preference question's key (``annotation/questions.py``) -- then each row carries
    that question's stored answer, and judgments without one (a judge's, or made before the question) are left
    out."""
    queryset = Judgment.objects.analysed().filter(study=study).order_by("created", "id")
    if not question:
        return [Row(*values) for values in queryset.values_list(*_ROW_FIELDS)]
    rows = []
    for *values, answers in queryset.values_list(*_ROW_FIELDS, "answers"):
        answer = questions.stored_fields(answers, question)
        if answer is None or "choice" not in answer:
            continue
        values[7:10] = [answer["choice"], answer["response_set"], None]
        rows.append(Row(*values))
    return rows


def admitted(rows: list[Row], population: Population) -> list[Row]:
    """The rows of the judgments that belong to ``population`` (analytics/populations.py)."""
    raters = {(r.kind, r.rater, r.source, r.screened_out) for r in rows}
    admits = {rater for rater in raters if population.admits(*rater)}  # asked once per rater, not per judgment
    return [r for r in rows if (r.kind, r.rater, r.source, r.screened_out) in admits]


Deltas = dict[tuple[str, str], dict[int, float]]


def separability_by_item(study: Study, metric: str | None = None) -> Deltas:
    """(system_a, system_b) -> {item id: delta} under ``metric`` (default: the study's), both orders."""
    out: Deltas = {}
    metric = metric or study.selection_settings.separability_metric
    rows = ItemSeparability.objects.filter(run__study=study, run__metric=metric, delta__isnull=False).values_list(
        "run__comparison__system_a__name", "run__comparison__system_b__name", "item_id", "delta"
    )
    for a, b, item_id, delta in rows:
        value = cast(float, delta)  # the query keeps only rows with a delta (delta__isnull=False)
        out.setdefault((a, b), {})[item_id] = value
        out.setdefault((b, a), {})[item_id] = value
    return out


@dataclasses.dataclass(frozen=True)
class RatingParameters:
    """What the leaderboards are computed with, as each board names them."""

    k: float
    T: float  # the separability weight's T, as the paper names it
    alpha: float
    beta: float
    bootstrap_rounds: int
    seed: int
    order: str
    separability_metric: str
    aggregation: str


@dataclasses.dataclass(frozen=True)
class AnalysisParameters(RatingParameters):
    """Everything the report is computed with (``analysis_parameters``)."""

    indeterminacy_beta: float
    estimate_target: str
    style_penalty: float
    risk: float
    ties_count_in_n: bool
    decision_alpha: float
    decision_margin: float
    error_control: str  # in force: "per_pair" or "study_wide" (selection.core.multiplicity.in_force)
    decision_alpha_pair: float  # the error rate each pair's decision uses (docs/decisions.md#study-wide-error)

    def ratings(self) -> RatingParameters:
        return RatingParameters(**{f.name: getattr(self, f.name) for f in dataclasses.fields(RatingParameters)})


def analysis_parameters(study: Study) -> AnalysisParameters:
    """The one map from a study's stored settings to the report's parameters: its analysis settings
    (analytics.models.AnalysisSettings), the separability weight's T, alpha, beta and metric (the same
    ``strategy_parameters`` as separability-weighted selection), the stopping rule's risk and tie rule (the
    live loop's), the decisions' error rate with its control and each pair's share, and the study's seed."""
    stored, selection = study.analysis_settings, study.selection_settings
    weight = strategy_parameters(study)
    pairs = selection.compared_pairs()
    return AnalysisParameters(
        k=stored.elo_k,
        T=weight["T"],
        alpha=weight["alpha"],
        beta=weight["beta"],
        bootstrap_rounds=stored.bootstrap_rounds,
        seed=study.seed,
        order="creation time",
        separability_metric=weight["metric"],
        aggregation=stored.rating_aggregation,
        indeterminacy_beta=stored.indeterminacy_beta,
        estimate_target=stored.estimate_target,
        style_penalty=stored.style_penalty,
        risk=selection.risk,
        ties_count_in_n=selection.stopping_ties_in_n,
        decision_alpha=selection.decision_alpha,
        decision_margin=selection.decision_margin,
        error_control=selection.control_in_force(pairs),
        decision_alpha_pair=selection.pair_alpha(pairs),
    )


def system_pairs(study: Study) -> list[tuple[str, str]]:
    """The study's system pairs, each in its comparison's order."""
    return [
        (c.system_a.name, c.system_b.name)
        for c in Comparison.objects.filter(study=study).select_related("system_a", "system_b")
    ]


def item_means(rows: list[Row], pair: tuple[str, str]) -> dict[int, float]:
    """Per item: the mean score of the rows' judgments of ``pair`` for its first system (1 a win, 1/2 a tie, 0 a
    loss), whichever system each judgment calls A."""
    by_item: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        # a row has a rating exactly when it has an answer (Row.__post_init__)
        if {r.system_a, r.system_b} == set(pair) and r.effective_choice is not None and not r.superseded:
            rating = winners.rating_for(r.effective_choice, (r.system_a, r.system_b) != pair)
            by_item[r.item_id].append(float(winners.score_for_a(rating)))
    return {item: float(np.mean(v)) for item, v in by_item.items()}


CHUNK = 2000  # ids per query (SQLite and PostgreSQL cap a query's parameters)


CACHE_SIZE = 200_000  # answers' counts kept per worker process (~40 MB): a refresh re-reads only new answers
_counted: dict[str, tuple[np.ndarray, int]] = {}


class Answers:
    """Per rated pair of a study: the style counts (``style.FEATURES``) and lengths of its two answers, counted
    once per generation. Counting (the tokenizer: ~4 MB of text a second) is kept per text hash in the process,
    so the report's refresh after each new judgment counts only answers it has not seen."""

    def __init__(self, study: Study, pair_ids: set[int]):
        ids = sorted(pair_ids)
        pairs: dict[int, tuple[int, int]] = {}
        for start in range(0, len(ids), CHUNK):
            pairs.update(
                (pk, (ga, gb))
                # by primary key alone: the ids are the study's judgments' pairs, and SQLite's plan for the join on
                # the item's study took seconds a chunk at 10^4 pairs (bench/arena_board.py)
                for pk, ga, gb in Pair.objects.filter(pk__in=ids[start : start + CHUNK]).values_list(
                    "pk", "generation_a_id", "generation_b_id"
                )
            )
        generation_ids = sorted({g for both in pairs.values() for g in both})
        position = {g: i for i, g in enumerate(generation_ids)}
        self.counts = np.zeros((len(generation_ids), len(style.FEATURES)), dtype=np.int64)
        self.lengths = np.zeros(len(generation_ids), dtype=np.int64)
        for start in range(0, len(generation_ids), CHUNK):
            chunk = generation_ids[start : start + CHUNK]
            hashes = dict(Generation.objects.filter(pk__in=chunk).values_list("pk", "text_hash"))
            new = [g for g in chunk if hashes[g] not in _counted]
            if new:
                texts = dict(Generation.objects.filter(pk__in=new).values_list("pk", "text"))
                if len(_counted) + len(new) > CACHE_SIZE:
                    _counted.clear()
                for g, counts in zip(new, style.style_counts([texts[g] for g in new]), strict=True):
                    _counted[hashes[g]] = (counts, len(texts[g]))
            for g in chunk:
                counts, length = _counted[hashes[g]]
                self.counts[position[g]], self.lengths[position[g]] = counts, length
        self.sides = {pk: (position[ga], position[gb]) for pk, (ga, gb) in pairs.items()}

    def of_pair(self, pair_id: int) -> tuple[np.ndarray, np.ndarray]:
        """The style counts of a pair's answer A and answer B (``style.FEATURES`` order)."""
        a, b = self.sides[pair_id]
        return self.counts[a], self.counts[b]

    def of(self, rows: list[Row], first: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(counts of the side of ``first[i]``, of the other side, lengths likewise) for each judgment row."""
        sides = np.array([self.sides[r.pair_id] for r in rows], dtype=np.int64).reshape(-1, 2)
        swap = np.array([r.system_a != f for r, f in zip(rows, first, strict=True)], dtype=bool)
        mine = np.where(swap, sides[:, 1], sides[:, 0])
        other = np.where(swap, sides[:, 0], sides[:, 1])
        return self.counts[mine], self.counts[other], self.lengths[mine], self.lengths[other]
