"""What an answer is, in one place (docs/indeterminacy.md#options-and-elicitation-modes): each elicitation mode is
one registered unit, like the selection strategies in ``selection/strategies.py``.

A mode defines what a rater is asked and how the answer is kept:

- ``fieldsets(study)``: its form fields (radio buttons / check boxes), each with the keyboard key that
  selects it; the page renders them with the mode's ``template`` partial, and ``static/js/rate.js`` only
  follows the keys written on the options (it knows no mode);
- ``read(data)``: the submitted form, in display coordinates (``Answer``), and ``validate(study, answer)``:
  what is missing or contradictory, said to the rater;
- ``to_model(answer, a_shown_first)``: storage, in model coordinates (``Stored``: the judgment's ``choice``,
  ``response_set`` and ``strength`` columns); the display <-> model flip is ``annotation/orientation.py``;
  ``from_model`` and ``form_data`` go back, to show a stored answer again when the rater changes it, and
  ``selected`` checks the options of a form (a refused one shown again, or that answer);
- ``gold_correct(answer, good)``: how an attention check is scored;
- ``question(study)``: the question it asks, and ``verdict``: the lines an LLM judge ends its reply with to give
  the same answer (``annotation/judges/prompts.py`` formats and reads each kind of line, knowing no mode).

Every mode stores the same three columns, so the export (docs/interfaces.md#judgment-format, with its extensions) and
the analytics read any judgment, imported or collected, the same way: the rating in {-1, 0, +1} of Eq. 4 / 7 is
``effective_choice`` of the stored answer (below) (a 5-point answer counts by its sign,
"both bad" as a tie), and Omega for the indeterminacy metrics is ``analytics.core.indeterminacy.omega`` (a
response set as given, an empty one -- "neither is acceptable" / "both are bad" -- as [0, 0]).

The study option "neither is acceptable / both are bad" (``Study.neither_option``) adds to a forced
choice the display answer ``both_bad`` (stored: choice "tie", response set [] -- no preference, and no
output acceptable) and to a response set the box "neither is acceptable" (stored: the empty set).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from annotation import orientation, rater_words

FIRST, SECOND, TIE, BOTH_BAD = "first", "second", "tie", "both_bad"
OUTPUTS = (FIRST, SECOND)
NEITHER = "neither"  # the response-set box "neither is acceptable"
STRENGTHS = {1: "better", 2: "much better"}  # the preference scale's strengths: stored, exported, imported


def strength_words(strength: int) -> str:
    """A strength of the preference scale as a rater reads it (``STRENGTHS`` are the stored names)."""
    return _("better") if strength == 1 else _("much better")


class AnswerError(ValueError):
    """An answer the study does not accept; the message is for the rater."""


@dataclasses.dataclass(frozen=True)
class Answer:
    """A rater's answer as submitted, in display coordinates."""

    choice: str | None = None  # first | second | tie | both_bad
    response: frozenset[str] | None = None  # subset of {first, second}, or {neither}
    strength: int | None = None  # 1 = better, 2 = much better (the preference scale)


@dataclasses.dataclass(frozen=True)
class Stored:
    """An answer as stored on a judgment, in model coordinates."""

    choice: str | None  # a | b | tie
    response_set: list[str] | None  # sorted subset of {a, b}; [] = no output acceptable
    strength: int | None = None

    def fields(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Option:
    """One input of the answer form."""

    input: str  # radio | checkbox
    name: str  # the form field
    value: str
    label: str
    key: str  # the key that selects it, as written on data-key ("1", "shift-1")
    key_label: str  # as shown ("1", "⇧1")
    alt_key: str = ""  # a second key (event.key, e.g. "ArrowLeft")
    alt_label: str = ""
    checked: bool = False  # selected when the form is shown (a refused answer shown again, an answer being changed)


@dataclasses.dataclass(frozen=True)
class Fieldset:
    legend: str
    options: tuple[Option, ...]


def selected(fieldsets: tuple[Fieldset, ...], data) -> tuple[Fieldset, ...]:
    """The fieldsets with every option ``data`` selects checked: ``data`` is a submitted form (a ``QueryDict``) or
    ``form_data`` of an earlier answer, read by each option's own field name and value (the paired mode's choice
    "first" and its box "Output 1 is acceptable" share a value, never a name)."""
    if data is None:
        return fieldsets
    return tuple(
        Fieldset(
            f.legend,
            tuple(dataclasses.replace(o, checked=o.value in _values(data, o.name)) for o in f.options),
        )
        for f in fieldsets
    )


def _values(data, name: str) -> list[str]:
    getlist = getattr(data, "getlist", None)
    if getlist is not None:
        return getlist(name)
    value = data.get(name)
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


_ARROWS = {"1": ("ArrowLeft", "←"), "2": ("ArrowRight", "→"), "3": ("ArrowDown", "↓")}


def _option(kind: str, name: str, value: str, label: str, key: str) -> Option:
    alt, alt_label = _ARROWS.get(key, ("", ""))
    return Option(kind, name, value, label, key, key, alt, alt_label)


def _read_set(data: Mapping) -> frozenset[str] | None:
    values = data.getlist("response") if hasattr(data, "getlist") else data.get("response") or []
    return frozenset(values)


def _check_set(answer: Answer, study, *, allow_empty: bool) -> None:
    response = answer.response or frozenset()
    if response - {*OUTPUTS, NEITHER} or (NEITHER in response and not study.neither_option):
        raise AnswerError(_("Only the two outputs can be marked acceptable."))
    if NEITHER in response and response & set(OUTPUTS):
        raise AnswerError(_("You marked an output acceptable and also 'neither is acceptable': choose one."))
    if not response and not allow_empty:
        raise AnswerError(
            _("Select at least one output you find acceptable, or 'neither is acceptable'.")
            if study.neither_option
            else _("Select at least one output you find acceptable.")
        )


def _display_set(response_set: list[str] | None, a_shown_first: bool) -> frozenset[str] | None:
    if response_set is None:
        return None
    return frozenset(orientation.to_display(s, a_shown_first) for s in response_set)


def _model_set(response: frozenset[str] | None, a_shown_first: bool) -> list[str]:
    return sorted(orientation.to_model(s, a_shown_first) for s in (response or ()) if s in OUTPUTS)


class Mode(abc.ABC):
    """One elicitation mode. Subclasses set the class attributes and override what differs."""

    name: ClassVar[str]
    label: ClassVar[str]
    template: ClassVar[str] = "annotation/answers/options.html"
    # the kinds of verdict line a judge's reply ends with: "choice" (A / B / Tie / Both bad), "acceptable" (every
    # acceptable output), "also" (the outputs also acceptable besides the choice), "scale" (the 5 points)
    verdict: ClassVar[tuple[str, ...]] = ("choice",)

    def question(self, study) -> str:
        return study.question

    @abc.abstractmethod
    def fieldsets(self, study) -> tuple[Fieldset, ...]:
        """The form, in display order."""

    def read(self, data: Mapping) -> Answer:
        return Answer(choice=data.get("choice") or None)

    @abc.abstractmethod
    def validate(self, study, answer: Answer) -> None:
        """Raise ``AnswerError`` (a message for the rater) for an answer the study does not accept."""

    def to_model(self, answer: Answer, a_shown_first: bool) -> Stored:
        if answer.choice == BOTH_BAD:
            return Stored("tie", [], None)
        return Stored(orientation.to_model(answer.choice, a_shown_first), None, answer.strength)

    def from_model(self, stored: Stored, a_shown_first: bool) -> Answer:
        """The inverse of ``to_model``: a stored answer as the rater gave it (display coordinates), to show it again
        when they change it."""
        if stored.choice == TIE and stored.response_set == []:
            return Answer(choice=BOTH_BAD)
        return Answer(
            choice=orientation.to_display(stored.choice, a_shown_first) if stored.choice else None,
            response=_display_set(stored.response_set, a_shown_first),
            strength=stored.strength,
        )

    def form_data(self, answer: Answer) -> dict[str, list[str]]:
        """The form fields (name -> values) that submit ``answer``; what ``read`` reads back."""
        data: dict[str, list[str]] = {}
        if answer.choice:
            data["choice"] = [answer.choice + (f":{answer.strength}" if answer.strength else "")]
        if answer.response:
            data["response"] = sorted(answer.response)
        return data

    def gold_correct(self, answer: Answer, good: str) -> bool:
        """``good`` is where the attention check's good output was shown (first / second)."""
        return answer.choice == good

    def describe(self, answer: Answer) -> str:
        """The answer in a few characters, as kept for an attention check."""
        if answer.choice is not None:
            return answer.choice + (f":{answer.strength}" if answer.strength else "")
        return ",".join(sorted(answer.response or ()))

    def _choices(self, study) -> tuple[Option, ...]:
        options = [
            _option("radio", "choice", FIRST, _("Output 1"), "1"),
            _option("radio", "choice", SECOND, _("Output 2"), "2"),
        ]
        if study.allow_tie:
            options.append(_option("radio", "choice", TIE, rater_words.shown(study.tie_label), "3"))
        if study.neither_option:
            options.append(_option("radio", "choice", BOTH_BAD, rater_words.shown(study.neither_label), "0"))
        return tuple(options)

    def _check_choice(self, study, answer: Answer) -> None:
        if not answer.choice:
            raise AnswerError(_("Choose one of the options before submitting."))
        if answer.choice not in {o.value for o in self._choices(study)}:
            raise AnswerError(_("That option is not offered in this study."))

    def key_help(self, study) -> list[tuple[tuple[str, ...], str]]:
        """(keys, what they do) for the instructions, in the form's order."""
        enter = pgettext("the key", "Enter")
        return [
            (tuple(filter(None, (o.key_label, o.alt_label))), o.label)
            for fieldset in self.fieldsets(study)
            for o in fieldset.options
        ] + [((enter,), _("submit"))]


class ForcedChoice(Mode):
    name = "forced_choice"
    label = "Forced choice (pick one)"

    def fieldsets(self, study):
        return (Fieldset(rater_words.shown(study.question), self._choices(study)),)

    def validate(self, study, answer):
        self._check_choice(study, answer)


class ResponseSet(Mode):
    name = "response_set"
    label = "Response set (select every acceptable answer)"
    verdict = ("acceptable",)

    def question(self, study) -> str:
        return rater_words.shown(study.response_set_question)

    def fieldsets(self, study):
        options = [
            _option("checkbox", "response", FIRST, _("Output 1"), "1"),
            _option("checkbox", "response", SECOND, _("Output 2"), "2"),
        ]
        if study.neither_option:
            options.append(_option("checkbox", "response", NEITHER, rater_words.shown(study.neither_label), "0"))
        return (Fieldset(self.question(study), tuple(options)),)

    def read(self, data):
        return Answer(response=_read_set(data))

    def validate(self, study, answer):
        _check_set(answer, study, allow_empty=False)

    def to_model(self, answer, a_shown_first):
        return Stored(None, _model_set(answer.response, a_shown_first), None)

    def from_model(self, stored, a_shown_first):
        if stored.response_set == []:
            return Answer(response=frozenset({NEITHER}))
        return Answer(response=_display_set(stored.response_set, a_shown_first))

    def gold_correct(self, answer, good):
        return answer.response == {good}


class Paired(Mode):
    name = "paired"
    label = "Paired (pick one, then mark the others that are also acceptable)"
    verdict = ("choice", "also")

    def fieldsets(self, study):
        also = (
            Option("checkbox", "response", FIRST, _("Output 1 is acceptable"), "shift-1", "⇧1"),
            Option("checkbox", "response", SECOND, _("Output 2 is acceptable"), "shift-2", "⇧2"),
        )
        return (
            Fieldset(rater_words.shown(study.question), self._choices(study)),
            Fieldset(rater_words.shown(study.also_acceptable_question), also),
        )

    def read(self, data):
        return Answer(choice=data.get("choice") or None, response=_read_set(data))

    def validate(self, study, answer):
        self._check_choice(study, answer)
        response = answer.response or frozenset()
        if response - set(OUTPUTS):
            raise AnswerError(_("Only the two outputs can be marked acceptable."))
        if answer.choice == BOTH_BAD and response:
            raise AnswerError(_("You said both are bad: leave the 'also acceptable' boxes empty."))
        if answer.choice == TIE and not response:
            raise AnswerError(_("You chose no preference: also mark which outputs are acceptable."))

    def to_model(self, answer, a_shown_first):
        if answer.choice == BOTH_BAD:
            return Stored("tie", [], None)
        choice = orientation.to_model(answer.choice, a_shown_first)
        chosen = {choice} if choice in ("a", "b") else set()  # the chosen output is acceptable
        return Stored(choice, sorted(set(_model_set(answer.response, a_shown_first)) | chosen), None)


class PreferenceScale(Mode):
    """Five points: output 1 much better / better / the same / output 2 better / much better. Ratings
    (Eq. 4 / 7) use its sign; the strength is stored and exported."""

    name = "preference_scale"
    label = "5-point preference scale (1 much better … 2 much better)"
    verdict = ("scale",)
    _POINTS = ((FIRST, 2), (FIRST, 1), (TIE, None), (SECOND, 1), (SECOND, 2))

    def fieldsets(self, study):
        options = []
        for key, (side, strength) in enumerate(self._POINTS, start=1):
            if side == TIE:
                options.append(Option("radio", "choice", TIE, _("About the same"), str(key), str(key)))
            else:
                options.append(
                    Option(
                        "radio", "choice", f"{side}:{strength}", self._point_label(side, strength), str(key), str(key)
                    )
                )
        if study.neither_option:
            options.append(_option("radio", "choice", BOTH_BAD, rater_words.shown(study.neither_label), "0"))
        return (Fieldset(study.question, tuple(options)),)

    @staticmethod
    def _point_label(side: str, strength: int) -> str:
        if side == FIRST:
            return _("Output 1 is better") if strength == 1 else _("Output 1 is much better")
        return _("Output 2 is better") if strength == 1 else _("Output 2 is much better")

    def read(self, data):
        value = data.get("choice") or ""
        side, _, strength = value.partition(":")
        if side in OUTPUTS and strength in ("1", "2"):
            return Answer(choice=side, strength=int(strength))
        return Answer(choice=value or None)

    def validate(self, study, answer):
        if not answer.choice:
            raise AnswerError(_("Choose one of the options before submitting."))
        offered = {(s, n) for s, n in self._POINTS} | ({(BOTH_BAD, None)} if study.neither_option else set())
        if (answer.choice, answer.strength) not in offered:
            raise AnswerError(_("That option is not offered in this study."))


MODES: dict[str, Mode] = {mode.name: mode for mode in (ForcedChoice(), ResponseSet(), Paired(), PreferenceScale())}
CHOICES = [(mode.name, mode.label) for mode in MODES.values()]


def mode_of(study) -> Mode:
    return MODES[study.elicitation]


def no_output_acceptable(choice: str | None, response_set=None) -> bool:
    """Whether a stored answer says neither output is acceptable: "both are bad" on a forced choice (choice "tie",
    response set []) or "neither is acceptable" on a response set (no choice, response set [])."""
    return response_set == [] and choice in (None, "tie")


def effective_choice(choice: str | None, response_set=None, probability_a: float | None = None) -> str | None:
    """A stored answer as one choice in model coordinates ("a", "b", "tie", or None without one): the forced choice
    when there is one (a 5-point answer is stored as its side, so ratings use its sign; "both are bad" is stored as a
    tie); else a response set of one system votes for it, and of both or of neither ("neither is acceptable") is no
    preference; else a judge's P(A) above / below / at 1/2."""
    if choice is not None:
        return choice
    if response_set is not None:
        return response_set[0] if len(response_set) == 1 else "tie"
    if probability_a is not None:
        return "a" if probability_a > 0.5 else ("b" if probability_a < 0.5 else "tie")
    return None


def arena_winner(choice: str | None, response_set=None) -> str | None:
    """A stored human answer in Chatbot Arena's words (its battles' ``winner``): "model_a" / "model_b" for the
    ``effective_choice`` of a side, "tie (bothbad)" when ``no_output_acceptable`` (both are bad; neither is
    acceptable), else "tie"; None without an answer."""
    if no_output_acceptable(choice, response_set):
        return "tie (bothbad)"
    effective = effective_choice(choice, response_set)
    if effective is None:
        return None
    return {"a": "model_a", "b": "model_b"}.get(effective, "tie")


def stored_in_words(
    choice: str | None,
    response_set=None,
    strength: int | None = None,
    probability_a: float | None = None,
    system_a: str = "A",
    system_b: str = "B",
) -> str:
    """A stored answer (model coordinates) in a few words a researcher reads, naming the systems: "A is better",
    "B is much better", "a tie", "both are bad", "only A is acceptable", "both are acceptable", "neither is
    acceptable", "P(A better) = 0.73"."""
    names = {"a": system_a, "b": system_b}
    if choice in names:
        other = "b" if choice == "a" else "a"
        also = f"; {names[other]} is also acceptable" if response_set and other in response_set else ""
        return f"{names[choice]} is {STRENGTHS.get(strength or 1, 'better')}{also}"
    if choice == "tie":
        if response_set == []:
            return "both are bad"
        if response_set:
            return "a tie; " + (
                f"only {names[response_set[0]]} is acceptable" if len(response_set) == 1 else "both are acceptable"
            )
        return "a tie"
    if response_set is not None:
        if len(response_set) == 1:
            return f"only {names[response_set[0]]} is acceptable"
        return "both are acceptable" if response_set else "neither is acceptable"
    if probability_a is not None:
        return f"P({system_a} better) = {probability_a:.2f}"
    return "no answer"
