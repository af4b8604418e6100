"""The report's rating intervals reach the items (docs/ratings.md#clustered-by-item): the Bradley-Terry and the
style-controlled boards' sandwiches are clustered by each battle's item, and the style board gives each system's
rating without the penalty and says, in words, which of the two its intervals are for."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.core import ratings
from analytics.populations import Population
from analytics.report import data
from analytics.report.assembly import study_report
from analytics.report.ratings import battles
from analytics.report.style import StyleControl, Unpenalised
from analytics.sentences import style_sentence
from analytics.tables import report_tables


def test_the_boards_intervals_are_clustered_by_each_battles_item(judged_study):
    report = study_report(judged_study)
    systems = report.systems
    rows = data.admitted(data.load_rows(judged_study), Population())
    battle_rows, a, b, score = battles(rows, systems)
    items = [r.item_id for r in battle_rows]
    assert len(set(items)) < len(items)  # two people on every item: clustering matters here
    n = len(systems)
    point = ratings.bradley_terry(a, b, score, n)
    low, high = ratings.sandwich_bradley_terry(a, b, score, n, point, items=items)
    by_system = {r.system: r for r in report.bradley_terry.leaderboard}
    for i, system in enumerate(systems):
        assert (by_system[system].low, by_system[system].high) == pytest.approx((low[i], high[i]))
    plain_low, _ = ratings.sandwich_bradley_terry(a, b, score, n, point)
    assert not np.allclose(low, plain_low)

    styled = report.style_control
    assert isinstance(styled, StyleControl) and styled.unpenalised is not None
    answers = data.Answers(judged_study, {r.pair_id for r in battle_rows})
    counts_a, counts_b, _, _ = answers.of(battle_rows, [systems[i] for i in a])
    x = ratings.style_features(counts_a, counts_b)
    fit = ratings.contextual_bradley_terry(a, b, score, x, n, reg=styled.reg, penalty_curvature=True, items=items)
    free = ratings.contextual_bradley_terry(a, b, score, x, n, reg=0.0)
    rows_by_system = {r.system: r for r in styled.leaderboard}
    for i, system in enumerate(systems):
        assert (rows_by_system[system].low, rows_by_system[system].high) == pytest.approx((fit.low[i], fit.high[i]))
    assert [u.system for u in styled.unpenalised] == [r.system for r in styled.leaderboard]  # best first, as the board
    for u in styled.unpenalised:
        i = systems.index(u.system)
        assert u.rating == pytest.approx(free.ratings[i]) and u.shift == pytest.approx(fit.ratings[i] - free.ratings[i])
    # the style table shows both boards side by side: the penalised rating with its interval, the one without
    header, table = report_tables(report)["leaderboard-style"]
    unpenalised = {u.system: u for u in styled.unpenalised}
    for row in table:
        cells = dict(zip(header, row, strict=True))
        u = unpenalised[cells["system"]]
        assert (cells["rating without the penalty"], cells["moved by the penalty"]) == (u.rating, u.shift)
        assert cells["rating"] - cells["moved by the penalty"] == pytest.approx(u.rating)


def test_the_style_sentence_says_which_ratings_the_intervals_are_for():
    styled = StyleControl(
        battles=10,
        leaderboard=[],
        coefficients={"sum_assistant_tokens": 0.07},
        unpenalised_coefficients={"sum_assistant_tokens": 0.8},
        reg=1.0,
        shrinkage=0.09,
        moved=[],
        any_moved=False,
        encoding="cl100k_base",
        unpenalised=[Unpenalised("gpt4", 1108.3, 57.9), Unpenalised("gpt35", 963.3, -59.1)],
    )
    words = style_sentence(styled)
    assert "The intervals are for the ratings under this penalty, not for the ratings without it" in words
    assert "by up to 59 points (gpt35)" in words
    assert "gpt4 1108 (the penalty shifts it +58); gpt35 963 (the penalty shifts it -59)." in words
    # a report stored before the unpenalised ratings were added reads without them, and says nothing of them
    older = StyleControl(**{**styled.__dict__, "unpenalised": None})
    assert "under this penalty" not in style_sentence(older)
