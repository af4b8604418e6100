"""Where a study's settings live, and the one declaration of each. ``Study`` keeps what the annotation app itself
needs (what raters are asked, what is compared and how it is scheduled); every other app owns its settings as a
model with one row per study -- ``selection.models.SelectionSettings`` (which items raters see, when the live loop
stops), ``analytics.models.AnalysisSettings`` (the report's ELO, bootstrap, aggregation, beta) and
``annotation.models.CrowdSettings`` (crowd work and quality control) -- and registers it here from its
``AppConfig.ready()`` with a ``Setting`` per field: its label and one line on what it does, the section of the
settings page it sits in, when it applies, its choices when another app's registry supplies them, and whether it
freezes once raters start. Each app declares its own in one place (annotation's below, ``selection/study_settings.py``,
``analytics/study_settings.py``); the settings form, the settings page, ``do_update_settings``, duplicate and
export read them here, so none of them needs to know which app owns what. Each app reads its own row
(``study.selection_settings`` ...) and maps it to its parameters in one function
(``selection.strategies.strategy_parameters``, ``analytics.report.data.analysis_parameters``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, cast

from django.db import models


@dataclasses.dataclass(frozen=True)
class SettingsGroup:
    accessor: str  # the row's name on a study, e.g. "selection_settings"
    model: type[models.Model]

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.model._meta.concrete_fields if f.name != "study")


GROUPS: dict[str, SettingsGroup] = {}


def register(model: type[models.Model], accessor: str, settings: list[Setting]) -> None:
    """An app's settings model (one row per study, reached as ``study.<accessor>``) and the declaration of each of
    its fields."""
    GROUPS[accessor] = SettingsGroup(accessor, model)
    declare(settings)
    undeclared = set(GROUPS[accessor].fields) - set(SETTINGS)
    if undeclared:  # a new setting must say what it is and where it goes: fail at start-up, never hide it
        raise ValueError(f"settings of {model.__name__} without a declaration: {', '.join(sorted(undeclared))}")
    study = cast(type[models.Model], model._meta.get_field("study").related_model)  # a settings row's one-to-one
    for owner in (model, study):  # its own settings, and the study's
        for field in owner._meta.concrete_fields:
            _check_range_declared(field)


def _check_range_declared(field: models.Field) -> None:
    """A number setting declares its range and a text setting without a column length its most characters (what
    ``annotation/setting_ranges.py`` checks and the settings page says): fail at start-up, never store anything."""
    setting = SETTINGS.get(field.name)
    if setting is None or setting.form_only or field.choices or setting.choices:
        return
    number = isinstance(field, models.IntegerField | models.FloatField | models.DecimalField)
    if number and setting.limits is None:
        raise ValueError(f"the number setting {field.name} declares no range (Setting.limits)")
    if isinstance(field, models.TextField) and setting.max_chars is None:
        raise ValueError(f"the text setting {field.name} declares no length (Setting.max_chars)")


def group_of(field: str) -> SettingsGroup | None:
    """The registered group that owns a setting, or None for a field of ``Study`` itself."""
    return next((g for g in GROUPS.values() if field in g.fields), None)


def do_create_defaults(study) -> None:
    """Every registered settings row of a new study, with its defaults."""
    for group in GROUPS.values():
        group.model._default_manager.get_or_create(study=study)  # its ``objects``: no settings model has another


def value(study, field: str) -> Any:
    """A setting's stored value, wherever it lives."""
    group = group_of(field)
    return getattr(getattr(study, group.accessor) if group else study, field)


def do_apply(study, changes: dict[str, Any]) -> None:
    """Write settings onto the study and the rows that own them, and save what changed."""
    touched = {}
    for field, new in changes.items():
        group = group_of(field)
        target = getattr(study, group.accessor) if group else study
        setattr(target, field, new)
        if group:
            touched[group.accessor] = target
    study.save()
    for row in touched.values():
        row.save()


# ------------------------------------------------------------------------------------------------------------
# The declaration of each setting

Reader = Callable[[str], Any]  # a setting's saved value by name (``value`` bound to a study)

SECTIONS = [  # the settings page, by task: (anchor, title, one line)
    ("raters-see", "What raters see", "The question, the answer options and how much one assignment holds."),
    ("who-rates", "Who rates", "How many raters, crowd work and quality control, and the address links use."),
    ("selection", "Which items", "Which system pairs are compared and which of their items raters judge."),
    (
        "analysis",
        "How results are computed",
        "The report's leaderboards, stopping test, judge metrics and win-rate estimates.",
    ),
]
PLAN, ANSWER = "plan", "answer"  # what a setting freezes once raters have started


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a number setting takes: from ``low`` to ``high``, an end left out when ``above`` (more than
    ``low``) or ``below`` (less than ``high``) says so."""

    low: float
    high: float
    above: bool = False
    below: bool = False

    def holds(self, number: float) -> bool:
        over = number > self.low if self.above else number >= self.low
        under = number < self.high if self.below else number <= self.high
        return over and under


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    label: str  # what a person reads
    help: str  # one line on what it does
    section: str  # an anchor of SECTIONS
    applies: Callable[[Reader], Any] | None = None  # whether it does anything for the study as saved (None: always)
    choices: Callable[[], list[tuple[str, str]]] | None = None  # the form's choices, when an app's registry has them
    freezes: str | None = None  # PLAN: it shapes the comparison plan; ANSWER: it says what an answer is
    form_only: bool = False  # on the form, stored elsewhere (e.g. the explicit list of system pairs)
    order: int = 0  # its place in its section (then declaration order): each app declares its own settings
    limits: Range | None = None  # a number's range (every number setting has one: setting_ranges)
    max_chars: int | None = None  # a text's most characters (a text column without a length needs one)


SETTINGS: dict[str, Setting] = {}


def declare(settings: list[Setting]) -> None:
    for setting in settings:
        if setting.section not in {anchor for anchor, *_ in SECTIONS}:
            raise ValueError(f"{setting.name}: no section {setting.section!r}")
        SETTINGS[setting.name] = setting


def applies(name: str, read: Reader) -> bool:
    setting = SETTINGS[name]
    return True if setting.applies is None else bool(setting.applies(read))


def frozen_after_start() -> tuple[str, ...]:
    """Settings that cannot change once raters have started: the plan's, and what an answer is (forced choices and
    response sets would mix)."""
    return tuple(s.name for s in SETTINGS.values() if s.freezes and not s.form_only)


def plan_fields() -> tuple[str, ...]:
    return tuple(s.name for s in SETTINGS.values() if s.freezes == PLAN and not s.form_only)


def answer_fields() -> tuple[str, ...]:
    return tuple(s.name for s in SETTINGS.values() if s.freezes == ANSWER)


def sections() -> list[tuple[str, str, str, list[str]]]:
    """Each section of the settings page with its settings in declaration order."""
    return [
        (
            anchor,
            title,
            intro,
            [s.name for s in sorted(SETTINGS.values(), key=lambda s: s.order) if s.section == anchor],
        )
        for anchor, title, intro in SECTIONS
    ]


def _mode(read: Reader) -> str:
    return read("elicitation")


# annotation's own: the fields of Study and of CrowdSettings (registered by AnnotationConfig.ready)
STUDY_SETTINGS = [
    Setting(
        "answer_unit",
        "What one answer covers",
        "A pair of outputs; or every output of an item, ranked best first (drag, or a place per output); or "
        "the best and the worst of several. A ranking or best-worst answer counts as the pairs it implies "
        "(docs/ratings.md#rankings). Attention checks and practice stay pairs.",
        "raters-see",
        freezes=PLAN,
    ),
    Setting(
        "outputs_shown",
        "Outputs per best-worst screen",
        "How many of an item's outputs one best-worst screen shows, drawn at random for each rater.",
        "raters-see",
        applies=lambda s: s("answer_unit") == "best_worst",
        freezes=ANSWER,
        limits=Range(3, 20),
    ),
    Setting(
        "elicitation",
        "How raters answer",
        "Forced choice: one answer. Response set: every acceptable output. "
        "Paired: both, in that order. 5-point scale: which is better and by how much.",
        "raters-see",
        freezes=ANSWER,
    ),
    Setting(
        "question", "Question", "Shown above each pair.", "raters-see", applies=lambda s: _mode(s) != "response_set"
    ),
    Setting(
        "response_set_question",
        "Question (response set)",
        "Shown above each pair when raters mark every acceptable output.",
        "raters-see",
        applies=lambda s: _mode(s) == "response_set",
    ),
    Setting(
        "also_acceptable_question",
        "Follow-up question (paired)",
        "Asked after the forced choice.",
        "raters-see",
        applies=lambda s: _mode(s) == "paired",
    ),
    Setting(
        "further_questions",
        "Further questions",
        "More questions about every pair, one per line: key | how | "
        "question, e.g. harmless | forced_choice | Which output is more harmless?  How: forced_choice, "
        "response_set, paired, preference_scale (analysed on its own in the report), rationale (free text, "
        "required) or optional rationale. Judges answer only the main question.",
        "raters-see",
        freezes=ANSWER,
        max_chars=10_000,
    ),
    Setting("allow_tie", "Offer a tie", "A third option besides the two outputs.", "raters-see"),
    Setting("tie_label", "Tie label", "What the tie option says.", "raters-see", applies=lambda s: s("allow_tie")),
    Setting(
        "neither_option",
        "Offer “both are bad”",
        "Counted as a tie in ratings and as no acceptable output in the judge metrics.",
        "raters-see",
    ),
    Setting(
        "neither_label",
        "“Both are bad” label",
        "What that option says.",
        "raters-see",
        applies=lambda s: s("neither_option"),
    ),
    Setting("allow_skip", "Let raters skip an item", "With a reason; the item goes back to the queue.", "raters-see"),
    Setting(
        "allow_comment",
        "Comment box",
        "An optional free-text comment per pair, exported with the judgment.",
        "raters-see",
    ),
    Setting(
        "output_format",
        "Show outputs as",
        "Rendered Markdown (code highlighted, raw HTML shown as text) or plain text.",
        "raters-see",
    ),
    Setting(
        "instructions",
        "Instructions",
        "Shown before the first pair and on demand while rating (Markdown).",
        "raters-see",
        max_chars=50_000,
    ),
    # Neither freezes once raters start: a consent text must stay correctable (a typo, a contact address) while a
    # study runs -- each rater keeps the time they agreed and the hash of the text they agreed to, and is not asked
    # again -- and practice is never data, so changing it only changes what raters arriving later practise on.
    Setting(
        "raters_language",
        "Raters' language",
        "The language of SepLab's own words on rater pages (buttons, "
        "messages, the completion page); your question, instructions, labels and consent text are shown as you "
        "wrote them, so write them in the same language. The rater's browser: the language it asks for, among "
        "those shipped (else English).",
        "raters-see",
    ),
    Setting(
        "consent_text",
        "Consent text",
        "Human raters agree to it before their first pair (Markdown); empty: no consent step.",
        "raters-see",
        max_chars=50_000,
    ),
    Setting(
        "practice_pairs",
        "Practice pairs",
        "Attention checks a new rater answers with feedback before their "
        "first real pair; never counted (0: no practice).",
        "raters-see",
        limits=Range(0, 5),
    ),
    Setting(
        "pairs_per_assignment",
        "Sampled pairs per item (N)",
        "A rater judges N pairs of one item's sampled "
        "outputs; N ≥ 2 measures how consistent they are. N = 1 is a plain pairwise study.",
        "raters-see",
        freezes=PLAN,
        limits=Range(1, 50),
    ),
    Setting(
        "sample_pairing",
        "How the N pairs are drawn",
        "One-to-one shows each sample once (the paper); the grid allows N larger than the samples.",
        "raters-see",
        applies=lambda s: s("pairs_per_assignment") > 1,
        freezes=PLAN,
    ),
    Setting(
        "judgments_per_assignment",
        "Pairs per assignment",
        "Whole items are bundled up to this many pairs, with one completion code (what a crowd site pays for).",
        "raters-see",
        limits=Range(1, 200),
    ),
    Setting(
        "raters_per_item",
        "Raters per item",
        "How many different raters judge each selected item.",
        "who-rates",
        freezes=PLAN,
        limits=Range(1, 100),
    ),
    Setting(
        "public_base_url",
        "Public base URL",
        "The address raters reach this server at; every link of the study "
        "is built on it (empty: the address you are browsing).",
        "who-rates",
        order=100,
    ),
    Setting(
        "pair_mode",
        "Which system pairs",
        "All pairs, each system against a baseline, or a list you tick.",
        "selection",
        freezes=PLAN,
    ),
    Setting(
        "baseline",
        "Baseline system",
        "Every other system is compared with it.",
        "selection",
        applies=lambda s: s("pair_mode") == "baseline",
        freezes=PLAN,
    ),
    Setting(
        "explicit_pairs",
        "System pairs to compare",
        "Tick the pairs.",
        "selection",
        applies=lambda s: s("pair_mode") == "explicit",
        freezes=PLAN,
        form_only=True,
    ),
    Setting(
        "scheduling",
        "Scheduling",
        "How system pairs and display orders are spread over items.",
        "selection",
        freezes=PLAN,
    ),
    Setting(
        "seed",
        "Random seed",
        "The same file, settings and seed give the same plan, selection and bootstrap.",
        "selection",
        freezes=PLAN,
        order=100,
        limits=Range(0, 2**63 - 1),  # the column's (a 64-bit integer), never negative: numpy's generators refuse it
    ),
]
CROWD_SETTINGS = [
    Setting(
        "max_assignments_per_rater",
        "Most assignments per rater",
        "Empty: no limit.",
        "who-rates",
        limits=Range(1, 100_000),
    ),
    Setting(
        "assignment_timeout_minutes",
        "Assignment timeout (minutes)",
        "Unanswered this long, an assignment expires and its places return to the queue.",
        "who-rates",
        limits=Range(1, 10_080),  # a week
    ),
    Setting(
        "first_answer_minutes",
        "First answer within (minutes)",
        "A crowd worker or open-link visitor with no "
        "answer by then loses the places they took, so invented ids cannot hold the study's places.",
        "who-rates",
        limits=Range(1, 1_440),  # a day
    ),
    Setting(
        "gold_rate",
        "Attention checks per pair",
        "E.g. 0.2 adds one gold pair per five pairs.",
        "who-rates",
        limits=Range(0, 0.5),
    ),
    Setting(
        "min_seconds_per_pair",
        "Minimum seconds per pair",
        "Faster answers are refused with a reminder (0: off).",
        "who-rates",
        limits=Range(0, 3_600),
    ),
    Setting(
        "screen_min_gold",
        "Gold answers before screening",
        "A rater's accuracy is judged after this many.",
        "who-rates",
        applies=lambda s: s("gold_rate") > 0,
        limits=Range(0, 1_000),
    ),
    Setting(
        "screen_accuracy",
        "Gold accuracy bar",
        "Raters below it are screened out (no more work).",
        "who-rates",
        applies=lambda s: s("gold_rate") > 0,
        limits=Range(0, 1),
    ),
    Setting(
        "pay_per_assignment",
        "Pay per assignment",
        "What one assignment pays (e.g. 1.20); the budget planner and "
        "the decisions table turn judgments into money with it. Empty: no money shown.",
        "who-rates",
        limits=Range(0, 10_000),
    ),
]
declare(STUDY_SETTINGS)
