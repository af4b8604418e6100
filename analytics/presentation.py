"""How a stored report is presented: the headline numbers, the sections with their tables and figures,
and the page body rendered once per refresh (``analytics.stored``), so a page view only reads it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

from django.template.loader import render_to_string

from analytics import answer_style, plots
from analytics.populations import Population
from analytics.tables import report_tables

# --- How each kind of number reads on the page (the CSV and the API keep the machine names and full precision) ---


def plural(n: int, noun: str, many: str | None = None) -> str:
    """'1 rater', '2 raters', '1,760 raters': a count with its noun, thousands grouped."""
    return f"{n:,} {noun if n == 1 else (many or noun + 's')}"


def as_count(v) -> str:
    return f"{int(v):,}"


def as_rating(v) -> str:
    """A rating on the ELO / Arena scale: the bootstrap's spread is tens of points, so decimals are noise."""
    return f"{v:,.0f}"


def as_share(v) -> str:
    """A probability, win rate or agreement: three decimals, enough to compare with 0.5 and a margin of 0.05."""
    return f"{v:.3f}"


def as_two(v) -> str:
    """Consistency, kappa, separability, weights: two decimals."""
    return f"{v:.2f}"


def as_signed(v) -> str:
    """A coefficient or a bias, whose sign is the point."""
    return f"{v:+.3f}"


def as_signed_two(v) -> str:
    return f"{v:+.2f}"


def as_p_value(v) -> str:
    """A p-value or a risk: '< 0.001' rather than 0.000 (it is never exactly zero) or 7.06e-09."""
    return "< 0.001" if v < 0.001 else f"{v:.3f}"


def as_text(v) -> str:
    return str(v)


def as_yes_no(v) -> str:
    return "yes" if v else "no"


def as_bin(v) -> str:
    return str(int(v) + 1)  # the CSV counts bins from 0, people from 1


def words(mapping: dict[str, str]) -> Callable[[object], str]:
    """A machine value (e.g. a decision 'a') in words; an unknown value as it is."""
    return lambda v: mapping.get(v, str(v))


def as_distribution(v) -> str:
    """The CSV's 'value: count; ...' distribution of rating-set consistency as 'value: n rating sets, ...' with
    two decimals ('0.333333: 2' reads '0.33: 2 rating sets')."""
    if not v:
        return "none"
    parts = []
    for entry in str(v).split("; "):
        value, _, count = entry.rpartition(": ")
        parts.append(f"{float(value):.2f}: {plural(int(count), 'rating set')}".replace(" ", "\u00a0"))  # wrap between
    return ", ".join(parts)


@dataclass(frozen=True)
class Column:
    """A table column as the page shows it: its header in words and how its values read."""

    label: str
    format: Callable[[object], str] = as_text
    numeric: bool = True


SYSTEM_A, SYSTEM_B = "System A", "System B"  # a pair's first and second system, in every section alike
DECISIONS = {
    "a": f"{SYSTEM_A} better",
    "b": f"{SYSTEM_B} better",
    "equivalent": "equivalent (within the margin)",
    "undecided": "undecided",
}
KINDS = {"human": "person", "judge": "LLM judge"}

# One home for every table column on the report page: machine name -> header and format. A name that means
# different things in different sections (a 'low' of a win rate or of a rating) is in SECTION_COLUMNS.
COLUMNS: dict[str, Column] = {
    "rank": Column("Rank", as_count),
    "place": Column("Place", as_count),
    "system": Column("System", numeric=False),
    "judge": Column("Judge", numeric=False),
    "rater": Column("Rater", numeric=False),
    "item": Column("Item", numeric=False),
    "kind": Column("Who", words(KINDS), numeric=False),
    "system_a": Column(SYSTEM_A, numeric=False),
    "system_b": Column(SYSTEM_B, numeric=False),
    "A": Column(SYSTEM_A, numeric=False),
    "B": Column(SYSTEM_B, numeric=False),
    "rating": Column("Rating", as_rating),
    "low_2.5": Column("Lower 2.5 %", as_rating),
    "high_97.5": Column("Upper 97.5 %", as_rating),
    "online": Column("Online (one pass, creation order)", as_rating),
    "order_above_next": Column("Order above next", numeric=False),
    "low (2.5 %)": Column("Lower 2.5 %", as_rating),
    "high (97.5 %)": Column("Upper 97.5 %", as_rating),
    "place without style control": Column("Place without style control", as_count),
    "raters": Column("Raters", as_count),
    "judgments": Column("Judgments", as_count),
    "items": Column("Items", as_count),
    "win rate of A": Column(f"Win rate of {SYSTEM_A}", as_share),
    "length-controlled": Column("Length-controlled win rate", as_share),
    "length coefficient": Column("Length coefficient", as_signed),
    "length of A": Column(f"Length of {SYSTEM_A} (characters)", as_count),
    "length of B": Column(f"Length of {SYSTEM_B} (characters)", as_count),
    "why no estimate": Column("Why no estimate", numeric=False),
    "win_ratio": Column("Win ratio", as_share),
    "leader": Column("Leader", numeric=False),
    "wins_a": Column(f"Wins of {SYSTEM_A}", as_count),
    "wins_b": Column(f"Wins of {SYSTEM_B}", as_count),
    "ties": Column("Ties", as_count),
    "k": Column("Leader's wins (k)", as_count),
    "n": Column("Items counted (n)", as_count),
    "pool": Column("Pool (items)", as_count),
    "risk": Column("Risk within the pool", as_p_value),
    "risk_beyond_pool": Column("Risk beyond the pool", as_p_value),
    "threshold": Column("Risk threshold", as_two),
    "decided": Column("Decided by the risk", as_yes_no, numeric=False),
    "decision": Column("Anytime-valid decision", words(DECISIONS), numeric=False),
    "win_rate_low": Column(f"Win rate of {SYSTEM_A}, lower bound", as_share),
    "win_rate_high": Column(f"Win rate of {SYSTEM_A}, upper bound", as_share),
    "decision_items": Column("Items in the decision", as_count),
    "consistency": Column("Consistency", as_two),
    "preference_strength": Column("Preference strength", as_signed_two),
    "separability": Column("Separability", as_two),
    "bins": Column("Binning", words({"equal_width": "4 equal-width", "equal_count": "5 equal-count"}), numeric=False),
    "bin": Column("Bin (1 = least separable)", as_bin),
    "delta_low": Column("Separability from", as_two),
    "delta_high": Column("Separability to", as_two),
    "rating_sets": Column("Rating sets", as_count),
    "mean_consistency": Column("Mean consistency", as_two),
    "standard_error": Column("Standard error", as_two),
    "distribution": Column("Consistency distribution", as_distribution, numeric=False),
    "non_tie_judgments": Column("Non-tie judgments", as_count),
    "first_chosen": Column("First shown chosen", as_count),
    "p_first": Column("P(first shown chosen)", as_share),
    "low_95": Column("Lower 95 %", as_share),
    "high_95": Column("Upper 95 %", as_share),
    "binomial_p": Column("Binomial p-value", as_p_value),
    "first_at_threshold": Column("Share at the threshold decided first", as_share),
    "p_first_before": Column("P(first) before", as_share),
    "p_first_after": Column("P(first) after", as_share),
    "accuracy_before": Column("Accuracy before", as_share),
    "accuracy_after": Column("Accuracy after", as_share),
    "compared_with_humans": Column("Compared with humans", as_count),
    "rater_1": Column("Rater 1", numeric=False),
    "rater_2": Column("Rater 2", numeric=False),
    "overlap": Column("Shared pairs", as_count),
    "kappa": Column("Cohen's κ", as_two),
    "units": Column("Pairs (units)", as_count),
    "verdicts": Column("Verdicts", as_count),
    "agreement": Column("Agreement", as_share),
    "agreement_split_first": Column("Agreement, splits broken by the first vote", as_share),
    "agreement_split_left_out": Column("Agreement, splits left out", as_share),
    "first_share": Column("First shown, share of all verdicts", as_share),
    "mse": Column("MSE", as_share),
    "coverage": Column("Coverage", as_share),
    "hit_rate": Column("Hit rate", as_share),
    "kappa_per_verdict": Column("Cohen's κ per verdict", as_two),
    "kappa_per_item": Column("Cohen's κ per item", as_two),
    "kl": Column("KL(humans ‖ judge)", as_share),
    "jsd": Column("JS divergence", as_share),
    "beta_hat": Column("β̂", as_two),
    "tau": Column("Threshold τ", as_two),
    "decision_consistency": Column("Decision consistency", as_share),
    "estimation_bias": Column("Estimation bias", as_signed),
    "beta": Column("Human sensitivity β", as_two),
    "design": Column("Design", numeric=False),
    "method": Column("Selection method", numeric=False),
    "target": Column("Estimate for", numeric=False),
    "estimator": Column("Estimate from", numeric=False),
    "labelled": Column("Items judged by people", as_count),
    "judge_only": Column("Items judged by the judge only", as_count),
    "estimate": Column(f"Win rate of {SYSTEM_A}", as_share),
    "low": Column("Lower 2.5 %", as_share),
    "high": Column("Upper 97.5 %", as_share),
    "efficiency": Column("Efficiency", as_two),
    "labels_worth": Column("Worth, in items judged by people alone", lambda v: f"{v:,.1f}"),
    "lambda": Column("Judge's weight λ", as_two),
    "human_only": Column("Rating from people alone", as_rating),
    "human_low": Column("Lower 2.5 % (people alone)", as_rating),
    "human_high": Column("Upper 97.5 % (people alone)", as_rating),
    "hybrid": Column("Rating with the judge", as_rating),
    "reliability": Column("Reliability (κ beyond chance)", as_signed_two),
    "model_accuracy": Column("Accuracy by the model", as_share),
    "reliability_in_words": Column("In words", numeric=False),
    "majority_place": Column("Place with each pair's plain majority", as_count),
    "scored_pairs": Column("Pairs scored on (rated by two others too)", as_count),
}
SECTION_COLUMNS: dict[tuple[str, str], Column] = {
    ("length-controlled", "raters"): Column("Whose judgments", numeric=False),
    ("length-controlled", "low (2.5 %)"): Column("Lower 2.5 %", as_share),
    ("length-controlled", "high (97.5 %)"): Column("Upper 97.5 %", as_share),
    ("rating-sets", "n"): Column("Judgments", as_count),
    ("hybrid-strengths", "low"): Column("Lower 2.5 % (with the judge)", as_rating),
    ("hybrid-strengths", "high"): Column("Upper 97.5 % (with the judge)", as_rating),
    ("cohen-kappa", "kappa"): Column("Cohen's κ", as_two),
}
# the judge ranking's metrics (the report's own keys) in the same words as the judge table's headers
METRICS = {"kappa": "kappa_per_item"}


def column(section: str, name: str) -> Column:
    """How the page shows column ``name`` of table ``section``; the pairwise win-rate matrix's columns are
    systems and its cells win rates. An unknown name is shown as it is (a test keeps every name known)."""
    if (section, name) in SECTION_COLUMNS:
        return SECTION_COLUMNS[section, name]
    if section == "win-rates" and name != "system":
        return Column(name, as_share)
    return COLUMNS.get(name, Column(name))


def label(name: str, section: str = "") -> str:
    """The header of a column (or a judge metric) in words."""
    return column(section, METRICS.get(name, name)).label


def cell_text(value, col: Column) -> str:
    """A value as its column shows it; missing as a dash."""
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if isinstance(value, bool) and col.format is not as_yes_no:
        return as_yes_no(value)
    if isinstance(value, str) and col.numeric:
        return value  # a word in a numeric column (e.g. 'all humans'), left as it is
    return col.format(value)


# Where the page puts a table's columns in another order than the CSV: what a researcher reads first, first.
PAGE_ORDER = {
    "stopping": [
        "system_a",
        "system_b",
        "decision",
        "win_rate_low",
        "win_rate_high",
        "decision_items",
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
    ]
}


def page_table(section: str, columns: list[str], rows: list[list]) -> tuple[list[Column], list[list[tuple[str, bool]]]]:
    """A report table as the page shows it: its columns in reading order (``PAGE_ORDER``), each header in words,
    each cell formatted for its kind of number, with whether it is a number (right-aligned)."""
    order = [columns.index(c) for c in PAGE_ORDER.get(section, []) if c in columns]
    order += [i for i in range(len(columns)) if i not in order]
    columns, rows = [columns[i] for i in order], [[row[i] for i in order] for row in rows]
    cols = [column(section, c) for c in columns]
    return cols, [
        [(cell_text(v, col), col.numeric and not isinstance(v, str)) for v, col in zip(row, cols, strict=True)]
        for row in rows
    ]


def headlines(data: dict) -> list[dict]:
    """The numbers at the top of the report, each with its n and, where it has one, its interval and what it
    means; a number that is undefined says why instead."""
    counts = data["judgments"]
    out = [
        {
            "label": "judgment" if counts["total"] == 1 else "judgments",
            "value": f"{counts['total']:,}",
            "note": f"of {counts['study_total']:,} in the study",
        },
        {"label": "rater" if counts["raters"] == 1 else "raters", "value": f"{counts['raters']:,}", "note": ""},
    ]
    for kind, s in data["consistency"]["summary"].items():
        label = f"mean consistency ({kind}s)"
        if s["available"]:
            interval = f", 95 % CI [{s['low']:.2f}, {s['high']:.2f}]" if s["low"] is not None else ""
            out.append(
                {
                    "label": label,
                    "value": f"{s['mean']:.2f}",
                    "note": f"{consistency_words(s['mean']).capitalize()}: n = "
                    f"{plural(s['n'], 'rating set')} with two or more judgments{interval}",
                }
            )
        else:
            reason = s["reason"].removeprefix("not applicable: ")  # the value says it already
            out.append({"label": label, "value": "not applicable", "note": reason[:1].upper() + reason[1:]})
    agreement = data["agreement"]
    if agreement["krippendorff_alpha"] is not None:
        out.append(
            {
                "label": "Krippendorff's α",
                "value": f"{agreement['krippendorff_alpha']:.2f}",
                "note": f"{alpha_words(agreement['krippendorff_alpha']).capitalize()}: n = "
                f"{plural(agreement['units_with_two_or_more'], 'pair')} rated by two or more raters",
            }
        )
    elif counts["total"]:
        out.append({"label": "Krippendorff's α", "value": "not applicable", "note": agreement["krippendorff_reason"]})
    return out


def consistency_words(mean: float) -> str:
    """Mean rating-set consistency (Eq. 4) in words: 1 when a rater picks the same system on every sampled pair
    of an item, 0 when they pick both systems; ties in between."""
    if mean >= 0.8:
        return "raters stick to their choice across an item's sampled pairs"
    if mean >= 0.5:
        return "raters mostly stick to their choice, with ties or some flips"
    return "raters often tie or flip between the systems on the same item"


def position_words(rate: float, p_value: float | None) -> str:
    """A share of choices (a person's or a judge's) that went to the output shown first, in words: a lean is only
    named when the exact binomial test against 0.5 rejects at 5 %, and sized by its distance from 0.5 on one scale
    for everyone."""
    if p_value is None or not p_value < 0.05:
        return "no clear position bias"
    side = "first" if rate > 0.5 else "second"
    size = abs(rate - 0.5)
    strength = "a slight" if size < 0.05 else ("a clear" if size < 0.15 else "a strong")
    return f"{strength} lean toward the output shown {side}"


def alpha_words(alpha: float) -> str:
    """Krippendorff's alpha in words (Krippendorff's own guide: 0.8 reliable, 0.667 the lowest for tentative
    conclusions; 0 is chance)."""
    if alpha >= 0.8:
        return "raters agree reliably"
    if alpha >= 0.667:
        return "raters agree well enough for tentative conclusions"
    if alpha > 0:
        return "raters agree little beyond chance"
    return "raters agree no more than chance" if alpha > -0.05 else "raters disagree more than chance would"


def answers(data: dict) -> list[dict]:
    """The report's first screen: one card per question a researcher comes with -- who wins, how sure, are the
    raters consistent, can the judge be trusted, should I collect more -- each a sentence with its numbers, or
    what is missing to answer it."""
    cards = []
    board = data["bradley_terry"]
    if board.get("available") and len(board["leaderboard"]) >= 2:
        first, second = board["leaderboard"][0], board["leaderboard"][1]
        separate = first["low"] > second["high"]
        pair = next(
            (
                s
                for s in data.get("stopping", [])
                if {s["system_a"], s["system_b"]} == {first["system"], second["system"]}
            ),
            None,
        )
        winner = None if pair is None else {"a": pair["system_a"], "b": pair["system_b"]}.get(pair["decision"])
        sure = "its interval clears the runner-up's" if separate else "their intervals overlap"
        if winner == first["system"]:
            sure += (", and" if separate else ", but") + f" the pair's anytime-valid decision names {winner}"
        elif winner is not None:
            sure += f", but the pair's anytime-valid decision names {winner}"
        elif pair is not None:
            sure += f"; the pair's anytime-valid decision: {DECISIONS.get(pair['decision'], pair['decision'])}"
        settled = "decided" if winner == first["system"] else "not decided yet"
        cards.append(
            {
                "question": "Who wins?",
                "answer": f"{first['system']} leads, {settled}",
                "detail": f"Bradley-Terry {as_rating(first['rating'])} against {second['system']}'s "
                f"{as_rating(second['rating'])} ({first['rating'] - second['rating']:+.0f} points, "
                f"{board['battles']:,} battles); {sure}.",
            }
        )
    else:
        cards.append(
            {
                "question": "Who wins?",
                "answer": "Not yet",
                "detail": board.get("reason", "needs judgments of at least two systems").capitalize() + ".",
            }
        )
    alpha = data["agreement"].get("krippendorff_alpha")
    if alpha is not None:
        cards.append(
            {
                "question": "Are the raters consistent?",
                "answer": alpha_words(alpha).capitalize(),
                "detail": f"Krippendorff's α = {alpha:.2f} over {data['agreement']['units_with_two_or_more']:,} "
                "pairs rated by two or more raters (1 is full agreement, 0 is chance).",
            }
        )
    else:
        cards.append(
            {
                "question": "Are the raters consistent?",
                "answer": "Not measurable yet",
                "detail": "Needs pairs rated by two or more raters.",
            }
        )
    judges = {n: j for n, j in data["indeterminacy"]["judges"].items() if j.get("agreement") is not None}
    if judges:
        name, best = max(judges.items(), key=lambda kv: kv[1]["agreement"])
        bias = best.get("p_first")
        lean = (
            ""
            if bias is None
            else f" It picks the output shown first {100 * bias:.0f} % of the time when it "
            f"picks one (50 % = no bias): {position_words(bias, best.get('p_first_p_value'))}."
        )
        cards.append(
            {
                "question": "Can the judge be trusted?",
                "answer": f"{name} agrees with people on {100 * best['agreement']:.0f} % of verdicts",
                "detail": f"Over {best['verdicts']:,} verdicts, each against its pair's human majority.{lean} "
                "Every judge and metric: 'Judges against humans'.",
            }
        )
    stopping = data.get("stopping", [])
    if stopping:
        open_pairs = [s for s in stopping if s["decision"] == "undecided"]
        if open_pairs:
            names = ", ".join(f"{s['system_a']} vs {s['system_b']}" for s in open_pairs[:3])
            more = f" and {len(open_pairs) - 3} more" if len(open_pairs) > 3 else ""
            cards.append(
                {
                    "question": "Should I collect more?",
                    "answer": f"Yes, for {len(open_pairs)} of {len(stopping)} system pairs",
                    "detail": f"Still undecided: {names}{more}. Decided pairs need no more judgments.",
                }
            )
        else:
            cards.append(
                {
                    "question": "Should I collect more?",
                    "answer": "No: every system pair is decided",
                    "detail": "Each pair's anytime-valid decision is a winner or equivalence within the margin; "
                    "more judgments would not change them.",
                }
            )
    return cards


def figures(data: dict) -> dict[str, str]:
    """The report's SVG figures (each has a table next to it)."""
    out = {}
    for key, label in (
        ("elo", "ELO"),
        ("sep_elo", "sep-ELO"),
        ("bradley_terry", "Bradley-Terry"),
        ("style_control", "style-controlled Bradley-Terry"),
    ):
        if data.get(key, {}).get("available"):
            out[key] = plots.interval_plot(data[key]["leaderboard"], label=f"{label} rating")
    for kind, bins in data["consistency"]["by_separability"].items():
        series = {
            kind: [((b["low"] + b["high"]) / 2 if b["count"] else b["bin"], b["mean"]) for b in bins["equal_count"]]
        }
        out[f"consistency-{kind}"] = plots.line_plot(
            series,
            "separability (bin centre, 5 equal-count bins)",
            "mean consistency",
            (0, 1),
            errors={kind: [b["se"] for b in bins["equal_count"]]},
        )
        out[f"consistency-distribution-{kind}"] = plots.stacked_bars(
            [
                (
                    f"{as_two(b['low'])} to {as_two(b['high'])} (n = {b['count']:,})",
                    dict(sorted((float(v), n) for v, n in b["histogram"].items())),
                )
                for b in bins["equal_width"]
            ],
            f"consistency ({kind}s)",
        )
    judges = data["indeterminacy"]["judges"]
    if judges:
        out["threshold-sweep"] = plots.line_plot(
            {name: [(t["tau"], t["decision_consistency"]) for t in j["threshold_sweep"]] for name, j in judges.items()},
            "threshold tau",
            "decision consistency",
            (0, 1),
        ) + plots.line_plot(
            {name: [(t["tau"], t["estimation_bias"]) for t in j["threshold_sweep"]] for name, j in judges.items()},
            "threshold tau",
            "estimation bias",
            (-1, 1),
        )
        out["beta-sensitivity"] = plots.line_plot(
            {name: [(b["beta"], b["mse"]) for b in j["beta_sensitivity"]] for name, j in judges.items()},
            "human sensitivity beta",
            "MSE of the multi-label vectors",
        )
    return out


SHOWN_ROWS = 50
SHOWN = {"length-controlled": 500}  # every population's every pair: the comparison is the point

SECTIONS = [
    # (table name, heading, figure key, explanation)
    (
        "leaderboard-bradley_terry",
        "Bradley-Terry",
        "bradley_terry",
        "Maximum likelihood, ties as half a win each "
        "way, on the Arena scale (1000 + 400 log10-odds), with closed-form (sandwich) 95 % intervals as LMArena's "
        "arena-rank computes them (no bootstrap: the Hessian and the spread of the battles' gradients). On every "
        "leaderboard, 'Order above next' says whether this "
        "system's place above the next one is decided by their pair's anytime-valid decision (see the stopping "
        "section): decided, equivalent within the margin, decided the other way, open, or not compared.",
    ),
    (
        "leaderboard-elo",
        "ELO",
        "elo",
        "K = {k}. The rating is the median over {rounds} bootstrap resamples (seed "
        "{seed}), each processed in a random order, with their 95 % interval, as Chatbot Arena reports it; 'Online' is "
        "the single pass in creation order, which depends on that order. Rank = 1 + systems whose lower bound exceeds "
        "this one's upper bound.",
    ),
    (
        "leaderboard-sep_elo",
        "Separability-weighted ELO",
        "sep_elo",
        "Each battle's K is scaled by the logistic of "
        "its item's separability (T = {T}, alpha = {alpha}, beta = {beta}), so indistinguishable outputs move ratings "
        "less. Rating = bootstrap median, as for ELO.",
    ),
    (
        "leaderboard-style",
        "Bradley-Terry controlling for answer style",
        "style_control",
        "The same battles, with "
        "each battle's log-odds also depending on the two answers' style, as Chatbot Arena's headline board does "
        "(arena-rank's ContextualBradleyTerry): the relative difference (a - b) / (a + b) of their "
        "tokens ({encoding}), headers, list items and bold spans (code blocks left out, counted as Arena counts them), "
        "z-scored, battles weighted by 1 / max(their pair's battles, 50); 'place without style control' is the same "
        "fit, with the same weights, without the style terms, so a move is style's. The 95 % intervals are "
        "arena-rank's sandwich with the penalty's curvature put into the Hessian: arena-rank leaves it out, "
        "which makes its intervals "
        "conservative (98.6 % coverage instead of 95 % on PRD's real answers; with it, 95 %). ",
    ),
    (
        "length-controlled",
        "Length-controlled win rates",
        None,
        "AlpacaEval 2's length-controlled win rate, for "
        "people and for each judge: System A's win rate if both answers had the same length, under a logistic "
        "model of the preference in tanh of the standardised difference of the answers' lengths (characters), fitted "
        "by maximum likelihood (AlpacaEval fits it with a cross-validated L1 penalty and its instruction-difficulty "
        "table, which only its own instructions have). 95 % intervals over items (an item's judgments together, "
        "Student's t), checked to cover on PRD's real votes and answer lengths with 20 and 60 items; a pair with "
        "fewer than {min_items} items judged gets none. The length coefficient is the log-odds gained per unit of "
        "tanh(length difference / its standard deviation): above 0, the longer answer is preferred; a judge whose "
        "coefficient is well above the people's has a length bias. 'Lower' and 'Upper' bound the length-controlled "
        "win rate; the lengths are the answers' mean lengths in characters.",
    ),
    (
        "rater-reliability",
        "How reliable each rater is",
        None,
        "The one-coin Dawid-Skene model (fitted with Toloka's "
        "crowd-kit) over this population's judgments, each rated pair a task and its answer (System A, System B or no "
        "preference) the label: every rater answers right with their own probability, and the model infers each "
        "pair's answer weighing raters by it. Reliability is a rater's agreement beyond chance (Cohen's κ) with the "
        "answer the other raters of each pair point to under the model (their own vote left out), over the pairs two "
        "others rated too, read as the rater saw them (first or second shown): 1 perfect, 0 no information (a random "
        "clicker, or someone who always picks the same side), below 0 answers against the others. A rater with fewer "
        "than 10 such pairs gets none. Least reliable first. Read it with the pairs' separability: where outputs are "
        "hard to tell apart, answers carry little information whoever gives them (on the separability paper's MTurk "
        "study the workers' mean reliability was 0.82 in its most separable configuration and 0.06-0.17 in the three "
        "others, each with its own workers; bench/README.md), so a low value there says as much about the pairs as "
        "about the raters.",
    ),
    (
        "leaderboard-reliability",
        "Bradley-Terry on the reliability-weighted labels",
        None,
        "One battle per rated pair "
        "with the answer the model infers from all its raters, each weighed by their accuracy; beside it, each "
        "system's place with the same one battle per pair decided by the plain majority, every rater alike, so a "
        "difference between the two is the weighting's. The report's boards above are unchanged. No interval: the "
        "inferred answers are themselves estimates, and an interval that took them as data would be too narrow.",
    ),
    ("win-rates", "Pairwise win rates", None, "Row system's share of points against the column system (ties half)."),
    ("win-ratio", "Win-ratio ranking", None, "Each system's share of points over all its battles."),
    (
        "stopping",
        "Stopping status per system pair",
        None,
        "Each item goes to the majority of its human raters, "
        "each rater's preference being the sign of their preference strength (Eq. 7) over their rating set; a level "
        "count is a tie (the live DiffUse loop uses the same rule). The risk is the hypergeometric tail of the "
        "leader's lead if both systems were equally good on the pool of items the selection drew from (ties count in "
        "n, not in k, unless the settings say otherwise); 'Risk beyond the pool' is the same test for an unbounded "
        "pool, which stays meaningful when every pool item is judged. The decision is read off an anytime-valid "
        "confidence sequence for System A's win rate over items (its lower and upper bound, error rate "
        "{decision_alpha} per pair): 'System A better' or 'System B better' when that system wins more than half, "
        "'equivalent' within {decision_margin} of a half, else "
        "'undecided'. It reads every judgment as it is now (partly rated items and imported files included, in the "
        "order they arrived); with 'Stop buying decided pairs' the study page shows the decision the plan keeps over "
        "whole items as they complete, the one that stays valid however often it is looked at.",
    ),
    (
        "consistency-bins",
        "Consistency by separability",
        "consistency-human",
        "Mean rating-set consistency "
        "(Eq. 4) over 5 equal-count separability bins with standard errors (the line), and the distribution of "
        "consistency in 4 equal-width separability bins (the bars: one per bin, labelled with its separability "
        "range and its rating sets; darker is more consistent); humans and judges separately.",
    ),
    (
        "rating-sets",
        "Rating sets",
        None,
        "One rater's judgments of one item for one system pair: consistency (Eq. 4) "
        "and preference strength (Eq. 7; negative favours System A).",
    ),
    ("item-consistency", "Per item", None, "Mean over the item's raters."),
    (
        "positional-bias",
        "Positional bias",
        None,
        "P(first shown chosen) over non-tie choices, exact binomial test against 0.5, Clopper-Pearson 95 % interval.",
    ),
    (
        "debiasing",
        "Debiasing judges with probabilities",
        None,
        "The threshold that makes the first-shown output "
        "win half of the comparisons (the median of P(first) over both orders; comparisons exactly at it are decided "
        "'first' the share of the time shown, at random, so that the half holds even when many tie there); accuracy "
        "against the human majority on the same pairs (after debiasing: its expectation over that randomisation).",
    ),
    ("cohen-kappa", "Agreement between raters", None, "Cohen's kappa for rater pairs with at least 10 shared pairs."),
    (
        "judge-metrics",
        "Judges against humans",
        None,
        "Agreement: each verdict (each presentation order on its own) "
        "against the human majority of its pair, a split (no single most common human answer, e.g. one vote each "
        "for A, B and tie) counted as a tie; the next column breaks a split by the first human vote, the one after "
        "leaves split pairs out; P(first shown chosen): the share of its non-tie verdicts that chose the output shown "
        "first (0.5 = no positional bias), 'First shown, share of all verdicts' the same over all its verdicts. "
        "MSE between multi-label vectors (primary; a tie counts as "
        "both outputs reasonable), coverage (the judge's choice is among the options most humans find reasonable, "
        "the reference code's COV), hit rate (the judge's choice equals the human majority's, the reference code's HR; "
        "the blog finds it unreliable under indeterminacy), Cohen's kappa over the three answers every pair offers "
        "(System A, System B, a tie) per verdict (each verdict against the human majority of its pair, as "
        "agreement is counted) and per item (per rated pair of outputs: the judge's most common verdict on it over "
        "both orders against the human majority; a judge that flips with the order counts as a tie there, which "
        "usually lowers it), "
        "KL(human || judge) and JS divergence of the forced-choice distributions over (System A, System B, "
        "tie).",
    ),
    (
        "win-rate-estimates",
        "Win rates with honest intervals: people alone, and people with judges",
        None,
        "Each system pair's win rate of System A (a tie counts half), estimated as the way its items were "
        "drawn allows. From a random sample: people alone, and people with each judge (and all judges together) in "
        "one estimate, the judge's weight λ tuned on the judged items (0: the judge is no help). From items chosen on "
        "purpose (DiffUse, a threshold): only the mean of those items, which describes them and nothing beyond. Every "
        "interval is a 95 % interval for the target each pair names, and has been checked to cover on real data with "
        "10 to 40 judged items. 'Worth' is how many items judged by people alone on a random sample would give the "
        "same precision. On the PRD data, judges that agree with people on about two questions in three were worth "
        "about 5 % more items; drawing the items within bands of the judges' verdicts about 10 %.",
    ),
    (
        "hybrid-strengths",
        "Bradley-Terry strengths from humans and a judge",
        None,
        "Each system's Bradley-Terry "
        "rating (1000 + 400 log10-odds against the study's first system, the reference) from the humans alone and "
        "from the humans and the judge together (PPI++ with power tuning over all system pairs at once: a unit is "
        "one item of one system pair, labelled where humans judged it); for items like these. Efficiency: the "
        "squared ratio of the interval widths, how many units judged by people alone one unit with the judge is "
        "worth (checked against the realised error on PRD).",
    ),
    (
        "threshold-sweep",
        "Decision consistency over tau",
        "threshold-sweep",
        "Whether judge and humans agree that "
        "option A reaches tau, over a sweep of tau, and the judge's estimation bias.",
    ),
    (
        "beta-sensitivity",
        "Sensitivity to the human beta",
        "beta-sensitivity",
        "MSE when human multi-label vectors are built from forced choices with sensitivity beta in [0, 0.5].",
    ),
]


def empty_reason(name: str, data: dict) -> str:
    """Why a section has nothing to show, in the population's words."""
    who = data["population"]["label"].lower()
    board = BOARDS
    if name in board and data.get(board[name], {}).get("reason"):
        return f"Not available: {data[board[name]]['reason']}."
    if name == "length-controlled":
        return "No system pair has judgments with a choice yet."
    blocked = data.get("hybrid_strengths_blocked") or []
    if name == "hybrid-strengths" and blocked:
        return (
            f"Not computed: the items people judged for {', '.join(blocked)} were not a uniform random sample (nor "
            "all judged), and this fit takes its labelled items for one. The win rates above use each pair's own "
            "design."
        )
    if name == "hybrid-strengths":
        return (
            "Needs a judge's verdicts on items humans judged (at least two) and on items they did not: import "
            "a judge that judged more of the study than the humans."
        )
    if name == "win-rate-estimates":
        return "No system pair has two or more items judged by people yet."
    if name == "debiasing":
        return (
            "No judge gave probabilities (P(A), e.g. from log-probabilities) on pairs the humans judged: "
            "debiasing needs them. Run a judge with log-probabilities, or import verdicts with probability_a."
        )
    if name in ("judge-metrics", "threshold-sweep", "beta-sensitivity"):
        return (
            "No judge has judged the pairs the humans judged: run a judge or import a judge's verdicts on the "
            "study page."
        )
    if name in ("consistency-bins",):
        return (
            "Needs rating sets of two or more judgments and the items' separability (computed on the "
            "Separability page)."
        )
    if name == "cohen-kappa":
        return "Needs two raters with at least 10 pairs in common."
    if name in ("rater-reliability", "leaderboard-reliability"):
        reliability = data.get("rater_reliability") or {}
        return f"Not available: {reliability.get('reason', 'no judgments yet')}."
    if not data["judgments"]["total"]:
        return f"No judgments by {who} yet."
    return "Nothing to show for this population."


def style_sentence(styled: dict) -> str:
    """Who moved first, then the style coefficients and what the penalty does to each, in words."""
    if not styled.get("available"):
        return ""
    names = {
        "sum_assistant_tokens": "length (tokens)",
        "header_count": "headers",
        "list_count": "list items",
        "bold_count": "bold",
    }
    moved = [m for m in styled["moved"] if m["change"]]
    if moved:
        words = (
            "Moved: "
            + "; ".join(f"{m['system']} from place {m['plain_place']} to {m['style_place']}" for m in moved)
            + ". "
        )
    else:
        words = "No system changes place when style is controlled for. "
    free = styled["unpenalised_coefficients"]
    parts = []
    for key, value in styled["coefficients"].items():
        if value == 0 and free[key] == 0:
            parts.append(f"{names[key]}: the same in every answer, no effect to fit")
        elif styled["reg"] > 0:
            parts.append(f"{names[key]} {value:+.3f} ({free[key]:+.3f} without the penalty)")
        else:
            parts.append(f"{names[key]} {value:+.3f}")
    words += (
        "Style coefficients (log-odds per standard deviation of the difference; above 0, the answer with more "
        "of it is preferred): " + "; ".join(parts) + ". "
    )
    if styled["reg"] > 0:
        default = ", arena-rank's default and LMArena's" if styled["reg"] == 1 else ""
        words += (
            f"The penalty ({styled['reg']:g}{default}; the study's settings choose it) pulls the coefficients "
            "toward 0, so compare them with published numbers only under the same penalty."
        )
    else:
        words += "No penalty (the study's settings): the coefficients are fitted freely."
    return words


OPEN_SECTIONS = {"leaderboard-bradley_terry", "leaderboard-elo"}  # the rest open on demand


def leads(data: dict) -> dict[str, str]:
    """The sentence a section opens with where its numbers need words: what the positional bias, the judges'
    agreement and position, the consistency and the decisions mean, each with its n."""
    out = {}
    stopping = data.get("stopping") or []
    if stopping:
        counts = {d: sum(s["decision"] == d for s in stopping) for d in ("a", "b", "equivalent", "undecided")}
        winners = counts["a"] + counts["b"]
        out["stopping"] = (
            f"{winners} of {plural(len(stopping), 'system pair')} {'has' if winners == 1 else 'have'} "
            "a winner, "
            f"{counts['equivalent']} {'is' if counts['equivalent'] == 1 else 'are'} equivalent within "
            f"the margin and {counts['undecided']} {'is' if counts['undecided'] == 1 else 'are'} "
            "undecided: only undecided pairs need more judgments."
        )
    bias = data["positional_bias"]["populations"]
    if bias:
        out["positional-bias"] = " ".join(
            f"{'People' if kind == 'human' else 'Judges'} chose the output shown first in {p['first_chosen']:,} of "
            f"{plural(p['n'], 'non-tie choice')} ({100 * p['rate']:.0f} %, 95 % interval {100 * p['low']:.0f}–"
            f"{100 * p['high']:.0f} %, binomial p = {as_p_value(p['p_value'])}): "
            f"{position_words(p['rate'], p['p_value'])}."
            for kind, p in bias.items()
            if p.get("n")
        )
    judges = {n: j for n, j in data["indeterminacy"]["judges"].items() if j.get("agreement") is not None}
    if judges:
        ranked = sorted(judges.items(), key=lambda kv: -kv[1]["agreement"])
        out["judge-metrics"] = (
            "Agreement with the human majority: "
            + "; ".join(
                f"{name} {100 * j['agreement']:.0f} % of {j['verdicts']:,} verdicts"
                + (
                    ""
                    if j.get("p_first") is None
                    else f" ({position_words(j['p_first'], j.get('p_first_p_value'))}, P(first) {j['p_first']:.2f})"
                )
                for name, j in ranked
            )
            + "."
        )
    reliability = data.get("rater_reliability") or {}
    if reliability.get("available"):
        weak = reliability["unreliable"]
        unscored = reliability.get("unscored") or []
        out["rater-reliability"] = (
            f"{plural(len(reliability['raters']), 'rater')} over {plural(reliability['pairs'], 'rated pair')}: "
            + (
                f"{len(weak)} {'carries' if len(weak) == 1 else 'carry'} almost no information or "
                f"{'answers' if len(weak) == 1 else 'answer'} against the others (reliability below 0.2: "
                f"{', '.join(weak[:10])}{'…' if len(weak) > 10 else ''}); read their answers on the item pages before "
                "screening anyone out."
                if weak
                else "every rater's answers carry information (reliability 0.2 or more)."
            )
            + (
                f" {plural(len(unscored), 'rater')} shared too few pairs with two others to be scored."
                if unscored
                else ""
            )
        )
        weighted = reliability.get("weighted_board") or {}
        if weighted.get("available"):
            moved = [r["system"] for r in weighted["leaderboard"] if r["majority_place"] not in (None, r["place"])]
            out["leaderboard-reliability"] = (
                "The same order as with each pair's plain majority: weighting the raters moves no system."
                if not moved
                else f"{', '.join(moved)} {'sits' if len(moved) == 1 else 'sit'} at another place than with each "
                "pair's plain majority: weighting the raters by their reliability moved "
                f"{'it' if len(moved) == 1 else 'them'}."
            )
    for kind, summary in data["consistency"]["summary"].items():
        if summary["available"]:
            who = "People" if kind == "human" else "Judges"
            out["consistency-bins"] = (
                out.get("consistency-bins", "") + f"{who}: mean consistency "
                f"{summary['mean']:.2f} over {plural(summary['n'], 'rating set')}, "
                f"{consistency_words(summary['mean'])}. "
            )
    return out


BOARDS = {
    "leaderboard-elo": "elo",
    "leaderboard-sep_elo": "sep_elo",
    "leaderboard-bradley_terry": "bradley_terry",
    "leaderboard-style": "style_control",
}


def size_words(name: str, total: int, shown: int, data: dict) -> str:
    """What a section holds, for its summary line and the contents: '45 rows', '1,760 rows, 50 shown', a
    leaderboard's systems and battles, the system pairs."""
    if not total:
        return "nothing yet"
    if name in BOARDS:
        return f"{plural(total, 'system')}, {plural(data[BOARDS[name]].get('battles') or 0, 'battle')}"
    if name in ("win-rate-estimates", "stopping"):
        return plural(total, "system pair")
    noun = plural(total, "row")
    return noun if shown >= total else f"{noun}, {shown:,} shown"


def sections(data: dict) -> list[dict]:
    """Every section after the answers: heading, note, figure, its table with human headers and formatted cells
    (``page_table``), what it holds in a few words, and whether it opens by itself."""
    tables = report_tables(data)
    figs = figures(data)
    words_first = leads(data)
    params = data["elo"].get("parameters") or {}
    stopping = (data.get("stopping") or [{}])[0]
    values = {
        "k": params.get("k"),
        "rounds": params.get("bootstrap_rounds"),
        "seed": params.get("seed"),
        "T": params.get("T"),
        "alpha": params.get("alpha"),
        "beta": params.get("beta"),
        "decision_alpha": stopping.get("decision_alpha"),
        "decision_margin": stopping.get("decision_margin"),
        "encoding": (data.get("style_control") or {}).get("encoding", "cl100k_base"),
        "min_items": answer_style.MIN_ITEMS,
    }
    purposive = [
        f"{e['system_a']} vs {e['system_b']}" for e in data.get("win_rate_estimates", []) if e["design"] == "purposive"
    ]
    out = []
    for name, heading, figure, note in SECTIONS:
        columns, rows = tables.get(name, ([], []))
        figure_svg = figs.get(figure, "") if figure else ""
        if name == "consistency-bins":
            figure_svg = "".join(
                figs.get(f"consistency-{k}", "") + figs.get(f"consistency-distribution-{k}", "")
                for k in ("human", "judge")
            )
        note = note.format(**values)
        if name == "leaderboard-style":
            note = style_sentence(data.get("style_control") or {}) + " " + note
        if name.startswith("leaderboard-") and purposive:
            note += (
                f" The items of {', '.join(purposive)} were chosen on purpose: these ratings and their intervals "
                "(battles resampled) describe the judged items, not the study's other items."
            )
        populations = len(data["positional_bias"]["populations"]) if name == "positional-bias" else 0
        if populations:  # each population's row (last in the CSV) before the raters' own
            rows = rows[-populations:] + rows[:-populations]
        shown = rows[: SHOWN.get(name, SHOWN_ROWS)]
        headers, cells = page_table(name, columns, shown)
        total = len(data.get("win_rate_estimates", [])) if name == "win-rate-estimates" else len(rows)
        out.append(
            {
                "name": name,
                "heading": heading,
                "note": note,
                "lead": words_first.get(name, ""),
                "figure": figure_svg,
                "columns": headers,
                "rows": cells,
                "total": len(rows),
                "size": size_words(name, total, total if name == "win-rate-estimates" else len(shown), data),
                "open": name in OPEN_SECTIONS and bool(rows),
                "empty": empty_reason(name, data),
            }
        )
    return out


def contents(data: dict, secs: list[dict]) -> list[dict]:
    """The contents list under the answers: every section's anchor, heading and what it holds."""
    ind = data["indeterminacy"]
    extra = []
    if ind.get("judges"):
        extra.append(
            {
                "name": "judge-ranking",
                "heading": "Which judge agrees best with the humans",
                "size": plural(len(ind.get("ranking_tiers") or {}), "metric"),
            }
        )
    if ind.get("human_translation_matrix"):
        extra.append(
            {
                "name": "translation",
                "heading": "How people turn response sets into forced choices",
                "size": plural(len(ind.get("translation_matrix_rows") or []), "row"),
            }
        )
    return extra + [{"name": s["name"], "heading": s["heading"], "size": s["size"]} for s in secs]


def win_rate_blocks(data: dict) -> list[dict]:
    """The win-rate estimates as the page shows them: per system pair, a sentence on the design and the target,
    an interval plot of its estimates and their rows in words."""
    blocks = []
    for entry in data.get("win_rate_estimates", []):
        rows = [
            {"system": e.get("short", e["label"]), "rating": e["estimate"], "low": e["low"], "high": e["high"]}
            for e in entry["estimates"]
        ]
        figure = plots.interval_plot(
            rows, label=f"win rate of {entry['system_a']}", decimals=3, reference=(0.5, "½: even")
        )
        blocks.append({**entry, "figure": figure})
    return blocks


def render_body(study, population: Population, data: dict) -> str:
    """The report page's body (everything below the population form) as HTML, from our templates (every value
    escaped); stored with the report and inserted as it is."""
    secs = sections(data)
    return render_to_string(
        "analytics/_report_body.html",
        {
            "study": study,
            "report": data,
            "sections": secs,
            "contents": contents(data, secs),
            "headlines": headlines(data),
            "answers": answers(data) if data["judgments"]["total"] else [],
            "win_rates": win_rate_blocks(data),
            "query": urlencode(population.query()),
        },
    )


def summary(data: dict) -> dict:
    """What the page reads besides the body: the population, the populations to choose from, the counts."""
    return {key: data[key] for key in ("population", "populations", "judgments")}
