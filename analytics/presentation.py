"""How a stored report is presented: its sections with their tables and figures, the contents, and the page body
rendered once per refresh (``analytics.stored``), so a page view only reads it. The numbers in words are
``analytics.sentences``, each column's header and format ``analytics.columns``."""

from __future__ import annotations

import dataclasses
from urllib.parse import urlencode

from django.template.loader import render_to_string

from analytics import plots
from analytics.columns import Column, as_two, page_table, plural
from analytics.core.length_control import MIN_ITEMS
from analytics.populations import Population
from analytics.report.assembly import Report
from analytics.report.estimates import PairEstimates
from analytics.report.ratings import Board
from analytics.report.serial import to_json
from analytics.report.style import StyleControl
from analytics.sentences import answers, boards, empty_reason, headlines, leads, style_sentence
from analytics.tables import report_tables
from selection.models import error_words


def figures(report: Report) -> dict[str, str]:
    """The report's SVG figures (each has a table next to it)."""
    out = {}
    for key, label, board in (
        ("elo", "ELO", report.elo),
        ("sep_elo", "sep-ELO", report.sep_elo),
        ("bradley_terry", "Bradley-Terry", report.bradley_terry),
        ("style_control", "style-controlled Bradley-Terry", report.style_control),
    ):
        if isinstance(board, Board | StyleControl):
            out[key] = plots.interval_plot(board.leaderboard, label=f"{label} rating")
    for kind, bins in report.consistency.by_separability.items():
        series = {kind: [((b.low + b.high) / 2 if b.count else b.bin, b.mean) for b in bins.equal_count]}
        out[f"consistency-{kind}"] = plots.line_plot(
            series,
            "separability (bin centre, 5 equal-count bins)",
            "mean consistency",
            (0, 1),
            errors={kind: [b.se for b in bins.equal_count]},
        )
        out[f"consistency-distribution-{kind}"] = plots.stacked_bars(
            [
                (f"{as_two(b.low)} to {as_two(b.high)} (n = {b.count:,})", dict(sorted(b.histogram.items())))
                for b in bins.equal_width
                if b.count  # a bin no rating set falls in has no bar (and no range: its bounds are null)
            ],
            f"consistency ({kind}s)",
        )
    judges = report.indeterminacy.judges
    if judges:
        out["threshold-sweep"] = plots.line_plot(
            {name: [(t.tau, t.decision_consistency) for t in j.threshold_sweep] for name, j in judges.items()},
            "threshold tau",
            "decision consistency",
            (0, 1),
        ) + plots.line_plot(
            {name: [(t.tau, t.estimation_bias) for t in j.threshold_sweep] for name, j in judges.items()},
            "threshold tau",
            "estimation bias",
            (-1, 1),
        )
        out["beta-sensitivity"] = plots.line_plot(
            {name: [(b.beta, b.mse) for b in j.beta_sensitivity] for name, j in judges.items()},
            "human sensitivity beta",
            "MSE of the multi-label vectors",
        )
    return out


SHOWN_ROWS = 50
SHOWN = {"length-controlled": 500}  # every population's every pair: the comparison is the point
# The positional-bias table lists a rater on their own from this many non-tie choices: a crowd of raters with one or
# two votes each said nothing apiece and buried the people's and judges' rows (the CSV and the JSON keep them all).
MIN_RATER_VOTES = 10

SECTIONS = [
    # (table name, heading, figure key, explanation)
    (
        "leaderboard-bradley_terry",
        "Bradley-Terry",
        "bradley_terry",
        "Maximum likelihood, ties as half a win each "
        "way, on the Arena scale (1000 + 400 log10-odds), with closed-form (sandwich) 95 % intervals as LMArena's "
        "arena-rank computes them (no bootstrap: the Hessian and the spread of the gradients), the battles of one item "
        "summed first, since an item's raters are not independent. On every "
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
        "arena-rank's sandwich with the penalty's curvature put into the Hessian and each item's battles summed "
        "before the spread of the gradients is taken (an item's raters are not independent): resampling PRD's "
        "items whole they cover 95 % (91.5 % with every vote taken as independent). ",
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
        "pool, which stays meaningful when every pool item is judged. The decision is the study's own rule for System "
        "A's win rate over items ('Decision rule'; its lower and upper bound, {decision_error}): with planned looks, "
        "the live plan's decision at its looks (or, before the plan has looked, the same looks over the judgments "
        "so far); otherwise an anytime-valid confidence sequence. "
        "'System A better' or 'System B better' when that system wins more than half, "
        "{equivalent}else "
        "'undecided'. The confidence sequence reads every judgment as it is now (partly rated items and imported files "
        "included, in the order they arrived) and stays valid however often it is looked at; with 'Stop buying "
        "decided pairs' the study page shows the decision the plan keeps over whole items as they complete.",
    ),
    (
        "consistency-bins",
        "Consistency by separability",
        "consistency-human",
        "Mean rating-set consistency "
        "(Eq. 4) over 5 equal-count separability bins with standard errors (the line; clustered by item, since an "
        "item's raters saw the same outputs), and the distribution of "
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
        "P(first shown chosen) over non-tie choices, clustered by item (an item's raters largely agree): the "
        "p-value is an exact sign-flip test over items against 0.5, the 95 % interval Korn-Graubard's "
        "(Clopper-Pearson at the clustered effective sample size).",
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
        "about 5 % more items; drawing the items within bands of the judges' verdicts about 10 %. For a sample the "
        "judges drew (weighted, or by band) the worth is said conservatively, one standard error below its estimate: "
        "from a few items the plain figure promised more than such designs deliver.",
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


OPEN_SECTIONS = {"leaderboard-bradley_terry", "leaderboard-elo"}  # the rest open on demand


@dataclasses.dataclass(frozen=True)
class Section:
    """A section of the page: heading, note, the sentence it opens with, figure, its table with human headers and
    formatted cells (``page_table``) and its row count, what it holds in a few words, whether it opens by itself,
    and why it is empty when it is."""

    name: str
    heading: str
    note: str
    lead: str
    figure: str
    columns: list[Column]
    rows: list[list[tuple[str, bool]]]
    total: int
    size: str
    open: bool
    empty: str
    left_out: str = ""  # said above the table: the rows the page leaves out, and why


def positional_rows(columns: list[str], rows: list[list], populations: int) -> tuple[list[list], str]:
    """The positional-bias rows the page lists -- each population's (all their raters' choices) first, then the
    raters with at least ``MIN_RATER_VOTES`` non-tie choices -- and the words that say how many raters were left out."""
    n = columns.index("non_tie_judgments")
    raters = rows[populations:]
    listed = [r for r in raters if r[n] >= MIN_RATER_VOTES]
    left_out = len(raters) - len(listed)
    if not left_out:
        return rows, ""
    names = [f"‘{r[0]}’" for r in rows[:populations]]
    whose = f"the {' and '.join(names)} row{'s' if len(names) > 1 else ''}"
    return rows[:populations] + listed, (
        f"Raters are listed one by one when they made at least {MIN_RATER_VOTES} non-tie choices: "
        f"{plural(left_out, 'rater')} with fewer {'is' if left_out == 1 else 'are'} left out here"
        + (f" (their choices still count in {whose})" if names else "")
        + "; the CSV lists every rater."
    )


def size_words(name: str, total: int, shown: int, report: Report) -> str:
    """What a section holds, for its summary line and the contents: '45 rows', '1,760 rows, 50 shown', a
    leaderboard's systems and battles, the system pairs."""
    if not total:
        return "nothing yet"
    board = boards(report).get(name)
    if board is not None:
        battles = board.battles if isinstance(board, Board | StyleControl) else 0
        return f"{plural(total, 'system')}, {plural(battles or 0, 'battle')}"
    if name in ("win-rate-estimates", "stopping"):
        return plural(total, "system pair")
    noun = plural(total, "row")
    return noun if shown >= total else f"{noun}, {shown:,} shown"


def sections(report: Report) -> list[Section]:
    """Every section after the answers: heading, note, figure, its table with human headers and formatted cells
    (``page_table``), what it holds in a few words, and whether it opens by itself."""
    tables = report_tables(report)
    figs = figures(report)
    words_first = leads(report)
    params = report.elo.parameters
    stopping = report.stopping[0] if report.stopping else None
    styled = report.style_control
    values = {
        "k": params.k,
        "rounds": params.bootstrap_rounds,
        "seed": params.seed,
        "T": params.T,
        "alpha": params.alpha,
        "beta": params.beta,
        "decision_error": None
        if stopping is None
        else error_words(stopping.decision_alpha, stopping.decision_alpha_pair, stopping.error_control),
        "decision_margin": None if stopping is None else stopping.decision_margin,
        # with no margin no pair is called equivalent: the clause is left out
        "equivalent": f"'equivalent' within {stopping.decision_margin} of a half, "
        if stopping is not None and stopping.decision_margin
        else "",
        "encoding": styled.encoding if isinstance(styled, StyleControl) else "cl100k_base",
        "min_items": MIN_ITEMS,
    }
    purposive = [f"{e.system_a} vs {e.system_b}" for e in report.win_rate_estimates if e.design == "purposive"]
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
            note = style_sentence(styled) + " " + note
        if name.startswith("leaderboard-") and purposive:
            note += (
                f" The items of {', '.join(purposive)} were chosen on purpose: these ratings and their intervals "
                "(battles resampled) describe the judged items, not the study's other items."
            )
        populations = len(report.positional_bias.populations) if name == "positional-bias" else 0
        if populations:  # each population's row (last in the CSV) before the raters' own
            rows = rows[-populations:] + rows[:-populations]
        listed, left_out = positional_rows(columns, rows, populations) if name == "positional-bias" else (rows, "")
        shown = listed[: SHOWN.get(name, SHOWN_ROWS)]
        headers, cells = page_table(name, columns, shown)
        total = len(report.win_rate_estimates) if name == "win-rate-estimates" else len(rows)
        out.append(
            Section(
                name=name,
                heading=heading,
                note=note,
                lead=words_first.get(name, ""),
                figure=figure_svg,
                columns=headers,
                rows=cells,
                total=len(rows),
                size=size_words(name, total, total if name == "win-rate-estimates" else len(shown), report),
                open=name in OPEN_SECTIONS and bool(rows),
                empty=empty_reason(name, report),
                left_out=left_out,
            )
        )
    return out


@dataclasses.dataclass(frozen=True)
class ContentsEntry:
    name: str
    heading: str
    size: str


def contents(report: Report, secs: list[Section]) -> list[ContentsEntry]:
    """The contents list under the answers: every section's anchor, heading and what it holds."""
    ind = report.indeterminacy
    extra = []
    if ind.judges:
        extra.append(
            ContentsEntry(
                "judge-ranking",
                "Which judge agrees best with the humans",
                plural(len(ind.ranking_tiers or {}), "metric"),
            )
        )
    if ind.human_translation_matrix:
        extra.append(
            ContentsEntry(
                "translation",
                "How people turn response sets into forced choices",
                plural(len(ind.translation_matrix_rows or []), "row"),
            )
        )
    return extra + [ContentsEntry(s.name, s.heading, s.size) for s in secs]


@dataclasses.dataclass(frozen=True)
class WinRateBlock:
    """One system pair's win-rate estimates with the interval plot of them."""

    entry: PairEstimates
    figure: str


def win_rate_blocks(report: Report) -> list[WinRateBlock]:
    """The win-rate estimates as the page shows them: per system pair, a sentence on the design and the target,
    an interval plot of its estimates and their rows in words."""
    blocks = []
    for entry in report.win_rate_estimates:
        rows = [plots.Span(e.short, e.estimate, e.low, e.high) for e in entry.estimates]
        figure = plots.interval_plot(
            rows, label=f"win rate of {entry.system_a}", decimals=3, reference=(0.5, "½: even")
        )
        blocks.append(WinRateBlock(entry, figure))
    return blocks


def render_body(study, population: Population, report: Report) -> str:
    """The report page's body (everything below the population form) as HTML, from our templates (every value
    escaped); stored with the report and inserted as it is."""
    secs = sections(report)
    return render_to_string(
        "analytics/_report_body.html",
        {
            "study": study,
            "report": report,
            "sections": secs,
            "contents": contents(report, secs),
            "headlines": headlines(report),
            "answers": answers(report) if report.judgments.total else [],
            "win_rates": win_rate_blocks(report),
            "query": urlencode(population.query()),
        },
    )


def summary(report: Report) -> dict:
    """What the page reads besides the body: the population, the populations to choose from, the counts."""
    return {
        "population": report.population.as_dict(),
        "populations": to_json(report.populations),
        "judgments": to_json(report.judgments),
    }
