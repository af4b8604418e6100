"""The report in sentences: the answers a researcher comes with, the headline numbers, the sentence a section opens
with, the style control in words, and why a section has nothing to show."""

from __future__ import annotations

import dataclasses

from analytics.columns import DECISIONS, as_rating, p_words, plural
from analytics.report.assembly import Report
from analytics.report.ratings import AnyBoard, Board, NoBoard
from analytics.report.reliability import Reliability, WeightedBoard
from analytics.report.serial import Unavailable
from analytics.report.style import StyleControl


@dataclasses.dataclass(frozen=True)
class Headline:
    """A number at the top of the report with what it counts and its note."""

    label: str
    value: str
    note: str


@dataclasses.dataclass(frozen=True)
class Card:
    """The answer in short to a question a researcher comes with, and its numbers."""

    question: str
    answer: str
    detail: str
    planner: bool = False  # link to the settings page's budget planner (what more judgments would cost)


def boards(report: Report) -> dict[str, AnyBoard | StyleControl | Unavailable]:
    """The leaderboard sections by name."""
    return {
        "leaderboard-elo": report.elo,
        "leaderboard-sep_elo": report.sep_elo,
        "leaderboard-bradley_terry": report.bradley_terry,
        "leaderboard-style": report.style_control,
    }


def headlines(report: Report) -> list[Headline]:
    """The numbers at the top of the report, each with its n and, where it has one, its interval and what it
    means; a number that is undefined says why instead."""
    counts = report.judgments
    out = [
        Headline(
            "judgment" if counts.total == 1 else "judgments",
            f"{counts.total:,}",
            f"of {counts.study_total:,} in the study",
        ),
        Headline("rater" if counts.raters == 1 else "raters", f"{counts.raters:,}", ""),
    ]
    for kind, s in report.consistency.summary.items():
        label = f"mean consistency ({kind}s)"
        if s.available and s.mean is not None:  # an available mean has its value
            interval = f", 95 % CI [{s.low:.2f}, {s.high:.2f}] item by item" if s.low is not None else ""
            out.append(
                Headline(
                    label,
                    f"{s.mean:.2f}",
                    f"{consistency_words(s.mean).capitalize()}: n = "
                    f"{plural(s.n, 'rating set')} with two or more judgments{interval}",
                )
            )
        else:
            reason = (s.reason or "").removeprefix("not applicable: ")  # the value says it already
            out.append(Headline(label, "not applicable", reason[:1].upper() + reason[1:]))
    agreement = report.agreement
    if agreement.krippendorff_alpha is not None:
        out.append(
            Headline(
                "Krippendorff's α",
                f"{agreement.krippendorff_alpha:.2f}",
                f"{alpha_words(agreement.krippendorff_alpha).capitalize()}: n = "
                f"{plural(agreement.units_with_two_or_more, 'pair')} rated by two or more raters",
            )
        )
    elif counts.total:
        out.append(Headline("Krippendorff's α", "not applicable", agreement.krippendorff_reason or ""))
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
    named when the test against 0.5 (the sign-flip test over items, ``bias.positional_bias``) rejects at 5 %, and
    sized by its distance from 0.5 on one scale for everyone."""
    if p_value is None or not p_value < 0.05:
        return "no clear position bias"
    side = "first" if rate > 0.5 else "second"
    size = abs(rate - 0.5)
    strength = "a slight" if size < 0.05 else ("a clear" if size < 0.15 else "a strong")
    return f"{strength} lean toward the output shown {side}"


# Krippendorff's alpha in graded words, each band's lower bound: Krippendorff's own guide (Content Analysis, 2004,
# §11.4.4) for 0.8 (reliable) and 0.667 (the lowest for tentative conclusions); Landis and Koch's (1977) bands for
# chance-corrected agreement below that (0.4 moderate, 0.2 fair); 0 is chance.
ALPHA_BANDS = (
    (0.8, "raters agree reliably"),
    (0.667, "raters agree well enough for tentative conclusions"),
    (0.4, "raters agree moderately, below what tentative conclusions need"),
    (0.2, "raters agree weakly"),
    (0.0, "raters agree little beyond chance"),
)
ALPHA_SCALE = (
    "Read as: 0.8 or more reliable, 0.667 the least for tentative conclusions (Krippendorff), 0.4 moderate, "
    "0.2 weak, 0 chance"
)


def alpha_words(alpha: float) -> str:
    """Krippendorff's alpha in words, by ``ALPHA_BANDS`` (their bounds are said beside it: ``ALPHA_SCALE``)."""
    for bound, words in ALPHA_BANDS:
        if alpha >= bound and (bound > 0 or alpha > 0):
            return words
    return "raters agree no more than chance" if alpha > -0.05 else "raters disagree more than chance would"


def answers(report: Report) -> list[Card]:
    """The report's first screen: one card per question a researcher comes with -- who wins, how sure, are the
    raters consistent, can the judge be trusted, should I collect more -- each a sentence with its numbers, or
    what is missing to answer it."""
    cards = []
    board = report.bradley_terry
    if isinstance(board, Board) and len(board.leaderboard) >= 2:
        first, second = board.leaderboard[0], board.leaderboard[1]
        # no interval (None, or NaN before the report is stored) over fewer than two items
        spread = all(v is not None and v == v for v in (first.low, second.high))
        separate = spread and first.low > second.high
        pair = next((s for s in report.stopping if {s.system_a, s.system_b} == {first.system, second.system}), None)
        winner = None if pair is None else {"a": pair.system_a, "b": pair.system_b}.get(pair.decision)
        sure = (
            ("its interval clears the runner-up's" if separate else "their intervals overlap")
            if spread
            else "there is no interval yet (it needs votes on two items or more)"
        )
        if winner == first.system:
            sure += (", and" if separate else ", but") + f" the pair's anytime-valid decision names {winner}"
        elif winner is not None:
            sure += f", but the pair's anytime-valid decision names {winner}"
        elif pair is not None:
            sure += f"; the pair's anytime-valid decision: {DECISIONS.get(pair.decision, pair.decision)}"
        settled = "decided" if winner == first.system else "not decided yet"
        cards.append(
            Card(
                "Who wins?",
                # without an interval a lead is a point estimate on one item: no leader is named (docs/ratings.md)
                f"{first.system} leads, {settled}" if spread else "No leader yet",
                f"Bradley-Terry {as_rating(first.rating)} against {second.system}'s {as_rating(second.rating)} "
                f"({first.rating - second.rating:+.0f} points, {board.battles:,} battles); {sure}.",
            )
        )
    else:
        reason = "needs judgments of at least two systems" if isinstance(board, Board) else board.reason
        cards.append(Card("Who wins?", "Not yet", reason[:1].upper() + reason[1:] + "."))
    alpha = report.agreement.krippendorff_alpha
    if alpha is not None:
        cards.append(
            Card(
                "Are the raters consistent?",
                alpha_words(alpha).capitalize(),
                f"Krippendorff's α = {alpha:.2f} over {report.agreement.units_with_two_or_more:,} "
                f"pairs rated by two or more raters. {ALPHA_SCALE}; 1 is full agreement.",
            )
        )
    else:
        cards.append(
            Card("Are the raters consistent?", "Not measurable yet", "Needs pairs rated by two or more raters.")
        )
    judges = [(n, j, j.agreement) for n, j in report.indeterminacy.judges.items() if j.agreement is not None]
    if judges:
        name, best, share = max(judges, key=lambda judge: judge[2])
        bias = best.p_first
        lean = (
            ""
            if bias is None
            else f" It picks the output shown first {100 * bias:.0f} % of the time when it "
            f"picks one (50 % = no bias): {position_words(bias, best.p_first_p_value)}."
        )
        cards.append(
            Card(
                "Can the judge be trusted?",
                f"{name} agrees with people on {100 * share:.0f} % of verdicts",
                f"Over {best.verdicts:,} verdicts, each against its pair's human majority.{lean} "
                "Every judge and metric: 'Judges against humans'.",
            )
        )
    stopping = report.stopping
    if stopping:
        open_pairs = [s for s in stopping if s.decision == "undecided"]
        if open_pairs:
            names = ", ".join(f"{s.system_a} vs {s.system_b}" for s in open_pairs[:3])
            more = f" and {len(open_pairs) - 3} more" if len(open_pairs) > 3 else ""
            cards.append(
                Card(
                    "Should I collect more?",
                    f"Yes, for {len(open_pairs)} of {len(stopping)} system pairs",
                    f"Still undecided: {names}{more}. Decided pairs need no more judgments.",
                    planner=True,
                )
            )
        else:
            cards.append(
                Card(
                    "Should I collect more?",
                    "No: every system pair is decided",
                    "Each pair's anytime-valid decision is a winner or equivalence within the margin; "
                    "more judgments would not change them.",
                )
            )
    return cards


def empty_reason(name: str, report: Report) -> str:
    """Why a section has nothing to show, in the population's words."""
    who = report.population.label.lower()
    board = boards(report).get(name)
    if isinstance(board, NoBoard | Unavailable) and board.reason:
        return f"Not available: {board.reason}."
    if name == "length-controlled":
        return "No system pair has judgments with a choice yet."
    blocked = report.hybrid_strengths_blocked
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
            "Needs rating sets of two or more judgments and the items' separability (at least two samples of each "
            "system per item, then computed on the Separability page)."
        )
    if name == "cohen-kappa":
        return "Needs two raters with at least 10 pairs in common."
    if name in ("rater-reliability", "leaderboard-reliability"):
        reliability = report.rater_reliability
        return f"Not available: {'no judgments yet' if isinstance(reliability, Reliability) else reliability.reason}."
    if not report.judgments.total:
        return f"No judgments by {who} yet."
    return "Nothing to show for this population."


STYLE_NAMES = {
    "sum_assistant_tokens": "length (tokens)",
    "header_count": "headers",
    "list_count": "list items",
    "bold_count": "bold",
}


def style_sentence(styled: StyleControl | Unavailable) -> str:
    """Who moved first, then the style coefficients and what the penalty does to each, in words."""
    if not isinstance(styled, StyleControl):
        return ""
    moved = [m for m in styled.moved if m.change]
    if moved:
        words = "Moved: " + "; ".join(f"{m.system} from place {m.plain_place} to {m.style_place}" for m in moved) + ". "
    else:
        words = "No system changes place when style is controlled for. "
    free = styled.unpenalised_coefficients
    parts = []
    for key, value in styled.coefficients.items():
        if value == 0 and free[key] == 0:
            parts.append(f"{STYLE_NAMES[key]}: the same in every answer, no effect to fit")
        elif styled.reg > 0:
            parts.append(f"{STYLE_NAMES[key]} {value:+.3f} ({free[key]:+.3f} without the penalty)")
        else:
            parts.append(f"{STYLE_NAMES[key]} {value:+.3f}")
    words += (
        "Style coefficients (log-odds per standard deviation of the difference; above 0, the answer with more "
        "of it is preferred): " + "; ".join(parts) + ". "
    )
    if styled.reg > 0:
        default = ", arena-rank's default and LMArena's" if styled.reg == 1 else ""
        words += (
            f"The penalty ({styled.reg:g}{default}; the study's settings choose it) pulls the coefficients "
            "toward 0, so compare them with published numbers only under the same penalty."
        )
        if styled.unpenalised:
            largest = max(styled.unpenalised, key=lambda u: abs(u.shift))
            words += (
                " The intervals are for the ratings under this penalty, not for the ratings without it, which the "
                "penalty moves by up to "
                f"{abs(largest.shift):.0f} points ({largest.system}). Without the penalty: "
                + "; ".join(
                    f"{u.system} {u.rating:.0f} (the penalty shifts it {u.shift:+.0f})" for u in styled.unpenalised
                )
                + "."
            )
    else:
        words += "No penalty (the study's settings): the coefficients are fitted freely."
    return words


def leads(report: Report) -> dict[str, str]:
    """The sentence a section opens with where its numbers need words: what the positional bias, the judges'
    agreement and position, the consistency and the decisions mean, each with its n."""
    out = {}
    stopping = report.stopping
    if stopping:
        counts = {d: sum(s.decision == d for s in stopping) for d in ("a", "b", "equivalent", "undecided")}
        winners = counts["a"] + counts["b"]
        equivalent = (  # with no margin no pair is called equivalent: the clause is left out
            f"{counts['equivalent']} {'is' if counts['equivalent'] == 1 else 'are'} equivalent within the margin "
            if stopping[0].decision_margin
            else ""
        )
        out["stopping"] = (
            f"{winners} of {plural(len(stopping), 'system pair')} {'has' if winners == 1 else 'have'} "
            f"a winner{', ' if equivalent else ' '}{equivalent}"
            f"and {counts['undecided']} {'is' if counts['undecided'] == 1 else 'are'} "
            "undecided: only undecided pairs need more judgments."
        )
    bias = report.positional_bias.populations
    if bias:
        out["positional-bias"] = " ".join(
            f"{'People' if kind == 'human' else 'Judges'} chose the output shown first in {p.first_chosen:,} of "
            f"{plural(p.n, 'non-tie choice')} on {plural(p.items, 'item')} ({100 * p.rate:.0f} %, 95 % interval "
            f"{100 * p.low:.0f}–\u2060{100 * p.high:.0f}\u00a0%, {p_words(p.p_value)}, both by item): "
            f"{position_words(p.rate, p.p_value)}."
            for kind, p in bias.items()
            if p.n
        )
    judges = [(n, j, j.agreement) for n, j in report.indeterminacy.judges.items() if j.agreement is not None]
    if judges:
        ranked = sorted(judges, key=lambda judge: -judge[2])
        out["judge-metrics"] = (
            "Agreement with the human majority: "
            + "; ".join(
                f"{name} {100 * share:.0f} % of {j.verdicts:,} verdicts"
                + (
                    ""
                    if j.p_first is None
                    else f" ({position_words(j.p_first, j.p_first_p_value)}, P(first) {j.p_first:.2f})"
                )
                for name, j, share in ranked
            )
            + "."
        )
    reliability = report.rater_reliability
    if isinstance(reliability, Reliability):
        weak, unscored = reliability.unreliable, reliability.unscored
        out["rater-reliability"] = (
            f"{plural(len(reliability.raters), 'rater')} over {plural(reliability.pairs, 'rated pair')}: "
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
        weighted = reliability.weighted_board
        if isinstance(weighted, WeightedBoard):
            moved = [r.system for r in weighted.leaderboard if r.majority_place not in (None, r.place)]
            out["leaderboard-reliability"] = (
                "The same order as with each pair's plain majority: weighting the raters moves no system."
                if not moved
                else f"{', '.join(moved)} {'sits' if len(moved) == 1 else 'sit'} at another place than with each "
                "pair's plain majority: weighting the raters by their reliability moved "
                f"{'it' if len(moved) == 1 else 'them'}."
            )
    for kind, summary in report.consistency.summary.items():
        if summary.available and summary.mean is not None:  # an available mean has its value
            who = "People" if kind == "human" else "Judges"
            out["consistency-bins"] = (
                out.get("consistency-bins", "") + f"{who}: mean consistency "
                f"{summary.mean:.2f} over {plural(summary.n, 'rating set')}, "
                f"{consistency_words(summary.mean)}. "
            )
    return out
