"""The questions a rater answers about each pair, in one place: the study's main question (``Study.question``,
answered in ``Study.elicitation``; what LLM judges are asked too) and any further ones (``Study.further_questions``,
Potato's multi-question task design), e.g. harmlessness beside helpfulness, or a required rationale.

A further question is one line of the setting, ``key | how | question``:

- ``key``: a short name (letters, digits, underscores; it names the question in exports and the report's
  question selector);
- ``how``: an elicitation mode of ``annotation/elicitation.py`` (``forced_choice``, ``response_set``, ``paired``,
  ``preference_scale``): a preference, stored and analysed like the main question's answers; or ``rationale``
  (free text the rater must write) or ``optional rationale``;
- the question as raters read it.

The answers to further questions are stored on the judgment (``Judgment.answers``: key -> the mode's ``Stored``
fields in model coordinates, or ``{"text": ...}`` for a rationale), written with it in one transaction by
``annotation/rating/recording.py``, so a pair is answered whole or not at all. The report analyses one preference
question at a time (``analytics.populations.Population.question``). Judges answer the main question only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from annotation import elicitation

RATIONALE, OPTIONAL_RATIONALE = "rationale", "optional rationale"
MAIN = ""  # the main question's key
KEY = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_QUESTIONS = 10
RATIONALE_MAX_CHARS = 2000


@dataclasses.dataclass(frozen=True)
class Question:
    key: str
    text: str
    how: str  # an elicitation mode's name, RATIONALE or OPTIONAL_RATIONALE

    @property
    def is_preference(self) -> bool:
        return self.how in elicitation.MODES

    @property
    def required(self) -> bool:
        return self.how != OPTIONAL_RATIONALE

    @property
    def prefix(self) -> str:
        """The form fields' prefix (the main question's fields have none)."""
        return f"q-{self.key}-" if self.key else ""

    @property
    def mode(self) -> elicitation.Mode:
        return elicitation.MODES[self.how]


def parse(text: str) -> list[Question]:
    """The further questions written in the setting (one per line, ``key | how | question``; blank lines and lines
    starting with # are ignored). Raises ``ValidationError`` naming every bad line."""
    questions: list[Question] = []
    problems: list[str] = []
    for number, raw in enumerate((text or "").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|", 2)]
        if len(parts) != 3 or not all(parts):
            problems.append(f"Line {number}: write 'key | how | question' (three parts separated by |).")
            continue
        key, how, question = parts[0], " ".join(parts[1].lower().split()), parts[2]
        if not KEY.match(key):
            problems.append(
                f"Line {number}: the key '{key}' must start with a lowercase letter and have only "
                "lowercase letters, digits and underscores (at most 40)."
            )
        elif key in {q.key for q in questions}:
            problems.append(f"Line {number}: the key '{key}' is used twice.")
        if how not in elicitation.MODES and how not in (RATIONALE, OPTIONAL_RATIONALE):
            problems.append(
                f"Line {number}: '{parts[1]}' is not a way to answer; use one of "
                + ", ".join([*elicitation.MODES, RATIONALE, OPTIONAL_RATIONALE])
                + "."
            )
        if len(question) > 500:
            problems.append(f"Line {number}: the question is longer than 500 characters.")
        questions.append(Question(key, question, how))
    if len(questions) > MAX_QUESTIONS:
        problems.append(f"At most {MAX_QUESTIONS} further questions.")
    if problems:
        raise ValidationError(problems)
    return questions


def validate(text: str) -> None:
    """The setting's validator (``Study.further_questions``)."""
    parse(text)


def main(study) -> Question:
    mode = elicitation.mode_of(study)
    return Question(MAIN, mode.question(study), study.elicitation)


def further(study) -> list[Question]:
    """The study's further questions (a stored setting was validated when saved)."""
    return parse(study.further_questions)


def preference_questions(study) -> list[Question]:
    """The questions whose answers the report analyses: the main one, then every further preference question."""
    return [main(study), *(q for q in further(study) if q.is_preference)]


def further_preference_keys(study) -> list[str]:
    """The keys of the further preference questions: what a report's ``question`` may name."""
    return [q.key for q in further(study) if q.is_preference]


class _Asked:
    """The study as a further question's mode sees it: the question's own text, the study's other options."""

    def __init__(self, study, question: Question) -> None:
        self._study, self._question = study, question

    def __getattr__(self, name: str) -> Any:
        if name in ("question", "response_set_question"):
            return self._question.text
        return getattr(self._study, name)


def fieldsets(study, question: Question) -> tuple[elicitation.Fieldset, ...]:
    """A further preference question's form: its mode's fieldsets with the question's prefix on every field name
    and no keyboard keys (the keys belong to the main question)."""
    out = []
    for fieldset in question.mode.fieldsets(_Asked(study, question)):
        options = tuple(
            dataclasses.replace(o, name=question.prefix + o.name, key="", key_label="", alt_key="", alt_label="")
            for o in fieldset.options
        )
        out.append(elicitation.Fieldset(fieldset.legend, options))
    return tuple(out)


class _Prefixed(Mapping):
    """A submitted form as one question's mode reads it: only its prefixed fields, without the prefix."""

    def __init__(self, data, prefix: str) -> None:
        self._data, self._prefix = data, prefix

    def __getitem__(self, key: str):
        return self._data[self._prefix + key]

    def __iter__(self):
        return (k[len(self._prefix) :] for k in self._data if k.startswith(self._prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def getlist(self, key: str) -> list:
        getlist = getattr(self._data, "getlist", None)
        if getlist is not None:
            return getlist(self._prefix + key)
        value = self._data.get(self._prefix + key)
        return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def read(study, data) -> dict[str, elicitation.Answer | str]:
    """The further questions' answers in a submitted form, in display coordinates (a rationale as its text)."""
    answers: dict[str, elicitation.Answer | str] = {}
    for q in further(study):
        if q.is_preference:
            answers[q.key] = q.mode.read(_Prefixed(data, q.prefix))
        else:
            answers[q.key] = (data.get(q.prefix + "text") or "").strip()
    return answers


def to_model(study, answers: Mapping[str, elicitation.Answer | str], a_shown_first: bool) -> dict[str, dict]:
    """Check the further questions' answers (every question answered as it asks, nothing else) and return them as
    stored on the judgment, in model coordinates. Raises ``elicitation.AnswerError`` naming the question."""
    asked = further(study)
    unknown = set(answers) - {q.key for q in asked}
    if unknown:
        raise elicitation.AnswerError(f"This study asks no question '{sorted(unknown)[0]}'.")
    stored: dict[str, dict] = {}
    for q in asked:
        answer = answers.get(q.key)
        if q.is_preference:
            if not isinstance(answer, elicitation.Answer):
                raise elicitation.AnswerError(_("Answer the question '%(question)s'.") % {"question": q.text})
            try:
                q.mode.validate(_Asked(study, q), answer)
            except elicitation.AnswerError as exc:
                raise elicitation.AnswerError(f"{q.text} {exc}") from None
            stored[q.key] = q.mode.to_model(answer, a_shown_first).fields()
        else:
            text = answer.strip() if isinstance(answer, str) else ""
            if q.required and not text:
                raise elicitation.AnswerError(
                    _("Answer the question '%(question)s' in a few words.") % {"question": q.text}
                )
            if len(text) > RATIONALE_MAX_CHARS:
                raise elicitation.AnswerError(
                    _("The answer to '%(question)s' is longer than %(most)d characters.")
                    % {"question": q.text, "most": RATIONALE_MAX_CHARS}
                )
            if text:
                stored[q.key] = {"text": text}
    return stored


def stored_fields(judgment_answers: Mapping[str, Any] | None, key: str) -> dict[str, Any] | None:
    """One further question's stored answer on a judgment (``choice``, ``response_set``, ``strength`` in model
    coordinates, or ``text``), or None when the judgment has none (a judge's, or one made before the question)."""
    return (judgment_answers or {}).get(key) if key else None


def form(study, submitted=None) -> list[dict]:
    """What the rating page shows of the further questions, in order: a preference question's fieldsets (rendered by
    its mode's template) or a rationale's text box; ``submitted``: a refused form, whose answers are shown again
    (a typed rationale is not lost)."""
    out = []
    for q in further(study):
        given = _Prefixed(submitted, q.prefix) if submitted is not None else None
        out.append(
            {
                "question": q,
                "fieldsets": fieldsets(study, q) if q.is_preference else (),
                "template": q.mode.template if q.is_preference else "",
                "field": q.prefix + "text",
                "max_chars": RATIONALE_MAX_CHARS,
                "text": (given.get("text") or "") if given is not None else "",
                "checked": ([*given.getlist("choice"), *given.getlist("response")] if given is not None else []),
            }
        )
    return out
