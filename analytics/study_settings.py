"""The report's settings of a study (``AnalysisSettings``), each declared once (registered by
``AnalyticsConfig.ready``)."""

from __future__ import annotations

from annotation.study_settings import Range, Setting

SETTINGS = [
    Setting(
        "elo_k", "ELO K factor", "How far one battle moves a rating.", "analysis", order=10, limits=Range(0.01, 1_000)
    ),
    Setting(
        "bootstrap_rounds",
        "Bootstrap rounds",
        "Resamples behind the leaderboards' 95 % intervals.",
        "analysis",
        order=20,
        limits=Range(10, 2_000),
    ),
    Setting(
        "rating_aggregation",
        "Which judgments are battles",
        "Every judgment, the majority per pair, or one sampled per item and system pair.",
        "analysis",
        order=30,
    ),
    Setting(
        "style_penalty",
        "Style control's penalty",
        "Shrinks the style coefficients of the style-controlled "
        "board toward 0: 1 as on LMArena's board (arena-rank's default), 0 for none. The report says how much it "
        "shrinks them.",
        "analysis",
        order=65,
        limits=Range(0, 100),
    ),
    Setting(
        "indeterminacy_beta",
        "Human sensitivity β (forced choice only)",
        "The share of raters who chose one "
        "output but would accept the other, for judge metrics when humans gave forced choices only.",
        "analysis",
        order=60,
        limits=Range(0, 1),
    ),
    Setting(
        "estimate_target",
        "Win-rate estimates are for",
        "Items like these: the intervals also count that the "
        "study holds only some of the items it stands for. These items: the study's own items only, so judging "
        "all of them gives the exact answer.",
        "analysis",
        order=70,
    ),
]
