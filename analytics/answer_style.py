"""The report's answers-as-written sections: the style-controlled Bradley-Terry board beside the plain
one, and length-controlled win rates per system pair for people and for each judge.

Both read the answers each judgment compared (the rated pair's two generations): their style counted as Chatbot
Arena counts it (``analytics.core.style``) and their length in characters (as AlpacaEval 2 measures it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from analytics.core import ratings, style
from analytics.core.length_control import MIN_ITEMS, NoEstimate, length_controlled_win_rate
from analytics.leaderboards import style_board
from annotation.models import Generation, Pair, Study
from selection.core import winners

Row = Any  # analytics.services.Row (one judgment, flattened): not imported, services imports this module

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
                for pk, ga, gb in Pair.objects.filter(item__study=study, pk__in=ids[start : start + CHUNK]).values_list(
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


def style_control_report(
    battle_rows: list[Row],
    a: np.ndarray,
    b: np.ndarray,
    score: np.ndarray,
    systems: list[str],
    answers: Answers,
    reg: float = ratings.STYLE_REG,
) -> dict:
    """The style-controlled board (arena-rank's ContextualBradleyTerry, penalty ``reg``: the study's setting, 1 by
    default as arena-rank's; sandwich intervals) on the same battles as the plain Bradley-Terry board, its
    coefficients with and without the penalty, and who moved."""
    if len(score) == 0:
        return {"available": False, "reason": "no judgments with a choice yet"}
    if len({*a.tolist(), *b.tolist()}) < 2:
        return {"available": False, "reason": "fewer than two systems have been compared"}
    counts_a, counts_b, _, _ = answers.of(battle_rows, [systems[i] for i in a])
    board, coefficients = style_board(systems, a, b, score, counts_a, counts_b, reg, penalty_curvature=True)
    unpenalised = coefficients if reg == 0 else style_board(systems, a, b, score, counts_a, counts_b, 0.0)[1]
    size = math.sqrt(sum(v * v for v in coefficients.values()))
    free = math.sqrt(sum(v * v for v in unpenalised.values()))
    # who moved: against the same fit without the style terms (the same battle weights), so that a move is style's
    weighted = ratings.contextual_bradley_terry(a, b, score, np.zeros((len(score), 1)), len(systems))
    plain_order = sorted(range(len(systems)), key=lambda i: (-weighted.ratings[i], systems[i]))
    place = {systems[i]: k + 1 for k, i in enumerate(plain_order)}
    moved = [
        {
            "system": r["system"],
            "plain_place": place[r["system"]],
            "style_place": i + 1,
            "change": place[r["system"]] - (i + 1),
        }
        for i, r in enumerate(board)
    ]
    return {
        "available": True,
        "battles": len(score),
        "leaderboard": board,
        "coefficients": coefficients,
        "unpenalised_coefficients": unpenalised,
        "reg": reg,
        "shrinkage": size / free if free > 0 else None,
        "moved": moved,
        "any_moved": any(m["change"] for m in moved),
        "encoding": style.ENCODING.removesuffix("_offline"),
    }


def length_controlled_report(systems: list[str], humans: list[Row], judges: list[Row], answers: Answers) -> list[dict]:
    """Per rater population (people, then each judge) and system pair: the plain and the length-controlled win
    rate of the pair's first system (in the study's order), its 95 % interval over items, and the length
    coefficient (> 0: longer answers are preferred)."""
    populations = [("People", [r for r in humans if r.effective_choice is not None])]
    for name in sorted({r.rater for r in judges}):
        populations.append((f"Judge {name}", [r for r in judges if r.rater == name and r.effective_choice is not None]))
    order = {s: i for i, s in enumerate(systems)}
    out = []
    for label, rows in populations:
        by_pair: dict[tuple[str, str], list[Row]] = {}
        for r in rows:
            first, second = sorted((r.system_a, r.system_b), key=order.__getitem__)
            by_pair.setdefault((first, second), []).append(r)
        for (first, second), pair_rows in sorted(by_pair.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]])):
            score = winners.score_for_a([r.rating for r in pair_rows]).reshape(-1)
            flip = np.array([r.system_a != first for r in pair_rows])
            score = np.where(flip, 1 - score, score)
            _, _, length_first, length_second = answers.of(pair_rows, [first] * len(pair_rows))
            entry = {
                "population": label,
                "system_a": first,
                "system_b": second,
                "judgments": len(pair_rows),
                "items": len({r.item_id for r in pair_rows}),
                "win_rate": float(score.mean()),
                "mean_length_a": float(length_first.mean()),
                "mean_length_b": float(length_second.mean()),
            }
            try:
                fit = length_controlled_win_rate(score, length_first, length_second, [r.item_id for r in pair_rows])
            except NoEstimate as exc:
                entry.update(estimate=None, low=None, high=None, length_coefficient=None, reason=str(exc))
            else:
                entry.update(
                    estimate=fit.estimate,
                    low=fit.low,
                    high=fit.high,
                    length_coefficient=fit.length_coefficient,
                    reason="",
                )
            out.append(entry)
    return out


__all__ = ["MIN_ITEMS", "Answers", "length_controlled_report", "style_control_report"]
