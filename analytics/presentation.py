"""How a stored report is presented: the headline numbers, the sections with their tables and figures,
and the page body rendered once per refresh (``analytics.stored``), so a page view only reads it."""

from __future__ import annotations

from urllib.parse import urlencode

from django.template.loader import render_to_string

from analytics import answer_style, plots
from analytics.populations import Population
from analytics.tables import report_tables


def headlines(data: dict) -> list[dict]:
    """The numbers at the top of the report, each with its n and, where it has one, its interval; a number
    that is undefined says why instead."""
    out = [{"label": "judgments", "value": data["judgments"]["total"],
            "note": f"of {data['judgments']['study_total']} in the study"},
           {"label": "raters", "value": data["judgments"]["raters"], "note": ""}]
    for kind, s in data["consistency"]["summary"].items():
        label = f"mean consistency ({kind}s)"
        if s["available"]:
            interval = f", 95 % CI [{s['low']:.3f}, {s['high']:.3f}]" if s["low"] is not None else ""
            out.append({"label": label, "value": f"{s['mean']:.3f}",
                        "note": f"n = {s['n']} rating sets with two or more judgments{interval}"})
        else:
            out.append({"label": label, "value": "not applicable", "note": s["reason"]})
    agreement = data["agreement"]
    if agreement["krippendorff_alpha"] is not None:
        out.append({"label": "Krippendorff's α", "value": f"{agreement['krippendorff_alpha']:.3f}",
                    "note": f"n = {agreement['units_with_two_or_more']} pairs rated by two or more raters"})
    elif data["judgments"]["total"]:
        out.append({"label": "Krippendorff's α", "value": "not applicable", "note": agreement["krippendorff_reason"]})
    return out


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
        pair = next((s for s in data.get("stopping", []) if {s["system_a"], s["system_b"]}
                     == {first["system"], second["system"]}), None)
        decided = pair is not None and pair["decision"] in ("a", "b")
        sure = ("its interval clears the runner-up's" if separate else "the intervals overlap, so the order of the "
                "top two is not settled")
        if pair is not None:
            sure += ("; the anytime-valid decision for the pair says so too" if decided
                     else f"; the pair's anytime-valid decision: {pair['decision']}")
        cards.append({"question": "Who wins?", "answer": f"{first['system']} leads",
                      "detail": f"Bradley-Terry {first['rating']:.0f} against {second['system']}'s "
                                f"{second['rating']:.0f} ({first['rating'] - second['rating']:+.0f} points, "
                                f"{board['battles']:,} battles); {sure}."})
    else:
        cards.append({"question": "Who wins?", "answer": "Not yet",
                      "detail": board.get("reason", "needs judgments of at least two systems").capitalize() + "."})
    alpha = data["agreement"].get("krippendorff_alpha")
    if alpha is not None:
        cards.append({"question": "Are the raters consistent?", "answer": alpha_words(alpha).capitalize(),
                      "detail": f"Krippendorff's α = {alpha:.2f} over {data['agreement']['units_with_two_or_more']:,} "
                                "pairs rated by two or more raters (1 is full agreement, 0 is chance)."})
    else:
        cards.append({"question": "Are the raters consistent?", "answer": "Not measurable yet",
                      "detail": "Needs pairs rated by two or more raters."})
    judges = {n: j for n, j in data["indeterminacy"]["judges"].items() if j.get("agreement") is not None}
    if judges:
        name, best = max(judges.items(), key=lambda kv: kv[1]["agreement"])
        bias = best.get("p_first")
        lean = ("" if bias is None else f"; it picks the output shown first {100 * bias:.0f} % of the time when it "
                "picks one (50 % is no position bias)")
        cards.append({"question": "Can the judge be trusted?",
                      "answer": f"{name} agrees with people on {100 * best['agreement']:.0f} % of verdicts",
                      "detail": f"Against the human majority of each pair, over {best['verdicts']:,} verdicts{lean}. "
                                "See 'Judges against humans' for every judge and metric."})
    stopping = data.get("stopping", [])
    if stopping:
        open_pairs = [s for s in stopping if s["decision"] == "undecided"]
        if open_pairs:
            names = ", ".join(f"{s['system_a']} vs {s['system_b']}" for s in open_pairs[:3])
            more = f" and {len(open_pairs) - 3} more" if len(open_pairs) > 3 else ""
            cards.append({"question": "Should I collect more?",
                          "answer": f"Yes, for {len(open_pairs)} of {len(stopping)} system pairs",
                          "detail": f"Still undecided: {names}{more}. Decided pairs need no more judgments."})
        else:
            cards.append({"question": "Should I collect more?", "answer": "No: every system pair is decided",
                          "detail": "Each pair's anytime-valid decision is a winner or equivalence within the margin; "
                                    "more judgments would not change them."})
    return cards


def figures(data: dict) -> dict[str, str]:
    """The report's SVG figures (each has a table next to it)."""
    out = {}
    for key, label in (("elo", "ELO"), ("sep_elo", "sep-ELO"), ("bradley_terry", "Bradley-Terry"),
                       ("style_control", "style-controlled Bradley-Terry")):
        if data.get(key, {}).get("available"):
            out[key] = plots.interval_plot(data[key]["leaderboard"], label=f"{label} rating")
    for kind, bins in data["consistency"]["by_separability"].items():
        series = {kind: [((b["low"] + b["high"]) / 2 if b["count"] else b["bin"], b["mean"])
                         for b in bins["equal_count"]]}
        out[f"consistency-{kind}"] = plots.line_plot(series, "separability (bin centre, 5 equal-count bins)",
                                                     "mean consistency", (0, 1),
                                                     errors={kind: [b["se"] for b in bins["equal_count"]]})
    judges = data["indeterminacy"]["judges"]
    if judges:
        out["threshold-sweep"] = plots.line_plot(
            {name: [(t["tau"], t["decision_consistency"]) for t in j["threshold_sweep"]] for name, j in judges.items()},
            "threshold tau", "decision consistency", (0, 1)) + plots.line_plot(
            {name: [(t["tau"], t["estimation_bias"]) for t in j["threshold_sweep"]] for name, j in judges.items()},
            "threshold tau", "estimation bias", (-1, 1))
        out["beta-sensitivity"] = plots.line_plot(
            {name: [(b["beta"], b["mse"]) for b in j["beta_sensitivity"]] for name, j in judges.items()},
            "human sensitivity beta", "MSE of the multi-label vectors")
    return out


SHOWN_ROWS = 50
SHOWN = {"length-controlled": 500}  # every population's every pair: the comparison is the point

SECTIONS = [
    # (table name, heading, figure key, explanation)
    ("leaderboard-elo", "ELO", "elo", "K = {k}. The rating is the median over {rounds} bootstrap resamples (seed "
     "{seed}), each processed in a random order, with their 95 % interval, as Chatbot Arena reports it; 'online' is "
     "the single pass in creation order, which depends on that order. Rank = 1 + systems whose lower bound exceeds "
     "this one's upper bound."),
    ("leaderboard-sep_elo", "Separability-weighted ELO", "sep_elo", "Each battle's K is scaled by the logistic of "
     "its item's separability (T = {T}, alpha = {alpha}, beta = {beta}), so indistinguishable outputs move ratings "
     "less. Rating = bootstrap median, as for ELO."),
    ("leaderboard-bradley_terry", "Bradley-Terry", "bradley_terry", "Maximum likelihood, ties as half a win each "
     "way, on the Arena scale (1000 + 400 log10-odds), with closed-form (sandwich) 95 % intervals as LMArena's "
     "arena-rank computes them (no bootstrap: the Hessian and the spread of the battles' gradients). On every "
     "leaderboard, 'order above next' says whether this "
     "system's place above the next one is decided by their pair's anytime-valid decision (see the stopping "
     "section): decided, equivalent within the margin, decided the other way, open, or not compared."),
    ("leaderboard-style", "Bradley-Terry controlling for answer style", "style_control", "The same battles, with "
     "each battle's log-odds also depending on the two answers' style, as Chatbot Arena's headline board does "
     "(arena-rank's ContextualBradleyTerry): the relative difference (a - b) / (a + b) of their "
     "tokens ({encoding}), headers, list items and bold spans (code blocks left out, counted as Arena counts them), "
     "z-scored, battles weighted by 1 / max(their pair's battles, 50); 'place without style control' is the same "
     "fit, with the same weights, without the style terms, so a move is style's. The 95 % intervals are "
     "arena-rank's sandwich with the penalty's curvature put into the Hessian: arena-rank leaves it out, which makes "
     "its intervals "
     "conservative (98.6 % coverage instead of 95 % on PRD's real answers; with it, 95 %). "),
    ("length-controlled", "Length-controlled win rates", None, "AlpacaEval 2's length-controlled win rate, for "
     "people and for each judge: the first system's win rate if both answers had the same length, under a logistic "
     "model of the preference in tanh of the standardised difference of the answers' lengths (characters), fitted "
     "by maximum likelihood (AlpacaEval fits it with a cross-validated L1 penalty and its instruction-difficulty "
     "table, which only its own instructions have). 95 % intervals over items (an item's judgments together, "
     "Student's t), checked to cover on PRD's real votes and answer lengths with 20 and 60 items; a pair with "
     "fewer than {min_items} items judged gets none. The length coefficient is the log-odds gained per unit of "
     "tanh(length difference / its standard deviation): above 0, the longer answer is preferred; a judge whose "
     "coefficient is well above the people's has a length bias. 'low' and 'high' bound the length-controlled win "
     "rate; the lengths are the answers' mean lengths in characters."),
    ("win-rates", "Pairwise win rates", None, "Row system's share of points against the column system (ties half)."),
    ("win-ratio", "Win-ratio ranking", None, "Each system's share of points over all its battles."),
    ("stopping", "Stopping status per system pair", None, "Each item goes to the majority of its human raters, "
     "each rater's preference being the sign of their preference strength (Eq. 7) over their rating set; a level "
     "count is a tie (the live DiffUse loop uses the same rule). The risk is the hypergeometric tail of the "
     "leader's lead if both systems were equally good on the pool of items the selection drew from (ties count in "
     "n, not in k, unless the settings say otherwise); 'beyond pool' is the same test for an unbounded pool, which "
     "stays meaningful when every pool item is judged. 'decision' is read off an anytime-valid confidence sequence for "
     "the first system's win rate over items (win_rate_low .. win_rate_high, error rate {decision_alpha} per pair): "
     "'a' or 'b' when that system wins more than half, 'equivalent' within {decision_margin} of a half, else "
     "'undecided'. It reads every judgment as it is now (partly rated items and imported files included, in the "
     "order they arrived); with 'Stop buying decided pairs' the study page shows the decision the plan keeps over "
     "whole items as they complete, the one that stays valid however often it is looked at."),
    ("consistency-bins", "Consistency by separability", "consistency-human", "Mean rating-set consistency "
     "(Eq. 4) over 5 equal-count separability bins with standard errors, and the distribution of consistency "
     "over 4 equal-width bins; humans and judges separately."),
    ("rating-sets", "Rating sets", None, "One rater's judgments of one item for one system pair: consistency (Eq. 4) "
     "and preference strength (Eq. 7; negative favours the first system)."),
    ("item-consistency", "Per item", None, "Mean over the item's raters."),
    ("positional-bias", "Positional bias", None, "P(first shown chosen) over non-tie choices, exact binomial test "
     "against 0.5, Clopper-Pearson 95 % interval."),
    ("debiasing", "Debiasing judges with probabilities", None, "The threshold that makes the first-shown output "
     "win half of the comparisons (the median of P(first) over both orders; comparisons exactly at it are decided "
     "'first' the share of the time shown, at random, so that the half holds even when many tie there); accuracy "
     "against the human majority on the same pairs (after debiasing: its expectation over that randomisation)."),
    ("cohen-kappa", "Agreement between raters", None, "Cohen's kappa for rater pairs with at least 10 shared pairs."),
    ("judge-metrics", "Judges against humans", None, "Agreement: each verdict (each presentation order on its own) "
     "against the human majority of its pair, a split (no single most common human answer, e.g. one vote each "
     "for A, B and tie) counted as a tie; agreement_split_first breaks a split by the first human vote, "
     "agreement_split_left_out leaves split pairs out; p_first: the share of its non-tie verdicts "
     "that chose the output shown first (0.5 = no positional bias), first_share the same over all its verdicts. "
     "MSE between multi-label vectors (primary; a tie counts as "
     "both outputs reasonable), coverage (the judge's choice is among the options most humans find reasonable, "
     "the reference code's COV), hit rate (the judge's choice equals the human majority's, the reference code's HR; "
     "the blog finds it unreliable under indeterminacy), Cohen's kappa over the three answers every pair offers (its "
     "first system, its second, a tie) per verdict (each verdict against the human majority of its pair, as "
     "agreement is counted) and per item (per rated pair of outputs: the judge's most common verdict on it over both "
     "orders against the human majority; a judge that flips with the order counts as a tie there, which usually "
     "lowers it), "
     "KL(human || judge) and JS divergence of the forced-choice distributions over (first system, second system, "
     "tie)."),
    ("win-rate-estimates", "Win rates with honest intervals: people alone, and people with judges", None,
     "Each system pair's win rate of its first system (a tie counts half), estimated as the way its items were "
     "drawn allows. From a random sample: people alone, and people with each judge (and all judges together) in "
     "one estimate, the judge's weight λ tuned on the judged items (0: the judge is no help). From items chosen on "
     "purpose (DiffUse, a threshold): only the mean of those items, which describes them and nothing beyond. Every "
     "interval is a 95 % interval for the target each pair names, and has been checked to cover on real data with "
     "10 to 40 judged items. 'Worth' is how many items judged by people alone on a random sample would give the "
     "same precision. On the PRD data, judges that agree with people on about two questions in three were worth "
     "about 5 % more items; drawing the items within bands of the judges' verdicts about 10 %."),
    ("hybrid-strengths", "Bradley-Terry strengths from humans and a judge", None, "Each system's Bradley-Terry "
     "rating (1000 + 400 log10-odds against the study's first system, the reference) from the humans alone and "
     "from the humans and the judge together (PPI++ with power tuning over all system pairs at once: a unit is "
     "one item of one system pair, labelled where humans judged it); for items like these. Efficiency: the "
     "squared ratio of the interval widths, how many units judged by people alone one unit with the judge is "
     "worth (checked against the realised error on PRD)."),
    ("threshold-sweep", "Decision consistency over tau", "threshold-sweep", "Whether judge and humans agree that "
     "option A reaches tau, over a sweep of tau, and the judge's estimation bias."),
    ("beta-sensitivity", "Sensitivity to the human beta", "beta-sensitivity", "MSE when human multi-label vectors "
     "are built from forced choices with sensitivity beta in [0, 0.5]."),
]


def empty_reason(name: str, data: dict) -> str:
    """Why a section has nothing to show, in the population's words."""
    who = data["population"]["label"].lower()
    board = {"leaderboard-elo": "elo", "leaderboard-sep_elo": "sep_elo", "leaderboard-bradley_terry": "bradley_terry",
             "leaderboard-style": "style_control"}
    if name in board and data.get(board[name], {}).get("reason"):
        return f"Not available: {data[board[name]]['reason']}."
    if name == "length-controlled":
        return "No system pair has judgments with a choice yet."
    blocked = data.get("hybrid_strengths_blocked") or []
    if name == "hybrid-strengths" and blocked:
        return (f"Not computed: the items people judged for {', '.join(blocked)} were not a uniform random sample (nor "
                "all judged), and this fit takes its labelled items for one. The win rates above use each pair's own "
                "design.")
    if name == "hybrid-strengths":
        return ("Needs a judge's verdicts on items humans judged (at least two) and on items they did not: import "
                "a judge that judged more of the study than the humans.")
    if name == "win-rate-estimates":
        return "No system pair has two or more items judged by people yet."
    if name == "debiasing":
        return ("No judge gave probabilities (P(A), e.g. from log-probabilities) on pairs the humans judged: "
                "debiasing needs them. Run a judge with log-probabilities, or import verdicts with probability_a.")
    if name in ("judge-metrics", "threshold-sweep", "beta-sensitivity"):
        return ("No judge has judged the pairs the humans judged: run a judge or import a judge's verdicts on the "
                "study page.")
    if name in ("consistency-bins",):
        return ("Needs rating sets of two or more judgments and the items' separability (computed on the "
                "Separability page).")
    if name == "cohen-kappa":
        return "Needs two raters with at least 10 pairs in common."
    if not data["judgments"]["total"]:
        return f"No judgments by {who} yet."
    return "Nothing to show for this population."


def style_sentence(styled: dict) -> str:
    """Who moved first, then the style coefficients and what the penalty does to each, in words."""
    if not styled.get("available"):
        return ""
    names = {"sum_assistant_tokens": "length (tokens)", "header_count": "headers", "list_count": "list items",
             "bold_count": "bold"}
    moved = [m for m in styled["moved"] if m["change"]]
    if moved:
        words = "Moved: " + "; ".join(f"{m['system']} from place {m['plain_place']} to {m['style_place']}"
                                      for m in moved) + ". "
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
    words += ("Style coefficients (log-odds per standard deviation of the difference; above 0, the answer with more "
              "of it is preferred): " + "; ".join(parts) + ". ")
    if styled["reg"] > 0:
        default = ", arena-rank's default and LMArena's" if styled["reg"] == 1 else ""
        words += (f"The penalty ({styled['reg']:g}{default}; the study's settings choose it) pulls the coefficients "
                  "toward 0, so compare them with published numbers only under the same penalty.")
    else:
        words += "No penalty (the study's settings): the coefficients are fitted freely."
    return words


def sections(data: dict) -> list[dict]:
    tables = report_tables(data)
    figs = figures(data)
    params = (data["elo"].get("parameters") or {})
    stopping = (data.get("stopping") or [{}])[0]
    values = {"k": params.get("k"), "rounds": params.get("bootstrap_rounds"), "seed": params.get("seed"),
              "T": params.get("T"), "alpha": params.get("alpha"), "beta": params.get("beta"),
              "decision_alpha": stopping.get("decision_alpha"), "decision_margin": stopping.get("decision_margin"),
              "encoding": (data.get("style_control") or {}).get("encoding", "cl100k_base"),
              "min_items": answer_style.MIN_ITEMS}
    purposive = [f"{e['system_a']} vs {e['system_b']}" for e in data.get("win_rate_estimates", [])
                 if e["design"] == "purposive"]
    out = []
    for name, heading, figure, note in SECTIONS:
        columns, rows = tables.get(name, ([], []))
        figure_svg = figs.get(figure, "") if figure else ""
        if name == "consistency-bins":
            figure_svg = "".join(figs.get(f"consistency-{k}", "") for k in ("human", "judge"))
        note = note.format(**values)
        if name == "leaderboard-style":
            note = style_sentence(data.get("style_control") or {}) + " " + note
        if name.startswith("leaderboard-") and purposive:
            note += (f" The items of {', '.join(purposive)} were chosen on purpose: these ratings and their intervals "
                     "(battles resampled) describe the judged items, not the study's other items.")
        out.append({"name": name, "heading": heading, "note": note, "figure": figure_svg,
                    "columns": columns, "rows": rows[:SHOWN.get(name, SHOWN_ROWS)], "total": len(rows),
                    "empty": empty_reason(name, data)})
    return out


def win_rate_blocks(data: dict) -> list[dict]:
    """The win-rate estimates as the page shows them: per system pair, a sentence on the design and the target,
    an interval plot of its estimates and their rows in words."""
    blocks = []
    for entry in data.get("win_rate_estimates", []):
        rows = [{"system": e.get("short", e["label"]), "rating": e["estimate"], "low": e["low"], "high": e["high"]}
                for e in entry["estimates"]]
        figure = plots.interval_plot(rows, label=f"win rate of {entry['system_a']}", decimals=3,
                                     reference=(0.5, "½: even"))
        blocks.append({**entry, "figure": figure})
    return blocks


def render_body(study, population: Population, data: dict) -> str:
    """The report page's body (everything below the population form) as HTML, from our templates (every value
    escaped); stored with the report and inserted as it is."""
    return render_to_string("analytics/_report_body.html", {
        "study": study, "report": data, "sections": sections(data), "headlines": headlines(data),
        "answers": answers(data) if data["judgments"]["total"] else [],
        "win_rates": win_rate_blocks(data), "query": urlencode(population.query())})


def summary(data: dict) -> dict:
    """What the page reads besides the body: the population, the populations to choose from, the counts."""
    return {key: data[key] for key in ("population", "populations", "judgments")}
