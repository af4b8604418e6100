"""How each number of the report reads on the page: a format per kind of number, the one table of column headers
and formats, and a report table as the page shows it (the CSV and the API keep the machine names and full
precision)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def plural(n: int, noun: str, many: str | None = None) -> str:
    """'1 rater', '2 raters', '1,760 raters': a count with its noun, thousands grouped."""
    return f"{n:,} {noun if n == 1 else (many or noun + 's')}"


def as_count(v) -> str:
    return f"{int(v):,}"


def as_rating(v) -> str:
    """A rating on the ELO / Arena scale: the bootstrap's spread is tens of points, so decimals are noise."""
    return f"{v:,.0f}"


def as_signed_rating(v) -> str:
    """A change of rating, with its sign: +58, −59."""
    return f"{v:+,.0f}".replace("-", "−")


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


def p_words(v) -> str:
    """A p-value in a sentence: "p < 0.001" or "p = 0.034" (never "p = < 0.001")."""
    shown = as_p_value(v)
    return f"p {shown}" if shown.startswith("<") else f"p = {shown}"


def as_text(v) -> str:
    return str(v)


def as_yes_no(v) -> str:
    return "yes" if v else "no"


def as_bin(v) -> str:
    return str(int(v) + 1)  # the CSV counts bins from 0, people from 1


def words(mapping: dict[str, str]) -> Callable[[object], str]:
    """A machine value (e.g. a decision 'a') in words; an unknown value as it is."""
    return lambda v: mapping.get(v, str(v)) if isinstance(v, str) else str(v)


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
    wide: bool = False  # words that need room: the page gives the column a minimum width


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
    "rating without the penalty": Column("Rating without the penalty", as_rating),
    "moved by the penalty": Column("Shift from the penalty", as_signed_rating),
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
    "decided": Column("Risk below threshold", as_yes_no, numeric=False),
    "decision": Column("Decision", words(DECISIONS), numeric=False),
    "win_rate_low": Column(f"Win rate of {SYSTEM_A}, lower bound", as_share),
    "win_rate_high": Column(f"Win rate of {SYSTEM_A}, upper bound", as_share),
    "decision_items": Column("Items in the decision", as_count),
    "decision_design": Column("Decision rule", numeric=False, wide=True),
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
    "low_95": Column("Lower 95\u00a0%", as_share),
    "high_95": Column("Upper 95\u00a0%", as_share),
    "sign_flip_p": Column("P-value (sign flips over items)", as_p_value),
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
        "decision_design",
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
