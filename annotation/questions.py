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

On the page (``page``, one context for the rating page, the practice round and the previews) each further preference
question's options carry letters of their own (``LETTERS``) beside the main question's digits and arrows, every
answer given or stored is shown selected again (a refused form, "change my answer": ``stored_form``), and a missing
answer is named by its question (``check_main`` for the main one, ``to_model`` for the others).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.datastructures import MultiValueDict
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


# The keys of the further preference questions' options: letters, given out in order over the questions' options
# (the first question's options a, b, c ..., the next question's the letters after them), so no key is shared with
# the main question (digits, arrows, Shift+digits) or with another question. An option past z has no key: it is
# answered with Tab and the arrows (a radio group's own keys) or Space, like every option.
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def fieldsets(study, question: Question, keys: Iterator[str] | None = None) -> tuple[elicitation.Fieldset, ...]:
    """A further preference question's form: its mode's fieldsets with the question's prefix on every field name
    and its own keys (the next letters of ``keys``, see ``LETTERS``) instead of the main question's."""
    out = []
    for fieldset in question.mode.fieldsets(_Asked(study, question)):
        options = []
        for o in fieldset.options:
            key = next(keys, "") if keys is not None else ""
            options.append(
                dataclasses.replace(o, name=question.prefix + o.name, key=key, key_label=key, alt_key="", alt_label="")
            )
        out.append(elicitation.Fieldset(fieldset.legend, tuple(options)))
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


def form(study, given=None) -> list[dict]:
    """What the rating page shows of the further questions, in order: a preference question's fieldsets (rendered by
    its mode's template, with its keys) or a rationale's text box. ``given``: the answers shown selected, by field
    name -- a refused form (nothing given is lost) or ``stored_form`` of the answer the rater is changing."""
    out = []
    keys = iter(LETTERS)
    for q in further(study):
        out.append(
            {
                "question": q,
                "fieldsets": (elicitation.selected(fieldsets(study, q, keys), given) if q.is_preference else ()),
                "template": q.mode.template if q.is_preference else "",
                "field": q.prefix + "text",
                "max_chars": RATIONALE_MAX_CHARS,
                "text": (given.get(q.prefix + "text") or "") if given is not None else "",
            }
        )
    return out


def key_help(study) -> list[tuple[tuple[str, ...], str]]:
    """(keys, what they do) for the instructions: the main question's (``Mode.key_help``), then each further
    preference question's letters with its question, before Enter."""
    main = elicitation.mode_of(study).key_help(study)
    # each option's letter with the option and its question ("a Output 1 in “Which output is clearer?”"): the same
    # option labels recur in every question, so a letter without its question would not say what it answers
    further_keys = [
        ((o.key_label,), _("%(option)s in “%(question)s”") % {"option": o.label, "question": f["question"].text})
        for f in form(study)
        for fs in f["fieldsets"]
        for o in fs.options
        if o.key_label
    ]
    return [*main[:-1], *further_keys, main[-1]]


def page(study, given=None) -> dict[str, Any]:
    """The answer part of a rating page's context, every question as ``given`` (see ``form``) or empty: the main
    question's fieldsets, the further questions and the comment. One place for the rating page, the practice round
    and the previews, so what was selected, typed or stored is shown again the same way on each."""
    mode = elicitation.mode_of(study)
    return {
        "fieldsets": elicitation.selected(mode.fieldsets(study), given),
        "further": form(study, given),
        "comment_value": (given.get("comment") or "") if given is not None else "",
    }


def stored_form(study, judgment: Mapping[str, Any], a_shown_first: bool) -> MultiValueDict:
    """A stored judgment (its ``choice``, ``response_set``, ``strength``, ``answers`` and ``comment``) as the form
    that gives it, in the display order of its pair: what "change my answer" starts from."""
    data: MultiValueDict[str, str] = MultiValueDict()

    def add(mode: elicitation.Mode, fields: Mapping[str, Any], prefix: str) -> None:
        stored = elicitation.Stored(fields.get("choice"), fields.get("response_set"), fields.get("strength"))
        for name, values in mode.form_data(mode.from_model(stored, a_shown_first)).items():
            data.setlist(prefix + name, values)

    add(elicitation.mode_of(study), judgment, "")
    for q in further(study):
        fields = stored_fields(judgment.get("answers"), q.key)
        if not fields:
            continue
        if q.is_preference:
            add(q.mode, fields, q.prefix)
        else:
            data[q.prefix + "text"] = fields.get("text") or ""
    data["comment"] = judgment.get("comment") or ""
    return data


def check_main(study, answer: elicitation.Answer) -> elicitation.Mode:
    """The study's elicitation mode once it has accepted the main answer. Raises ``elicitation.AnswerError``; on a
    page of several questions the message names the main one, as a further question's names its own."""
    mode = elicitation.mode_of(study)
    try:
        mode.validate(study, answer)
    except elicitation.AnswerError as exc:
        if further(study):
            raise elicitation.AnswerError(f"{mode.question(study)} {exc}") from None
        raise
    return mode
