"""Selection's settings of a study (``SelectionSettings``), each declared once: label, one line, section, when it
applies, choices, and whether it shapes the plan (registered by ``SelectionConfig.ready``)."""

from __future__ import annotations

from annotation.study_settings import PLAN, Range, Setting
from selection.core import group_sequential
from selection.core.separability import METRICS
from selection.strategies import STRATEGIES, is_live

ORDER_FREE = ("random",)  # methods whose items reach raters in random order with equal chances


def _strategy(read):
    return STRATEGIES.get(read("selection_method"))


def _looks_apply(read) -> bool:
    """Planned looks read a stopping pair's decision when the study stops buying decided pairs for every pair (the
    ranking goal looks after every item: ``SelectionSettings.looks``)."""
    ranking = read("decision_goal") == "ranking" and read("pair_mode") == "all"
    return read("selection_method") in ORDER_FREE and bool(read("stop_when_decided")) and not ranking


SETTINGS = [
    Setting(
        "selection_method",
        "Selection method",
        "Which items of each system pair raters see when there is a budget.",
        "selection",
        choices=lambda: [(s.name, s.label) for s in STRATEGIES.values()],
        freezes=PLAN,
    ),
    Setting(
        "budget",
        "Budget (items per system pair)",
        "Empty: every item. For iterative DiffUse, the most items it may release.",
        "selection",
        freezes=PLAN,
        limits=Range(1, 1_000_000),
    ),
    Setting(
        "separability_metric",
        "Separability metric",
        "How distinguishable two systems' outputs are, per item "
        "(cosine-la: length-adjusted embedding similarity, the default).",
        "selection",
        choices=lambda: [(m, m) for base in METRICS for m in (base, f"{base}-la")],
        freezes=PLAN,
    ),
    Setting(
        "separability_threshold",
        "Separability threshold",
        "Threshold methods keep items whose separability reaches this.",
        "selection",
        applies=lambda s: _strategy(s) is not None and _strategy(s).uses_threshold,
        freezes=PLAN,
        limits=Range(-1, 1),  # a separability δ is in [-1, 1] (selection/core/separability.py)
    ),
    Setting(
        "risk",
        "Stopping risk",
        "Iterative DiffUse stops once the chance of naming the wrong winner is at most this.",
        "selection",
        applies=lambda s: is_live(s("selection_method")),
        freezes=PLAN,
        limits=Range(0.001, 0.5),
    ),
    Setting(
        "min_n",
        "Items judged first",
        "Iterative DiffUse: representatives judged before the first stopping check.",
        "selection",
        applies=lambda s: is_live(s("selection_method")),
        freezes=PLAN,
        limits=Range(1, 10_000),
    ),
    # chosen before the data: changing them after seeing the intervals would undo what they guarantee
    Setting(
        "decision_alpha",
        "Decision error rate (α)",
        "A system pair is called decided only when the chance of "
        "a wrong call is at most this, however often the study page is looked at (for each pair, or for the "
        "whole study: see the next setting).",
        "selection",
        order=60,
        freezes=PLAN,
        limits=Range(0.001, 0.5),
    ),
    Setting(
        "error_control",
        "Error rate holds for",
        "“Each system pair on its own”: every pair alone is called wrongly with at most the error rate, so with "
        "ten pairs one wrong call somewhere in the study is likely (about one in five at 0.05). “Study-wide”: the "
        "chance of any wrong call among all the pairs is at most the error rate, each pair deciding at the rate "
        "divided by the number of pairs, which needs more judgments a pair. The default is study-wide whenever the "
        "study compares more than one pair (with one pair both are the same).",
        "selection",
        order=60,
        freezes=PLAN,
    ),
    Setting(
        "decision_margin",
        "Equivalence margin",
        "Win rates within this of a half count as a tie between the two systems (0: only a winner decides a pair).",
        "selection",
        order=61,
        freezes=PLAN,
        limits=Range(0, 0.5),
    ),
    Setting(
        "stop_when_decided",
        "Stop buying decided pairs",
        "Once a system pair is decided (a winner, or "
        "equivalent within the margin), no new places of it are given out; answers already under way still count, "
        "and raters get the undecided pairs. Only with random selection, whose items come in random order with "
        "equal chances: what the decision assumes.",
        "selection",
        order=62,
        applies=lambda s: s("selection_method") in ORDER_FREE,
    ),
    Setting(
        "decision_goal",
        "Buy judgments until",
        "Every system pair is decided, or only the ranking is: new "
        "places go to the pairs of systems next to each other in the current ranking whose order is still open "
        "and not implied by other decided pairs (A above B and B above C put A above C), until every such order "
        "is decided or equivalent within the margin. Needs all system pairs compared.",
        "selection",
        order=63,
        applies=lambda s: s("selection_method") in ORDER_FREE and s("stop_when_decided") and s("pair_mode") == "all",
    ),
    Setting(
        "one_rater_first",
        "One rater per item first",
        "While items remain, each item gets one rater; the other "
        "raters per item come only for the pairs those first raters leave undecided. It pays when raters of one "
        "item agree (the budget planner's 1- and several-rater rows show by how much); each of the two steps "
        "decides at half the error rate.",
        "selection",
        order=64,
        applies=lambda s: s("selection_method") in ORDER_FREE and s("stop_when_decided") and s("raters_per_item") > 1,
        freezes=PLAN,
    ),
    Setting(
        "decision_looks",
        "When a pair's decision is read",
        "0: after every item (you may look at any time, which costs the most items). A number of planned looks: "
        "the pair is looked at only when that share of its items is in (with 5, after a fifth, two fifths ... "
        "all of them), each look allowed a little of the error rate and most kept for the last. On the data "
        "tried, 5 looks reached the decisions of a test on all the items with about half the judgments. "
        "1: a single look once every item is in.",
        "selection",
        order=65,
        applies=_looks_apply,
        freezes=PLAN,
        limits=Range(0, group_sequential.MOST_LOOKS),
    ),
    Setting(
        "decision_futility",
        "Give up on a pair below",
        "With planned looks: when, at a look, the chance that the pair will be decided by the last look (if it "
        "goes on as so far) is below this, the study stops buying it and it stays undecided, so its judgments go "
        "to pairs that can still be decided. 0: never give up. Giving up never makes a wrong call more likely.",
        "selection",
        order=66,
        applies=lambda s: _looks_apply(s) and s("decision_looks") > 0,
        freezes=PLAN,
        limits=Range(0, 1, below=True),
    ),
    Setting(
        "sep_threshold_t",
        "Separability midpoint (T)",
        "sep-ELO and separability-weighted selection give half weight here: K·α / (1 + exp(−β(δ − T))).",
        "analysis",
        freezes=PLAN,
        order=40,
        limits=Range(-1, 1),
    ),
    Setting(
        "sep_alpha",
        "Weight scale (α)",
        "The largest weight is α times the ELO K.",
        "analysis",
        freezes=PLAN,
        order=41,
        limits=Range(0, 100, above=True),  # no weight at all would leave sep-ELO nothing to rate
    ),
    Setting(
        "sep_beta",
        "Weight steepness (β)",
        "How sharply the weight rises around T.",
        "analysis",
        freezes=PLAN,
        order=42,
        limits=Range(0, 1_000),
    ),
    Setting(
        "stopping_ties_in_n",
        "Ties count as decided items",
        "In the stopping test a tie never helps the leader (conservative).",
        "analysis",
        freezes=PLAN,
        order=50,
    ),
]
