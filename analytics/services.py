"""The study report: load judgments from the database, call the analytics core, assemble plain data.

Conventions (documented in the README):
- model coordinates: rating r = -1 (A preferred), 0 (no preference), +1 (B preferred), read off the stored
  answer by ``annotation.elicitation.effective_choice`` whatever the elicitation mode (annotation/elicitation.py): a
  5-point answer by its side, a response set of one system as a choice of it, of both or of neither (and a
  forced "both are bad") as no preference;
- a rating set is one rater's judgments of one item for one system pair;
- every judgment with a choice is one battle for the leaderboards, in creation order (or, per the study's
  setting, the majority of each rated pair, or one judgment sampled per item and system pair);
- sep-ELO weights each battle by the separability of its item (the study's separability metric);
  an item without separability gets the neutral weight K;
- ELO and sep-ELO are headlined and ranked by their bootstrap median (the online pass is kept as "online");
- who won an item is ``selection.core.winners.item_winner`` over its human raters (the live loop's rule too);
- positional bias is P(first shown chosen) over non-tie choices;
- indeterminacy compares judges with humans on the pairs both judged; a forced-choice tie is the
  response set {A, B}, an empty response set ("both are bad") is Omega = [0, 0], and beta is applied to
  both options.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from typing import Any

import numpy as np
from django.db.models import Count
from scipy.stats import spearmanr
from scipy.stats import t as student_t

from analytics import answer_style
from analytics.core import agreement, bias, consistency, indeterminacy, ppi, ratings
from analytics.leaderboards import board, clean, default_intervals, leaderboard, rate
from analytics.populations import ALL, HUMANS, Population
from annotation import elicitation, orientation, questions
from annotation.models import Comparison, Judgment, Skip, Study
from selection import services as selection_services
from selection.core import decisions, winners
from selection.core.stopping import stopping_status
from selection.models import ItemSeparability, SeparabilityRun
from selection.rating_sets import rating_sets as selection_rating_sets
from selection.services import UNRECORDED, SampleDesign
from selection.strategies import PURPOSIVE, STRATIFIED, UNIFORM, WEIGHTED, strategy_parameters

BETA_SWEEP = np.round(np.linspace(0.0, 0.5, 11), 2)
# A judge is ranked against the humans only on at least this many pairs both judged; fewer are shown, unranked.
MIN_SHARED_PAIRS = 20


@dataclasses.dataclass
class Row:
    """One judgment, flattened."""

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

    @property
    def effective_choice(self) -> str | None:
        return elicitation.effective_choice(self.choice, self.response_set, self.probability_a)

    @property
    def rating(self) -> int | None:
        choice = self.effective_choice
        return None if choice is None else winners.rating_for(choice)


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
)


def load_rows(study: Study, question: str = "") -> list[Row]:
    """The study's analysed judgments (revisions left out), oldest first, as answers to ``question``: the main
    question (""), or a further preference question's key (``annotation/questions.py``) -- then each row carries
    that question's stored answer, and judgments without one (a judge's, or made before the question) are left
    out."""
    queryset = Judgment.objects.filter(study=study, revised=False).order_by("created", "id")
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
    return [r for r in rows if population.admits(r.kind, r.rater, r.source, r.screened_out)]


def population_choices(rows: list[Row]) -> list[dict]:
    """The populations a study's report can be computed for, with their judgment counts (screened-out raters
    left out, as by default): humans, each judge, and everyone mixed."""
    kept = [r for r in rows if not r.screened_out]
    judges = sorted({r.rater for r in kept if r.kind == "judge"})
    out = [{"key": HUMANS, "label": "Humans", "judgments": sum(1 for r in kept if r.kind == "human")}]
    out += [
        {"key": f"judge:{j}", "label": f"Judge {j}", "judgments": sum(1 for r in kept if r.rater == j)} for j in judges
    ]
    out.append({"key": ALL, "label": "Everyone (mixes humans and judges)", "judgments": len(kept)})
    return out


# --------------------------------------------------------------------------------------------


def separability_by_item(study: Study, metric: str | None = None) -> dict[tuple[str, str], dict[int, float]]:
    """(system_a, system_b) -> {item id: delta} under ``metric`` (default: the study's), both orders."""
    out: dict[tuple[str, str], dict[int, float]] = {}
    metric = metric or study.selection_settings.separability_metric
    rows = ItemSeparability.objects.filter(run__study=study, run__metric=metric, delta__isnull=False).values_list(
        "run__comparison__system_a__name", "run__comparison__system_b__name", "item_id", "delta"
    )
    for a, b, item_id, delta in rows:
        out.setdefault((a, b), {})[item_id] = delta
        out.setdefault((b, a), {})[item_id] = delta
    return out


def consistency_report(rows: list[Row], deltas: dict[tuple[str, str], dict[int, float]]) -> dict:
    sets: dict[tuple, list[int]] = defaultdict(list)
    kinds: dict[tuple, str] = {}
    for row in rows:
        r = row.rating
        if r is None:
            continue
        key = (row.rater, row.item, row.item_id, *sorted((row.system_a, row.system_b)))
        # ratings of a rater who saw the pair as (B, A) are flipped to the canonical order
        sets[key].append(r if (row.system_a, row.system_b) == tuple(sorted((row.system_a, row.system_b))) else -r)
        kinds[key] = row.kind
    rating_sets = []
    for key, rs in sets.items():
        rater, item, item_id, sa, sb = key
        rating_sets.append(
            {
                "rater": rater,
                "kind": kinds[key],
                "item": item,
                "system_a": sa,
                "system_b": sb,
                "n": len(rs),
                "consistency": consistency.rating_set_consistency(rs),
                "preference_strength": consistency.preference_strength(rs),
                "separability": deltas.get((sa, sb), {}).get(item_id),
            }
        )
    per_item: dict[tuple, dict] = {}
    for kind in ("human", "judge"):
        groups: dict[tuple, list[dict]] = defaultdict(list)
        for s in rating_sets:
            if s["kind"] == kind:
                groups[(s["item"], s["system_a"], s["system_b"])].append(s)
        for (item, sa, sb), group in groups.items():
            defined = [g["consistency"] for g in group if not np.isnan(g["consistency"])]
            per_item[(kind, item, sa, sb)] = {
                "kind": kind,
                "item": item,
                "system_a": sa,
                "system_b": sb,
                "raters": len(group),
                "consistency": float(np.mean(defined)) if defined else None,
                "preference_strength": float(np.mean([g["preference_strength"] for g in group])),
                "separability": group[0]["separability"],
            }
    bins = consistency_bins(rating_sets)
    summary = {}
    for kind in ("human", "judge"):
        values = [s["consistency"] for s in rating_sets if s["kind"] == kind]
        if values:
            summary[kind] = mean_with_interval(
                [v for v in values if not np.isnan(v)], of=len(values), reason=consistency.NOT_APPLICABLE
            )
    return {
        "summary": summary,
        "rating_sets": rating_sets,
        "per_item": list(per_item.values()),
        "by_separability": bins,
    }


def mean_with_interval(values: list[float], of: int, reason: str) -> dict:
    """A headline mean with its n and Student's t 95 % interval; "not applicable" with ``reason`` when no value
    is defined (``of`` values were looked at)."""
    n = len(values)
    if not n:
        return {"available": False, "n": 0, "of": of, "mean": None, "low": None, "high": None, "reason": reason}
    mean = float(np.mean(values))
    if n > 1:
        half = float(student_t.ppf(0.975, n - 1) * np.std(values, ddof=1) / np.sqrt(n))
        low, high = max(0.0, mean - half), min(1.0, mean + half)
    else:
        low = high = None
    return {"available": True, "n": n, "of": of, "mean": mean, "low": low, "high": high}


def consistency_bins(rating_sets: list[dict]) -> dict:
    """Per rater kind: rating-set consistency over 4 equal-width separability bins (Fig. 6) and 5
    equal-count bins (Fig. 8), from rating sets that have a separability and a defined consistency (n >= 2)."""
    bins = {}
    for kind in ("human", "judge"):
        subset = [
            s
            for s in rating_sets
            if s["kind"] == kind and s["separability"] is not None and not np.isnan(s["consistency"])
        ]
        if not subset:
            continue
        x = np.array([s["separability"] for s in subset])
        y = np.array([s["consistency"] for s in subset])
        width_index, _ = consistency.equal_width_bins(x, 4)
        count_index = consistency.equal_count_bins(x, 5)
        bins[kind] = {
            "equal_width": [dataclasses.asdict(b) for b in consistency.summarize_bins(x, y, width_index, 4)],
            "equal_count": [dataclasses.asdict(b) for b in consistency.summarize_bins(x, y, count_index, 5)],
        }
    return bins


def pooled_consistency(studies: list[Study], metric: str | None = None) -> dict:
    """Fig. 8 across studies: every rating set of every study with its item's separability under ``metric``
    (default: each study's own), pooled into one set of bins, as the paper pools its four configurations.
    Also per study: mean separability and Spearman's rank correlation between an item's separability and
    its mean human consistency. Separability is min-max normalised within each study and system pair
    (SPEC §1), so pooled values compare positions within each study's range."""
    pooled: list[dict] = []
    per_study = []
    for study in studies:
        used = metric or study.selection_settings.separability_metric
        report = consistency_report(load_rows(study), separability_by_item(study, used))
        sets = [{**s, "study": study.name} for s in report["rating_sets"]]
        pooled.extend(sets)
        sets = [s for s in sets if not np.isnan(s["consistency"])]
        items = [
            i
            for i in report["per_item"]
            if i["kind"] == "human" and i["separability"] is not None and i["consistency"] is not None
        ]
        deltas = [i["separability"] for i in items]
        rho = (
            spearmanr(deltas, [i["consistency"] for i in items]).statistic
            if len(items) > 2 and len(set(deltas)) > 1
            else float("nan")
        )
        per_study.append(
            {
                "study": study.name,
                "metric": used,
                "rating_sets": len(sets),
                "with_separability": sum(1 for s in sets if s["separability"] is not None),
                "mean_separability": float(np.mean(deltas)) if deltas else None,
                "spearman_separability_consistency": rho,
            }
        )
    return clean({"metric": metric or "each study's own", "studies": per_study, "bins": consistency_bins(pooled)})


def _battles(rows: list[Row], systems: list[str], aggregation: str = "every", seed: int = 0):
    """Battles in creation order, aggregated per the study's setting (``ratings.aggregate_battles``):
    "majority" groups the judgments of one rated pair, "one_sampled" those of one item and system pair."""
    index = {s: i for i, s in enumerate(systems)}
    battle_rows = [r for r in rows if r.effective_choice is not None]
    a = np.array([index[r.system_a] for r in battle_rows], dtype=np.int64)
    b = np.array([index[r.system_b] for r in battle_rows], dtype=np.int64)
    # the battle's outcome for system A from the one rating map: r = -1 (A) -> 1, 0 -> 0.5, +1 (B) -> 0
    score = winners.score_for_a([r.rating for r in battle_rows]).reshape(-1)
    if aggregation == "every" or not battle_rows:
        return battle_rows, a, b, score
    # the same system is "a" in every battle of a group: the one that comes first in the study's order
    flip = a > b
    a, b, score = np.where(flip, b, a), np.where(flip, a, b), np.where(flip, 1 - score, score)
    keys = [
        (r.pair_id,) if aggregation == "majority" else (r.item_id, int(x), int(y))
        for r, x, y in zip(battle_rows, a, b, strict=True)
    ]
    ids: dict[tuple, int] = {}
    group = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int64)
    kept, score = ratings.aggregate_battles(group, score, aggregation, seed)
    return [battle_rows[i] for i in kept], a[kept], b[kept], score


def analysis_parameters(study: Study) -> dict[str, Any]:
    """The one map from a study's stored settings to the report's parameters: its analysis settings
    (analytics.models.AnalysisSettings), the separability weight's T, alpha, beta and metric (the same
    ``strategy_parameters`` as separability-weighted selection), the stopping rule's risk and tie rule (the
    live loop's), and the study's seed."""
    stored, selection = study.analysis_settings, study.selection_settings
    weight = strategy_parameters(study)
    return {
        "k": stored.elo_k,
        "T": weight["T"],
        "alpha": weight["alpha"],
        "beta": weight["beta"],
        "bootstrap_rounds": stored.bootstrap_rounds,
        "seed": study.seed,
        "order": "creation time",
        "separability_metric": weight["metric"],
        "aggregation": stored.rating_aggregation,
        "indeterminacy_beta": stored.indeterminacy_beta,
        "estimate_target": stored.estimate_target,
        "style_penalty": stored.style_penalty,
        "risk": selection.risk,
        "ties_count_in_n": selection.stopping_ties_in_n,
        "decision_alpha": selection.decision_alpha,
        "decision_margin": selection.decision_margin,
    }


RATING_PARAMETERS = (
    "k",
    "T",
    "alpha",
    "beta",
    "bootstrap_rounds",
    "seed",
    "order",
    "separability_metric",
    "aggregation",
)


def ratings_report(
    study: Study,
    rows: list[Row],
    systems: list[str],
    deltas: dict[tuple[str, str], dict[int, float]],
    answers: answer_style.Answers,
) -> dict:
    settings = analysis_parameters(study)
    params = {name: settings[name] for name in RATING_PARAMETERS}
    battle_rows, a, b, score = _battles(rows, systems, params["aggregation"], params["seed"])
    if len(score) == 0:
        empty = {"available": False, "reason": "no judgments with a choice yet", "parameters": params}
        return {
            "elo": empty,
            "sep_elo": empty,
            "bradley_terry": empty,
            "win_rates": {},
            "style_control": {"available": False, "reason": empty["reason"]},
        }
    n = len(systems)
    k_elo, rounds, seed = params["k"], params["bootstrap_rounds"], params["seed"]
    elo = {
        "available": True,
        "parameters": params,
        "battles": len(score),
        "leaderboard": leaderboard(systems, *rate("elo", a, b, score, n, k_elo, rounds, seed), "elo"),
    }
    delta = np.array([deltas.get((r.system_a, r.system_b), {}).get(r.item_id, np.nan) for r in battle_rows])
    if np.isnan(delta).all():
        sep_elo = {
            "available": False,
            "parameters": params,
            "reason": f"no {params['separability_metric']} separability yet: compute it on the Separability page",
        }
    else:
        k = ratings.separability_k(
            np.where(np.isnan(delta), params["T"], delta), k_elo, params["T"], params["alpha"], params["beta"]
        )
        sep_elo = {
            "available": True,
            "parameters": params,
            "battles": len(score),
            "battles_without_separability": int(np.isnan(delta).sum()),
            "leaderboard": leaderboard(systems, *rate("sep-elo", a, b, score, n, k, rounds, seed), "sep-elo"),
        }
    bt = {
        "available": True,
        "parameters": params,
        "battles": len(score),
        "intervals": default_intervals("bt"),
        "leaderboard": board(systems, "bt", a, b, score),
    }
    wins, battles = ratings.win_rate_matrix(a, b, score, n)
    ratio = ratings.win_ratio_ranking(a, b, score, n)
    win_rates = {
        "systems": systems,
        "matrix": [[(wins[i, j] / battles[i, j]) if battles[i, j] else None for j in range(n)] for i in range(n)],
        "battles": battles.astype(int).tolist(),
        "win_ratio": sorted(
            ({"system": s, "win_ratio": ratio[i]} for i, s in enumerate(systems)),
            key=lambda r: -(r["win_ratio"] if r["win_ratio"] == r["win_ratio"] else -1),
        ),
    }
    styled = answer_style.style_control_report(battle_rows, a, b, score, systems, answers, settings["style_penalty"])
    return {"elo": elo, "sep_elo": sep_elo, "bradley_terry": bt, "win_rates": win_rates, "style_control": styled}


RELIABILITY_MIN_RATERS = 3  # Dawid-Skene needs raters to compare: fewer and it only echoes them


def _places(systems: list[str], a: np.ndarray, b: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """Bradley-Terry ratings of battles and each system's place by them (1 the best)."""
    point = ratings.bradley_terry(a, b, score, len(systems))
    return point, {systems[i]: place for place, i in enumerate(np.argsort(-point), start=1)}


def reliability_report(rows: list[Row], systems: list[str]) -> dict:
    """Each rater's reliability by one-coin Dawid-Skene (``analytics.core.reliability``: agreement beyond chance with
    the answer the other raters of each pair point to, as the rater saw the pair; none without enough overlap) over
    the population's judgments, each rated pair a task and its answer (A, B or no preference) the label; and the
    Bradley-Terry ratings of one battle per rated pair with the answer the model infers, beside the same board with
    each pair's plain majority (the same one battle per pair, every rater alike: a difference is the weighting's)
    and never instead of the report's boards. No interval: the inferred answers are themselves estimates, and an
    interval that treated them as data would be too narrow."""
    from analytics.core import reliability

    labelled = [r for r in rows if r.effective_choice is not None]
    raters = {r.rater for r in labelled}
    overlapping = sum(1 for n in Counter(r.pair_id for r in labelled).values() if n > reliability.MIN_OTHERS)
    if len(raters) < RELIABILITY_MIN_RATERS or overlapping == 0:
        return {
            "available": False,
            "reason": f"needs at least {RELIABILITY_MIN_RATERS} raters and pairs rated by "
            f"{reliability.MIN_OTHERS + 1} or more of them (now {len(raters)} "
            f"rater{'s' if len(raters) != 1 else ''}, {overlapping} such pairs)",
        }
    fit = reliability.one_coin_dawid_skene(
        [r.pair_id for r in labelled],
        [r.rater for r in labelled],
        [r.effective_choice for r in labelled],
        [r.a_shown_first for r in labelled],
    )
    counts = Counter(r.rater for r in labelled)
    table = [
        {
            "rater": w,
            "judgments": counts[w],
            "scored_pairs": int(n),
            "reliability": None if k != k else float(k),
            "skill": float(skill),
            "in_words": (
                f"not enough overlap (fewer than {reliability.MIN_PAIRS} pairs rated by "
                f"{reliability.MIN_OTHERS} others)"
            )
            if k != k
            else reliability.words(float(k)),
        }
        for w, k, skill, n in zip(fit.workers, fit.kappa, fit.skill, fit.scored_pairs, strict=True)
    ]
    table.sort(key=lambda row: (row["reliability"] is None, row["reliability"] or 0.0))
    first = {}
    for r in labelled:
        first.setdefault(r.pair_id, r)
    index = {s: i for i, s in enumerate(systems)}
    kept = [p for p in first if fit.labels.get(p) in winners.RATING]
    a = np.array([index[first[p].system_a] for p in kept], dtype=np.int64)
    b = np.array([index[first[p].system_b] for p in kept], dtype=np.int64)
    score = winners.score_for_a([winners.rating_for(fit.labels[p]) for p in kept]).reshape(-1)
    weighted = {"available": False, "reason": "no rated pair"}
    if len(score):
        point, _ = _places(systems, a, b, score)
        _, majority_a, majority_b, majority_score = _battles(labelled, systems, "majority")
        _, by_majority = _places(systems, majority_a, majority_b, majority_score)
        weighted = {
            "available": True,
            "battles": len(score),
            "leaderboard": [
                {
                    "place": place,
                    "system": systems[i],
                    "rating": float(point[i]),
                    "majority_place": by_majority.get(systems[i]),
                }
                for place, i in enumerate(np.argsort(-point), start=1)
            ],
        }
    return {
        "available": True,
        "raters": table,
        "pairs": len(first),
        "model": "one-coin Dawid-Skene (crowd-kit)",
        "unreliable": [row["rater"] for row in table if row["reliability"] is not None and row["reliability"] < 0.2],
        "unscored": [row["rater"] for row in table if row["reliability"] is None],
        "weighted_board": weighted,
    }


def rating_sets(rows: list[Row], pair: tuple[str, str]) -> dict[str, dict[str, list[int]]]:
    """item -> rater -> their ratings of the item for ``pair`` (``selection.rating_sets``: in the pair's coordinates,
    -1 its first system; items in the order their last judgment arrived), from the rows that are not superseded."""
    return selection_rating_sets(
        (r.item, r.rater, r.choice, r.response_set, r.probability_a, (r.system_a, r.system_b) != pair)
        for r in rows
        if {r.system_a, r.system_b} == set(pair) and not r.superseded
    )


def item_scores(sets: dict[str, dict[str, list[int]]]) -> tuple[np.ndarray, np.ndarray]:
    """Each item's score for the pair's first system -- the mean over its raters of their mean outcome (1 a win,
    1/2 a tie, 0 a loss) -- and its number of judgments, in the order of ``sets``."""
    scores = [winners.item_score(list(by_rater.values())) for by_rater in sets.values()]
    votes = [sum(len(v) for v in by_rater.values()) for by_rater in sets.values()]
    return np.array(scores, dtype=np.float64), np.array(votes, dtype=np.int64)


def stopping_report(study: Study, rows: list[Row]) -> list[dict]:
    """Per system pair: who won each item by the one item-winner rule (``winners.item_winner``, the
    live DiffUse loop's oracle too) over the population's judgments (humans by default) that are not
    superseded, and the
    hypergeometric risk that the leader is wrong, with N_pool = the candidates of the pair's selection.
    ``risk_beyond_pool`` is the same test with an unbounded pool (binomial): it stays honest when every
    pool item is judged and the hypergeometric risk is 0 by construction.

    ``decision``: what the anytime-valid confidence sequence for the first system's win rate over items settles
    (``selection.core.decisions``; an item's score is the mean of its raters' mean outcomes, ties as halves, items
    in the order their last judgment arrived): ``a`` / ``b`` (that system wins more than half), ``equivalent``
    (within the margin of a half) or ``undecided``, with the interval ``win_rate_low`` .. ``win_rate_high``. It is
    a snapshot of all the population's judgments as they are (partly rated items and imported files included); the
    decision that holds while a study is watched is the plan's (the study page, ``selection.models.PairDecision``),
    which observes whole items in the order they complete."""
    pools = selection_services.selection_pools(study)
    settings = analysis_parameters(study)
    out = []
    for c in Comparison.objects.filter(study=study).select_related("system_a", "system_b"):
        pair = (c.system_a.name, c.system_b.name)
        sets = rating_sets(rows, pair)
        won = {item: winners.item_winner(list(by_rater.values())) for item, by_rater in sets.items()}
        labels = list(won.values())
        n_pool = max(pools.get(c.pk, 0), len(won), 1)
        status = stopping_status(
            labels.count("a"),
            labels.count("b"),
            labels.count("tie"),
            n_pool,
            settings["risk"],
            settings["ties_count_in_n"],
        )
        names = {"a": pair[0], "b": pair[1], "tie": "tie"}
        decision = decisions.pair_decision(
            item_scores(sets)[0], settings["decision_alpha"], settings["decision_margin"]
        )
        out.append(
            {
                "system_a": pair[0],
                "system_b": pair[1],
                "leader": names.get(status.leader or ""),
                "decision": decision.decision,
                "win_rate_low": decision.low,
                "win_rate_high": decision.high,
                "decision_items": decision.n,
                "decision_alpha": settings["decision_alpha"],
                "decision_margin": decision.margin,
                "wins_a": status.wins_a,
                "wins_b": status.wins_b,
                "ties": status.ties,
                "k": status.k,
                "n": status.n,
                "pool": n_pool,
                "risk": status.risk,
                "risk_beyond_pool": status.risk_beyond_pool,
                "threshold": settings["risk"],
                "decided": decisions.from_hypergeometric(status).decided,
                "ties_count_in_n": settings["ties_count_in_n"],
                "items": {item: names[w] for item, w in sorted(won.items())},
            }
        )
    return out


def mark_adjacent_orders(board: list[dict], stopping: list[dict]) -> None:
    """Mark on each leaderboard row whether its order above the next row's system is decided: by the pair's
    anytime-valid decision (the stopping rows' ``decision``) -- "decided" (this system wins more than half),
    "equivalent" (within the margin), "reversed" (the pair's decision puts the next system above), "open" (undecided)
    or "not compared". The last row has none."""
    by_pair = {(s["system_a"], s["system_b"]): s["decision"] for s in stopping}
    swap = {decisions.A_BETTER: decisions.B_BETTER, decisions.B_BETTER: decisions.A_BETTER}
    for upper, lower in zip(board, board[1:], strict=False):
        call = by_pair.get((upper["system"], lower["system"]))  # "a": the upper system is better
        if call is None and (lower["system"], upper["system"]) in by_pair:
            call = by_pair[(lower["system"], upper["system"])]
            call = swap.get(call, call)
        upper["order_below"] = (
            "not compared"
            if call is None
            else "decided"
            if call == decisions.A_BETTER
            else "reversed"
            if call == decisions.B_BETTER
            else "equivalent"
            if call == decisions.EQUIVALENT
            else "open"
        )
    if board:
        board[-1]["order_below"] = None


def positional_bias_report(rows: list[Row], reference: list[Row]) -> dict:
    """P(first shown chosen) per rater and per kind over ``rows`` (the population), and each judge's
    debiasing threshold checked against the human majority, both from ``reference`` (the filtered humans and
    every judge)."""
    by_rater: dict[str, list[bool]] = defaultdict(list)
    kind_of: dict[str, str] = {}
    for r in rows:
        choice = r.effective_choice
        if choice in ("a", "b"):
            by_rater[r.rater].append(orientation.to_display(choice, r.a_shown_first) == "first")
            kind_of[r.rater] = r.kind
    raters = [
        {"rater": name, "kind": kind_of[name], **dataclasses.asdict(bias.positional_bias(np.array(v)))}
        for name, v in sorted(by_rater.items())
    ]
    populations = {}
    for kind in ("human", "judge"):
        values = [x for name, v in by_rater.items() if kind_of[name] == kind for x in v]
        if values:
            populations[kind] = dataclasses.asdict(bias.positional_bias(np.array(values)))
    human_majority = _majority_by_pair([r for r in reference if r.kind == "human"])
    debiasing = {}
    for name in sorted({r.rater for r in reference if r.kind == "judge" and r.probability_a is not None}):
        judge_rows = [r for r in reference if r.rater == name and r.probability_a is not None]
        p_first = np.array([orientation.probability_first(r.probability_a, r.a_shown_first) for r in judge_rows])
        truth = [human_majority.get(r.pair_id) for r in judge_rows]
        known = [i for i, t in enumerate(truth) if t in ("a", "b")]
        truth_first = (
            np.array([orientation.to_display(truth[i], judge_rows[i].a_shown_first) == "first" for i in known])
            if known
            else None
        )
        result = bias.debiasing(p_first[known] if known else p_first, truth_first)
        debiasing[name] = {
            **dataclasses.asdict(result),
            "threshold_all": bias.debias_threshold(p_first),
            "compared_with_humans": len(known),
        }
    return {"raters": raters, "populations": populations, "debiasing": debiasing}


def _majority_by_pair(rows: list[Row]) -> dict[int, str]:
    """Who won each rated pair by the one item-winner rule, each rater's one judgment of the pair being
    their rating set."""
    sets = selection_rating_sets((r.pair_id, r.rater, r.choice, r.response_set, r.probability_a, False) for r in rows)
    return {p: winners.item_winner(list(by_rater.values())) for p, by_rater in sets.items()}


def agreement_report(rows: list[Row]) -> dict:
    """Agreement between the population's raters (Krippendorff's alpha over rated pairs, Cohen's kappa
    between raters with at least 10 shared pairs)."""
    humans = [r for r in rows if r.effective_choice is not None]
    units: dict[int, list[str]] = defaultdict(list)
    labels: dict[str, dict[int, str]] = defaultdict(dict)
    for r in humans:
        units[r.pair_id].append(r.effective_choice)
        labels[r.rater][r.pair_id] = r.effective_choice
    pairable = sum(1 for u in units.values() if len(u) >= 2)
    return {
        "krippendorff_alpha": agreement.krippendorff_alpha_nominal(list(units.values())),
        "units_with_two_or_more": pairable,
        "krippendorff_reason": None if pairable else "not applicable: no pair has judgments by two raters",
        "cohen_kappa": agreement.pairwise_kappas(labels, min_overlap=10),
    }


def indeterminacy_report(study: Study, rows: list[Row]) -> dict:
    humans = [r for r in rows if r.kind == "human"]
    human_pairs = {r.pair_id for r in humans}
    judges = sorted({r.rater for r in rows if r.kind == "judge"})
    paired = [(r.choice, r.response_set) for r in humans if r.choice and r.response_set]
    report: dict[str, Any] = {
        "human_beta_hat": indeterminacy.beta_hat([c for c, _ in paired], [s for _, s in paired]) if paired else None,
        "human_translation_matrix": (
            indeterminacy.translation_matrix([c for c, _ in paired], [s for _, s in paired]).tolist()
            if paired
            else None
        ),
        "translation_columns": ["{a}", "{b}", "{a,b}"],
        "translation_rows": ["a", "b", "tie"],
        "beta": analysis_parameters(study)["indeterminacy_beta"],
        "judges": {},
    }
    if report["human_translation_matrix"] is not None:
        report["translation_matrix_rows"] = list(
            zip(report["translation_rows"], report["human_translation_matrix"], strict=True)
        )
    if not judges or not humans:
        report["reason"] = "needs human and judge judgments on the same pairs"
        return report
    human_by_pair = _group(humans)
    for name in judges:
        judge_rows = [r for r in rows if r.rater == name and r.pair_id in human_pairs]
        if not judge_rows:
            continue
        judge_by_pair = _group(judge_rows)
        units = sorted(judge_by_pair)
        report["judges"][name] = _judge_metrics(human_by_pair, judge_by_pair, units, report["beta"])
        report["judges"][name]["beta_sensitivity"] = [
            {"beta": float(beta), "mse": _judge_metrics(human_by_pair, judge_by_pair, units, float(beta))["mse"]}
            for beta in BETA_SWEEP
        ]
        jp = [(r.choice, r.response_set) for r in judge_rows if r.choice and r.response_set]
        report["judges"][name]["beta_hat"] = (
            indeterminacy.beta_hat([c for c, _ in jp], [s for _, s in jp]) if jp else None
        )
    metrics = ("mse", "coverage", "hit_rate", "kappa", "kl", "jsd")
    better_high = {"coverage", "hit_rate", "kappa"}
    ranked = {n: v for n, v in report["judges"].items() if v["units"] >= MIN_SHARED_PAIRS}
    report["ranking_min_shared_pairs"] = MIN_SHARED_PAIRS
    report["shared_pairs"] = {n: v["units"] for n, v in report["judges"].items()}
    report["unranked"] = sorted(n for n in report["judges"] if n not in ranked)
    report["ranking"], report["ranking_tiers"] = {}, {}
    for m in metrics:
        order = sorted(
            ((n, v[m]) for n, v in ranked.items() if v[m] is not None),
            key=lambda t: (-t[1] if m in better_high else t[1], t[0]),
        )
        report["ranking"][m] = [name for name, _ in order]
        tiers: list[list[str]] = []  # judges with the same value share a tier: ties are ties
        for k, (name, value) in enumerate(order):
            if k and math.isclose(value, order[k - 1][1], rel_tol=1e-9, abs_tol=1e-12):
                tiers[-1].append(name)
            else:
                tiers.append([name])
        report["ranking_tiers"][m] = tiers
    return report


def _group(rows: list[Row]) -> dict[int, list[Row]]:
    out: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        out[r.pair_id].append(r)
    return out


def _omega(rows: list[Row], beta: float) -> np.ndarray:
    """Omega of one unit: response sets as given; forced choices (a tie = both) with sensitivity beta."""
    return indeterminacy.omega([r.response_set for r in rows], [r.effective_choice for r in rows], beta)


def _judge_metrics(human_by_pair, judge_by_pair, units, beta: float) -> dict:
    omega_h = np.array([_omega(human_by_pair[u], beta) for u in units])
    omega_j = np.array([_omega(judge_by_pair[u], 0.0) for u in units])
    fc_h = np.array(
        [indeterminacy.forced_choice_distribution([r.effective_choice for r in human_by_pair[u]]) for u in units]
    )
    fc_j = np.array(
        [indeterminacy.forced_choice_distribution([r.effective_choice for r in judge_by_pair[u]]) for u in units]
    )
    judge_choice = [agreement.plurality([r.effective_choice for r in judge_by_pair[u]]) for u in units]
    human_choice = [agreement.plurality([r.effective_choice for r in human_by_pair[u]]) for u in units]
    both = [(h, j) for h, j in zip(human_choice, judge_choice, strict=True) if h and j]
    # every verdict on its own (each presentation order counts) against the human majority of its pair (a split
    # with no single most common answer is a tie; the other split rules are reported beside it), and how often
    # the judge picked the output shown first
    verdicts = _verdicts_against(human_by_pair, judge_by_pair, units, "tie")
    sided = [r for _, r in verdicts if r.effective_choice in ("a", "b")]
    sweep = indeterminacy.threshold_sweep(omega_h, omega_j, option=0)
    kappa_per_item = agreement.cohen_kappa([h for h, _ in both], [j for _, j in both]) if both else float("nan")
    return {
        "units": len(units),
        "verdicts": len(verdicts),
        "agreement": _agreement(verdicts),
        "agreement_split_first": _agreement(_verdicts_against(human_by_pair, judge_by_pair, units, "first")),
        "agreement_split_left_out": _agreement(_verdicts_against(human_by_pair, judge_by_pair, units, "left_out")),
        "p_first": (
            sum(orientation.to_display(r.effective_choice, r.a_shown_first) == "first" for r in sided) / len(sided)
            if sided
            else float("nan")
        ),
        # the same exact binomial test against 1/2 as the people's positional bias, so both read in the same words
        "p_first_p_value": bias.positional_bias(
            np.array(
                [orientation.to_display(r.effective_choice, r.a_shown_first) == "first" for r in sided], dtype=bool
            )
        ).p_value,
        "first_share": (
            sum(orientation.to_display(r.effective_choice, r.a_shown_first) == "first" for r in sided) / len(verdicts)
            if verdicts
            else float("nan")
        ),
        "mse": indeterminacy.mse(omega_h, omega_j),
        "hit_rate": indeterminacy.hit_rate(human_choice, judge_choice),
        "coverage": indeterminacy.coverage(omega_h, judge_choice),
        # Cohen's kappa two ways: per item (the judge's plurality over its verdicts on the pair, both orders, against
        # the human majority: a judge that flips with the order counts as a tie) and per verdict (each verdict on
        # its own against the human majority of its pair, as agreement is counted)
        "kappa": kappa_per_item,  # the name the ranking and earlier reports use
        "kappa_per_item": kappa_per_item,
        "kappa_per_verdict": (
            agreement.cohen_kappa([h for h, _ in verdicts], [r.effective_choice for _, r in verdicts])
            if verdicts
            else float("nan")
        ),
        "kl": indeterminacy.kl_divergence(fc_h, fc_j),
        "jsd": indeterminacy.js_divergence(fc_h, fc_j),
        "omega_human_mean": np.nanmean(omega_h, axis=0) if len(units) else [None, None],
        "omega_judge_mean": np.nanmean(omega_j, axis=0) if len(units) else [None, None],
        "threshold_sweep": [
            {"tau": float(t), "decision_consistency": c, "estimation_bias": b}
            for t, c, b in zip(sweep.taus, sweep.consistency, sweep.bias, strict=True)
        ],
    }


def _verdicts_against(human_by_pair, judge_by_pair, units, split: str) -> list[tuple[str, Row]]:
    """Each judge verdict with the human majority of its pair under the split rule ``split``
    (analytics/core/agreement.py: plurality); pairs with no human majority are left out."""
    out = []
    for u in units:
        human = agreement.plurality([r.effective_choice for r in human_by_pair[u]], split)
        if human is not None:
            out.extend((human, r) for r in judge_by_pair[u] if r.effective_choice is not None)
    return out


def _agreement(verdicts: list[tuple[str, Row]]) -> float:
    return sum(r.effective_choice == human for human, r in verdicts) / len(verdicts) if verdicts else float("nan")


def _item_scores(rows: list[Row], pair: tuple[str, str]) -> dict[int, float]:
    """Per item: the mean score of the rows' judgments of ``pair`` for its first system (1 a win, 1/2 a tie, 0 a
    loss), whichever system each judgment calls A."""
    by_item: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        if {r.system_a, r.system_b} == set(pair) and r.rating is not None and not r.superseded:
            rating = winners.rating_for(r.effective_choice, (r.system_a, r.system_b) != pair)
            by_item[r.item_id].append(float(winners.score_for_a(rating)))
    return {item: float(np.mean(v)) for item, v in by_item.items()}


def _system_pairs(study: Study) -> list[tuple[str, str]]:
    return [
        (c.system_a.name, c.system_b.name)
        for c in Comparison.objects.filter(study=study).select_related("system_a", "system_b")
    ]


ALL_JUDGES = "all judges"  # the several-judges predictor: the mean of every judge's verdicts on an item

DESIGN_WORDS = {
    UNIFORM: "a uniform random sample",
    WEIGHTED: "a random sample with unequal, known chances, each judged item weighted by one over its chance",
    STRATIFIED: "a random sample of a fixed number from each band, each band weighted by its size",
    PURPOSIVE: "items chosen on purpose",
    UNRECORDED: "items chosen in a way no selection run records",
}


WIN_RATE = (0.0, 1.0)  # a win rate's scores: 1 a win, 1/2 a tie, 0 a loss (the estimators' bounds)


def _estimate_row(name: str, label: str, judge: str | None, est: ppi.MeanEstimate) -> dict:
    """One estimate as the report keeps it; ``short``: its name in the plot."""
    short = "people alone" if judge is None else ("+ all judges" if judge == ALL_JUDGES else f"+ {judge}")
    return {
        "estimator": name,
        "label": label,
        "short": short,
        "judge": judge,
        "labelled": est.n_labelled,
        "judge_only": est.n_unlabelled,
        "estimate": est.estimate,
        "low": est.low,
        "high": est.high,
        "lambda": None if judge is None or math.isnan(est.lam) else est.lam,
        "efficiency": est.efficiency,
        "labels_worth": est.labels_equivalent,
        "target": est.target,
    }


def _pair_estimates(
    design: SampleDesign, y_by: dict[int, float], predictors: dict[str, dict[int, float]], finite: bool
) -> tuple[int, list[dict], str]:
    """The win-rate estimates one design allows: (labelled items, rows, why none when empty). ``predictors``: judge
    name -> the judge's score per item (``ALL_JUDGES``: every judge's verdicts pooled); an item a judge did not
    score takes 1/2, a fixed value that keeps the estimate unbiased."""
    frame = design.frame
    drawn = set(design.chosen) if design.kind != UNRECORDED else set(frame)
    labelled = [i for i in frame if i in y_by and i in drawn]
    n = len(labelled)
    if n < 2:
        return n, [], "needs two or more judged items of the sample"
    y = np.array([y_by.get(i, np.nan) for i in frame])
    sampled = np.array([i in y_by and i in drawn for i in frame])
    rows = []
    if design.kind in (UNIFORM, UNRECORDED):  # unrecorded: only a census reaches here
        people = ppi.classical_mean(y[sampled], population_size=len(frame) if finite else None, bounds=WIN_RATE)
        rows.append(_estimate_row("people", "People alone", None, people))
        rest = [i for i in frame if i not in set(labelled)]
        if rest:
            for name, f_by in predictors.items():
                if not any(i in f_by for i in rest):
                    continue  # a judge that scored none of the items people did not judge adds nothing
                f_lab = np.array([f_by.get(i, 0.5) for i in labelled])
                f_rest = np.array([f_by.get(i, 0.5) for i in rest])
                est = ppi.ppi_mean(y[sampled], f_lab, f_rest, finite=finite, bounds=WIN_RATE)
                label = "People + all judges (their mean verdict)" if name == ALL_JUDGES else f"People + {name}"
                rows.append(_estimate_row("ppi", label, name, est))
        return n, rows, ""
    share = n / len(design.inclusion)  # released in random order: the judged ones are a random part of the draw
    pi = np.array([design.inclusion.get(i, 1.0) * share for i in frame])
    if design.kind == STRATIFIED:
        strata = np.array([design.strata.get(i, -1) for i in frame])
        counts = {h: (int(np.sum(sampled & (strata == h))), int(np.sum(strata == h))) for h in np.unique(strata)}
        if all(k >= 2 or k == size for k, size in counts.values()):
            est = ppi.stratified_mean(y, strata, sampled, finite=finite, bounds=WIN_RATE)
            rows.append(_estimate_row("stratified", f"People alone, band by band ({len(counts)} bands)", None, est))
            return n, rows, ""
        # some band has fewer than two judged items yet: its share cannot be estimated on its own, and merging bands
        # drawn at different rates would bias the mean; weighting each item by one over its chance stays unbiased
        est = ppi.active_mean(y, np.full(len(frame), 0.5), pi, sampled, lam=0.0, finite=finite, bounds=WIN_RATE)
        rows.append(
            _estimate_row("weighted", "People alone, weighted (a band has fewer than two judged items)", None, est)
        )
        return n, rows, ""
    people = ppi.active_mean(y, np.full(len(frame), 0.5), pi, sampled, lam=0.0, finite=finite, bounds=WIN_RATE)
    rows.append(_estimate_row("weighted", "People alone, weighted", None, people))
    for name, f_by in predictors.items():
        if not any(i in f_by for i in frame):
            continue  # a judge that scored none of these items adds nothing
        f = np.array([f_by.get(i, 0.5) for i in frame])
        est = ppi.active_mean(y, f, pi, sampled, finite=finite, bounds=WIN_RATE)
        label = "People + all judges, weighted" if name == ALL_JUDGES else f"People + {name}, weighted"
        rows.append(_estimate_row("weighted", label, name, est))
    return n, rows, ""


def _design_note(design: SampleDesign, predictors: dict) -> str:
    """What a reader should know about a design's rows beyond the numbers."""
    if design.kind == STRATIFIED and predictors:
        if design.method in ("judge-stratified", "judge-neyman"):
            return (
                "The judges chose this sample: their verdicts made the bands, so what they know is in the "
                "estimate already, with nothing fitted on people's labels; no row adds a judge again."
            )
        return "A judge is not combined with a stratified sample here: the estimate is people's, by band."
    return ""


def win_rate_estimates(
    study: Study, humans: list[Row], judges: list[Row], designs: dict[tuple[str, str], SampleDesign] | None = None
) -> list[dict]:
    """Per system pair: the first system's win rate among the items people judged, estimated the way the pair's
    sample design allows (``selection.services.sample_designs``), for the study's target (items like these, or
    these items with the finite-population correction; analytics/core/ppi.py):

    - a probability sample: people alone (the labelled mean, weighted by one over each item's chance, or by
      stratum) and, for each judge and for all judges together, people and the judge in one estimate
      (prediction-powered with power tuning on a uniform sample, the weighted difference estimator on a weighted
      one; a stratified sample already uses its strata). Each with its 95 % interval and what it is worth in
      labels by people alone on a uniform sample (``MeanEstimate.efficiency``, checked against the realised
      efficiency on PRD by tests/analytics/core/test_coverage_prd.py);
    - items chosen on purpose (DiffUse, a threshold) or a draw no run records: the mean over the judged items,
      which describes those items only, and why no estimate beyond them is given.

    Per item, Y = the humans' mean score for the first system (1 a win, 1/2 a tie, 0 a loss), f = a judge's."""
    designs = selection_services.sample_designs(study) if designs is None else designs
    finite = analysis_parameters(study)["estimate_target"] == "these_items"
    judge_names = sorted({r.rater for r in judges})
    out = []
    for pair in _system_pairs(study):
        design = designs.get(pair)
        if design is None:
            continue
        y_by = _item_scores(humans, pair)
        predictors = {name: _item_scores([r for r in judges if r.rater == name], pair) for name in judge_names}
        predictors = {name: f_by for name, f_by in predictors.items() if f_by}
        if len(predictors) > 1:  # the several-judges predictor, when two or more judges scored this pair
            predictors[ALL_JUDGES] = _item_scores([r for r in judges if r.rater in predictors], pair)
        entry = {
            "system_a": pair[0],
            "system_b": pair[1],
            "method": design.method,
            "design": design.kind,
            "design_words": DESIGN_WORDS[design.kind],
            "frame": len(design.frame),
            "candidates": design.candidates,
            "drawn": len(design.chosen) or len(design.frame),
            "note": _design_note(design, predictors),
            "target": ppi.THESE_ITEMS if finite else ppi.ITEMS_LIKE_THESE,
            "estimates": [],
            "reason": "",
            "description": None,
        }
        judged = [i for i in (design.chosen or design.frame) if i in y_by]
        if design.probability_sample or (design.kind == UNRECORDED and _census(design, y_by)):
            entry["labelled"], entry["estimates"], entry["reason"] = _pair_estimates(design, y_by, predictors, finite)
        else:
            entry["labelled"] = len(judged)
            entry["reason"] = design.reason  # the page: the mean describes the judged items only, and why
            if judged:
                entry["description"] = float(np.mean([y_by[i] for i in judged]))
        out.append(entry)
    return out


def hybrid_strengths(
    study: Study, humans: list[Row], judges: list[Row], designs: dict[tuple[str, str], SampleDesign] | None = None
) -> list[dict]:
    """Per judge: Bradley-Terry strengths of every system from the humans alone and from the humans and the judge
    (PPI++ logistic M-estimation, analytics/core/ppi.py), on the Arena scale against the study's first system
    (1000 + 400 log10-odds; that system is the reference, without an interval). A unit is one item of one system
    pair: Y the humans' mean score for its first system, f the judge's; labelled where both judged it. Only when
    every system pair's items were drawn uniformly at random (or all judged): the fit takes its labelled units for
    a uniform sample. ``efficiency``: the squared ratio of the two intervals' widths, what one labelled unit with
    the judge is worth in units by people alone (checked against the realised ratio of mean squared errors on PRD
    by tests/analytics/core/test_coverage_prd.py)."""
    systems = list(study.systems.order_by("id").values_list("name", flat=True))
    index = {s: i for i, s in enumerate(systems)}

    def arena(theta: float) -> float:  # log-odds against the reference -> 1000 + 400 log10-odds
        return ratings.INITIAL + ratings.SCALE / math.log(ratings.BASE) * theta

    designs = selection_services.sample_designs(study) if designs is None else designs
    if strengths_blocked(designs, humans):
        return []  # its M-estimation takes the labelled units for a uniform sample; any other would bias it
    pairs = _system_pairs(study)
    out = []
    for name in sorted({r.rater for r in judges}):
        rows = [r for r in judges if r.rater == name]
        lab: list[tuple[int, int, float, float]] = []
        rest: list[tuple[int, int, float]] = []
        for pair in pairs:
            y_by, f_by = _item_scores(humans, pair), _item_scores(rows, pair)
            a, b = index[pair[0]], index[pair[1]]
            lab += [(a, b, y_by[i], f_by[i]) for i in sorted(set(y_by) & set(f_by))]
            rest += [(a, b, f_by[i]) for i in sorted(set(f_by) - set(y_by))]
        if len(lab) < 2 or not rest:
            continue
        la, lb, y, f = (np.array(v) for v in zip(*lab, strict=True))
        ra, rb, fu = (np.array(v) for v in zip(*rest, strict=True))
        try:
            human = ppi.ppi_bradley_terry(la, lb, y, f, ra, rb, fu, len(systems), lam=0.0)
            hybrid = ppi.ppi_bradley_terry(la, lb, y, f, ra, rb, fu, len(systems))
        except ValueError:  # the labelled units do not connect every system
            continue
        for i, system in enumerate(systems):
            width = human.high[i] - human.low[i]
            out.append(
                {
                    "judge": name,
                    "system": system,
                    "labelled": len(lab),
                    "judge_only": len(rest),
                    "human_only": arena(human.theta[i]),
                    "human_low": arena(human.low[i]),
                    "human_high": arena(human.high[i]),
                    "hybrid": arena(hybrid.theta[i]),
                    "low": arena(hybrid.low[i]),
                    "high": arena(hybrid.high[i]),
                    "lambda": hybrid.lam,
                    "efficiency": (width / (hybrid.high[i] - hybrid.low[i])) ** 2 if width else None,
                }
            )
    return out


def strengths_blocked(designs: dict[tuple[str, str], SampleDesign], humans: list[Row]) -> list[str]:
    """The system pairs whose judged items are not a uniform random sample (nor all judged): the strengths' fit,
    which takes its labelled units for one, is not computed while any pair is one."""
    return [
        f"{a} vs {b}"
        for (a, b), design in designs.items()
        if design.kind != UNIFORM and not (design.kind == UNRECORDED and _census(design, _item_scores(humans, (a, b))))
    ]


def _census(design: SampleDesign, y_by: dict[int, float]) -> bool:
    """Whether people judged every item a design stands for (a census needs no record of how items were drawn)."""
    return bool(design.frame) and all(i in y_by for i in design.frame)


def separability_report(study: Study) -> dict:
    out = {}
    for run in SeparabilityRun.objects.filter(study=study).select_related(
        "comparison__system_a", "comparison__system_b"
    ):
        values = dict(run.items.values_list("item__external_id", "delta"))
        defined = [v for v in values.values() if v is not None]
        out.setdefault(run.metric, {})[f"{run.comparison.system_a.name} vs {run.comparison.system_b.name}"] = {
            "items": values,
            "mean": float(np.mean(defined)) if defined else None,
            "undefined": sum(1 for v in values.values() if v is None),
        }
    return out


def study_report(study: Study, population: Population | None = None) -> dict:
    """The full report as JSON-ready data (SPEC §8 keys), NaN as null, for one rater ``population``
    (analytics/populations.py; humans by default). Leaderboards, win rates, stopping, consistency, positional
    bias and agreement use the population's judgments only; judges are checked against the humans under the
    same filters."""
    population = population or Population()
    every = load_rows(study, population.question)
    rows = admitted(every, population)
    reference = admitted(every, population.humans()) + [r for r in every if r.kind == "judge"]
    humans, judges = [r for r in reference if r.kind == "human"], [r for r in reference if r.kind == "judge"]
    designs = selection_services.sample_designs(study)
    systems = list(study.systems.values_list("name", flat=True))
    deltas = separability_by_item(study)
    answers = answer_style.Answers(study, {r.pair_id for r in rows} | {r.pair_id for r in reference})
    kinds: dict[str, int] = defaultdict(int)
    for r in every:
        kinds[r.kind] += 1
    asked = questions.preference_questions(study)
    question = next((q for q in asked if q.key == population.question), asked[0])
    report = {
        "study": study.name,
        "question": {"key": question.key or None, "text": question.text, "how": question.how},
        "questions": [{"key": q.key or None, "text": q.text, "how": q.how} for q in asked],
        "systems": systems,
        "population": population.as_dict(),
        "populations": population_choices(every),
        "judgments": {
            "total": len(rows),
            "study_total": len(every),
            "by_kind": dict(kinds),
            "screened_out_left_out": (0 if population.include_screened else sum(1 for r in every if r.screened_out)),
            "superseded": sum(1 for r in rows if r.superseded),
            "revised": Judgment.objects.filter(study=study, revised=True).count(),
            "raters": len({r.rater for r in rows}),
            # skipped pairs are no judgments: counted apart, by reason
            "skipped": dict(
                Skip.objects.filter(rater__study=study).values_list("reason").annotate(n=Count("id")).order_by("reason")
            ),
        },
        "consistency": consistency_report(rows, deltas),
        "separability": separability_report(study),
        **ratings_report(study, rows, systems, deltas, answers),
        "length_controlled": answer_style.length_controlled_report(systems, humans, judges, answers),
        "stopping": (stopping := stopping_report(study, rows)),
        "positional_bias": positional_bias_report(rows, reference),
        "agreement": agreement_report(rows),
        "indeterminacy": indeterminacy_report(study, reference),
        "hybrid_strengths": hybrid_strengths(study, humans, judges, designs),
        "hybrid_strengths_blocked": strengths_blocked(designs, humans),
        "win_rate_estimates": win_rate_estimates(study, humans, judges, designs),
    }
    report["rater_reliability"] = reliability_report(rows, systems)
    for key in ("elo", "sep_elo", "bradley_terry"):
        if report[key].get("available"):
            mark_adjacent_orders(report[key]["leaderboard"], stopping)
    return clean(report)
