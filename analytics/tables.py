"""The report's numbers as named tables: shown on the page and downloadable as CSV."""

from __future__ import annotations

from analytics.report.assembly import Report
from analytics.report.ratings import Board, WinRates
from analytics.report.reliability import Reliability, WeightedBoard
from analytics.report.style import StyleControl

Table = tuple[list[str], list[list]]

STOPPING = [
    "system_a",
    "system_b",
    "leader",
    "wins_a",
    "wins_b",
    "ties",
    "k",
    "n",
    "pool",
    "risk",
    "risk_beyond_pool",
    "threshold",
    "decided",
    "decision",
    "win_rate_low",
    "win_rate_high",
    "decision_items",
    "decision_design",
]
RATING_SETS = [
    "rater",
    "kind",
    "item",
    "system_a",
    "system_b",
    "n",
    "consistency",
    "preference_strength",
    "separability",
]
PER_ITEM = ["kind", "item", "system_a", "system_b", "raters", "consistency", "preference_strength", "separability"]
HYBRID = [
    "judge",
    "system",
    "labelled",
    "judge_only",
    "human_only",
    "human_low",
    "human_high",
    "hybrid",
    "low",
    "high",
    "lambda",
    "efficiency",
]


def report_tables(report: Report) -> dict[str, Table]:
    tables: dict[str, Table] = {}
    for key, board in (("elo", report.elo), ("sep_elo", report.sep_elo), ("bradley_terry", report.bradley_terry)):
        if isinstance(board, Board):
            online = key != "bradley_terry"
            tables[f"leaderboard-{key}"] = (
                [
                    "rank",
                    "system",
                    "rating",
                    "low_2.5",
                    "high_97.5",
                    *(["online"] if online else []),
                    "order_above_next",
                ],
                [
                    [r.rank, r.system, r.rating, r.low, r.high, *([r.online] if online else []), r.order_below]
                    for r in board.leaderboard
                ],
            )
    styled = report.style_control
    if isinstance(styled, StyleControl):
        moved = {m.system: m for m in styled.moved}
        # the board's interval is for the penalised ratings; beside it, each system's rating without the penalty
        free = {u.system: u for u in styled.unpenalised or []}
        nan = float("nan")  # a report stored before the unpenalised fit was added
        tables["leaderboard-style"] = (
            [
                "place",
                "system",
                "rating",
                "low (2.5 %)",
                "high (97.5 %)",
                "rating without the penalty",
                "moved by the penalty",
                "place without style control",
            ],
            [
                [
                    moved[r.system].style_place,
                    r.system,
                    r.rating,
                    r.low,
                    r.high,
                    free[r.system].rating if r.system in free else nan,
                    free[r.system].shift if r.system in free else nan,
                    moved[r.system].plain_place,
                ]
                for r in styled.leaderboard
            ],
        )
    entries = report.length_controlled
    why = any(e.reason for e in entries)
    tables["length-controlled"] = (
        [
            "raters",
            "A",
            "B",
            "judgments",
            "items",
            "win rate of A",
            "length-controlled",
            "low (2.5 %)",
            "high (97.5 %)",
            "length coefficient",
            "length of A",
            "length of B",
            *(["why no estimate"] if why else []),
        ],
        [
            [
                e.population,
                e.system_a,
                e.system_b,
                e.judgments,
                e.items,
                e.win_rate,
                e.estimate,
                e.low,
                e.high,
                e.length_coefficient,
                round(e.mean_length_a),
                round(e.mean_length_b),
                *([e.reason] if why else []),
            ]
            for e in entries
        ],
    )
    win = report.win_rates
    if isinstance(win, WinRates):
        tables["win-rates"] = (
            ["system", *win.systems],
            [[s, *row] for s, row in zip(win.systems, win.matrix, strict=True)],
        )
        tables["win-ratio"] = (["system", "win_ratio"], [[r.system, r.win_ratio] for r in win.win_ratio])
    reliability = report.rater_reliability
    if isinstance(reliability, Reliability):
        tables["rater-reliability"] = (
            ["rater", "judgments", "scored_pairs", "reliability", "model_accuracy", "reliability_in_words"],
            [[r.rater, r.judgments, r.scored_pairs, r.reliability, r.skill, r.in_words] for r in reliability.raters],
        )
        weighted = reliability.weighted_board
        if isinstance(weighted, WeightedBoard):
            tables["leaderboard-reliability"] = (
                ["place", "system", "rating", "majority_place"],
                [[r.place, r.system, r.rating, r.majority_place] for r in weighted.leaderboard],
            )
    tables["stopping"] = (
        STOPPING,
        [
            [
                s.system_a,
                s.system_b,
                s.leader,
                s.wins_a,
                s.wins_b,
                s.ties,
                s.k,
                s.n,
                s.pool,
                s.risk,
                s.risk_beyond_pool,
                s.threshold,
                s.decided,
                s.decision,
                s.win_rate_low,
                s.win_rate_high,
                s.decision_items,
                s.decision_design,
            ]
            for s in report.stopping
        ],
    )
    c = report.consistency
    tables["rating-sets"] = (
        RATING_SETS,
        [
            [s.rater, s.kind, s.item, s.system_a, s.system_b, s.n, s.consistency, s.preference_strength, s.separability]
            for s in c.rating_sets
        ],
    )
    tables["item-consistency"] = (
        PER_ITEM,
        [
            [i.kind, i.item, i.system_a, i.system_b, i.raters, i.consistency, i.preference_strength, i.separability]
            for i in c.per_item
        ],
    )
    rows = []
    for kind, bins in c.by_separability.items():
        for scheme, summaries in (("equal_width", bins.equal_width), ("equal_count", bins.equal_count)):
            for b in summaries:
                rows.append(
                    [
                        kind,
                        scheme,
                        b.bin,
                        b.low,
                        b.high,
                        b.count,
                        b.mean,
                        b.se,
                        # by value: the stored JSON's key order is the database's (jsonb orders by length)
                        "; ".join(f"{v}: {n}" for v, n in sorted(b.histogram.items())),
                    ]
                )
    tables["consistency-bins"] = (
        [
            "kind",
            "bins",
            "bin",
            "delta_low",
            "delta_high",
            "rating_sets",
            "mean_consistency",
            "standard_error",
            "distribution",
        ],
        rows,
    )
    bias = report.positional_bias
    tables["positional-bias"] = (
        ["rater", "kind", "non_tie_judgments", "first_chosen", "p_first", "low_95", "high_95", "sign_flip_p", "items"],
        [[r.rater, r.kind, r.n, r.first_chosen, r.rate, r.low, r.high, r.p_value, r.items] for r in bias.raters]
        + [
            [f"all {kind}s", kind, p.n, p.first_chosen, p.rate, p.low, p.high, p.p_value, p.items]
            for kind, p in bias.populations.items()
        ],
    )
    tables["debiasing"] = (
        [
            "judge",
            "threshold",
            "first_at_threshold",
            "p_first_before",
            "p_first_after",
            "accuracy_before",
            "accuracy_after",
            "compared_with_humans",
        ],
        [
            [
                name,
                d.threshold,
                d.tie_share,
                d.first_rate_before,
                d.first_rate_after,
                d.accuracy_before,
                d.accuracy_after,
                d.compared_with_humans,
            ]
            for name, d in bias.debiasing.items()
        ],
    )
    tables["cohen-kappa"] = (
        ["rater_1", "rater_2", "overlap", "kappa"],
        [[k.rater_1, k.rater_2, k.overlap, k.kappa] for k in report.agreement.cohen_kappa],
    )
    judges = report.indeterminacy.judges
    tables["judge-metrics"] = (
        [
            "judge",
            "units",
            "verdicts",
            "agreement",
            "agreement_split_first",
            "agreement_split_left_out",
            "p_first",
            "first_share",
            "mse",
            "coverage",
            "hit_rate",
            "kappa_per_verdict",
            "kappa_per_item",
            "kl",
            "jsd",
            "beta_hat",
        ],
        [
            [
                name,
                j.units,
                j.verdicts,
                j.agreement,
                j.agreement_split_first,
                j.agreement_split_left_out,
                j.p_first,
                j.first_share,
                j.mse,
                j.coverage,
                j.hit_rate,
                j.kappa_per_verdict,
                j.kappa,
                j.kl,
                j.jsd,
                j.beta_hat,
            ]
            for name, j in judges.items()
        ],
    )
    tables["threshold-sweep"] = (
        ["judge", "tau", "decision_consistency", "estimation_bias"],
        [
            [name, t.tau, t.decision_consistency, t.estimation_bias]
            for name, j in judges.items()
            for t in j.threshold_sweep
        ],
    )
    tables["beta-sensitivity"] = (
        ["judge", "beta", "mse"],
        [[name, b.beta, b.mse] for name, j in judges.items() for b in j.beta_sensitivity],
    )
    columns = [
        "system_a",
        "system_b",
        "design",
        "method",
        "target",
        "estimator",
        "judge",
        "labelled",
        "judge_only",
        "estimate",
        "low",
        "high",
        "efficiency",
        "labels_worth",
        "lambda",
    ]
    rows = []
    for e in report.win_rate_estimates:
        for est in e.estimates:
            rows.append(
                [
                    e.system_a,
                    e.system_b,
                    e.design,
                    e.method,
                    est.target,
                    est.label,
                    est.judge,
                    est.labelled,
                    est.judge_only,
                    est.estimate,
                    est.low,
                    est.high,
                    est.efficiency,
                    est.labels_worth,
                    est.lam,
                ]
            )
        if e.description is not None:  # items chosen on purpose: their mean, describing them only
            rows.append(
                [
                    e.system_a,
                    e.system_b,
                    e.design,
                    e.method,
                    "the judged items only",
                    "mean of the judged items",
                    None,
                    e.labelled,
                    None,
                    e.description,
                    None,
                    None,
                    None,
                    None,
                    None,
                ]
            )
    tables["win-rate-estimates"] = (columns, rows)
    tables["hybrid-strengths"] = (
        HYBRID,
        [
            [
                h.judge,
                h.system,
                h.labelled,
                h.judge_only,
                h.human_only,
                h.human_low,
                h.human_high,
                h.hybrid,
                h.low,
                h.high,
                h.lam,
                h.efficiency,
            ]
            for h in report.hybrid_strengths
        ],
    )
    return tables
