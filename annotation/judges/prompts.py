"""What an LLM judge is asked and how its reply is read: the prompt per elicitation mode, the strict verdict
grammar, and P(first) from the option tokens' log-probabilities (comparative-assessment seed, Eq. 3). Pure
functions, no Django: the runner (``annotation/judges/runner.py``) sends and stores, this module decides.

A reply is read **strictly**: its last non-empty lines must be the mode's verdict lines (below), in any case,
with Markdown emphasis (``*``, ``_``) and a final full stop ignored. Anything else -- no verdict line, two
verdicts, an option the study does not offer -- is *unparseable*: counted and shown, never guessed.

- forced choice: ``Verdict: A`` | ``Verdict: B`` | ``Verdict: Tie`` | ``Verdict: Both bad``
- response set: ``Acceptable: A`` | ``Acceptable: B`` | ``Acceptable: A, B`` | ``Acceptable: none``
- paired: ``Verdict: …`` then ``Also acceptable: A`` | ``B`` | ``A, B`` | ``none``
- 5-point scale: ``Verdict: A much better`` | ``A better`` | ``Same`` | ``B better`` | ``B much better`` |
  ``Both bad``

"A" is the output shown first in the prompt, "B" the second: a verdict is in display coordinates, like a
person's answer (``elicitation.Answer``), and the study's mode stores it in model coordinates.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence

from annotation import elicitation
from annotation.elicitation import BOTH_BAD, FIRST, NEITHER, SECOND, TIE, Answer

PLACEHOLDERS = ("{input}", "{first}", "{second}", "{answer_format}")

DEFAULT_TEMPLATE = """{question}

[Input]
{input}

[Output A]
{first}

[Output B]
{second}

Judge the two outputs for the input above on their own merits; the order in which they are shown must not \
matter, nor their length. Explain your judgment in at most three sentences, then end your reply with \
{answer_format}"""


class Unparseable(ValueError):
    """A reply that does not follow the verdict grammar, or names an option the study does not offer."""


@dataclasses.dataclass(frozen=True)
class Offer:
    """What the study lets a rater answer (the fields of ``Study`` the grammar needs)."""

    mode: str  # elicitation mode name
    allow_tie: bool = True
    neither_option: bool = False
    question: str = "Which output is better?"
    tie_label: str = "No preference"
    neither_label: str = "Both are bad"

    @classmethod
    def of(cls, study) -> Offer:
        question = elicitation.MODES[study.elicitation].question(study)
        return cls(
            study.elicitation, study.allow_tie, study.neither_option, question, study.tie_label, study.neither_label
        )


@dataclasses.dataclass(frozen=True)
class VerdictLine:
    """One kind of verdict line (``elicitation.Mode.verdict`` lists a mode's): its label, the values it offers, how
    the closing instruction introduces it (alone, and as one of several lines), and how its value reads as part of
    an ``Answer``."""

    label: str
    values: Callable[[Offer], list[str]]
    alone: str
    among: str
    read: Callable[[str], dict]


def _choice_values(offer: Offer) -> list[str]:
    return ["A", "B"] + (["Tie"] if offer.allow_tie else []) + (["Both bad"] if offer.neither_option else [])


LINES = {
    "choice": VerdictLine(
        "Verdict",
        _choice_values,
        "one line, exactly one of: ",
        "first your choice, exactly one of: ",
        lambda v: {"choice": _choice(v)},
    ),
    "acceptable": VerdictLine(
        "Acceptable",
        lambda o: ["A", "B", "A, B"] + (["none"] if o.neither_option else []),
        "one line listing every output that is an acceptable answer, exactly one of: ",
        "every acceptable output, exactly one of: ",
        lambda v: {"response": _set(v)},
    ),
    "also": VerdictLine(
        "Also acceptable",
        lambda o: ["A", "B", "A, B", "none"],
        "one line, exactly one of: ",
        "then every output that is also acceptable, exactly one of: ",
        lambda v: {"response": frozenset(_set(v) - {NEITHER})},
    ),
    "scale": VerdictLine(
        "Verdict",
        lambda o: (
            ["A much better", "A better", "Same", "B better", "B much better"]
            + (["Both bad"] if o.neither_option else [])
        ),
        "one line, exactly one of: ",
        "first your verdict, exactly one of: ",
        lambda v: _scale(v),
    ),
}


NUMBERS = {2: "two", 3: "three"}


def _lines_of(offer: Offer) -> list[VerdictLine]:
    return [LINES[kind] for kind in elicitation.MODES[offer.mode].verdict]


def answer_format(offer: Offer) -> str:
    """The closing instruction that tells the judge the exact verdict line(s) this study accepts."""
    lines = _lines_of(offer)
    options = [" | ".join(f"{line.label}: {value}" for value in line.values(offer)) for line in lines]
    if len(lines) == 1:
        return lines[0].alone + options[0]
    return f"{NUMBERS[len(lines)]} lines: " + "; ".join(line.among + o for line, o in zip(lines, options, strict=True))


def check_template(template: str) -> None:
    """Raise ValueError naming the placeholders a prompt template lacks."""
    missing = [p for p in PLACEHOLDERS if p not in template]
    if missing:
        raise ValueError("The prompt template must contain " + ", ".join(missing) + ".")


def render_prompt(template: str, offer: Offer, input_text: str, first: str, second: str) -> str:
    """The template with its placeholders filled. Plain replacement (never str.format): braces in a template
    or in the outputs are kept as they are, and one output's text is never read as a placeholder."""
    check_template(template)
    values = {
        "{question}": offer.question,
        "{input}": input_text,
        "{first}": first,
        "{second}": second,
        "{answer_format}": answer_format(offer),
    }
    pattern = re.compile("|".join(re.escape(k) for k in values))
    return pattern.sub(lambda m: values[m.group(0)], template)


@dataclasses.dataclass(frozen=True)
class Verdict:
    answer: Answer  # display coordinates
    label_offset: int | None  # where the deciding label ("A" / "B" / "Tie" …) starts in the reply


_CLEAN = re.compile(r"[*_`]")


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset of the line in ``text``, the line) for each non-empty line. Lines end at a new line (\n, with or
    without \r) only: U+2028, U+0085 and the other characters Python's splitlines() also breaks at start no line
    here, so a verdict hidden after one of them is not the reply's last line."""
    out, offset = [], 0
    for line in text.split("\n"):
        if line.strip():
            out.append((offset, line.removesuffix("\r")))
        offset += len(line) + 1
    return out


def _match(prefix: str, line: str) -> tuple[str, int] | None:
    """(value, offset of the value within the raw line) of a line ``<prefix>: <value>``, emphasis ignored."""
    cleaned = _CLEAN.sub(" ", line)  # same length: offsets stay valid
    m = re.fullmatch(rf"\s*{prefix}\s*:\s*(.+?)\s*\.?\s*", cleaned, flags=re.IGNORECASE)
    if m is None:
        return None
    return m.group(1).strip(), m.start(1)


def _choice(value: str) -> str:
    v = " ".join(value.lower().split())
    table = {"a": FIRST, "b": SECOND, "tie": TIE, "both bad": BOTH_BAD}
    if v not in table:
        raise Unparseable(f"The verdict {value!r} is none of A, B, Tie, Both bad.")
    return table[v]


def _set(value: str) -> frozenset[str]:
    v = value.replace(" ", "").lower()
    table = {"a": {FIRST}, "b": {SECOND}, "a,b": {FIRST, SECOND}, "b,a": {FIRST, SECOND}, "none": {NEITHER}}
    if v not in table:
        raise Unparseable(f"The acceptable outputs {value!r} are none of A | B | A, B | none.")
    return frozenset(table[v])


_SCALE = {
    "a much better": (FIRST, 2),
    "a better": (FIRST, 1),
    "same": (TIE, None),
    "b better": (SECOND, 1),
    "b much better": (SECOND, 2),
    "both bad": (BOTH_BAD, None),
}


def _scale(value: str) -> dict:
    key = " ".join(value.lower().split())
    if key not in _SCALE:
        raise Unparseable(f"The verdict {value!r} is not a point of the 5-point scale.")
    side, strength = _SCALE[key]
    return {"choice": side, "strength": strength}


def parse(offer: Offer, text: str) -> Verdict:
    """The verdict of a reply, strictly (module docstring), checked against what the study offers."""
    lines = _lines(text or "")
    if not lines:
        raise Unparseable("The reply is empty.")
    grammar = _lines_of(offer)
    first = grammar[0].label
    if sum(_match(first, line) is not None for _, line in lines) > 1:
        raise Unparseable(f"The reply has more than one '{first}:' line.")
    ending = " and ".join(f"{'an' if g.label[0] in 'AEIOU' else 'a'} '{g.label}:'" for g in grammar) + " line"
    missing = (
        f"The reply does not end with {ending}."
        if len(grammar) > 1
        else f"The reply's last line is not a '{first}:' line."
    )
    if len(lines) < len(grammar):
        raise Unparseable(missing)
    parts: dict = {}
    offset = None
    for line_kind, (at, line) in zip(grammar, lines[-len(grammar) :], strict=True):
        found = _match(line_kind.label, line)
        if found is None:
            raise Unparseable(missing)
        parts.update(line_kind.read(found[0]))
        offset = at + found[1] if offset is None else offset  # the deciding label is on the first line
    answer = Answer(**parts)
    check_offered(offer, answer)
    return Verdict(answer, offset)


def check_offered(offer: Offer, answer: Answer) -> None:
    """The study's own validation (``elicitation``), so a judge can answer only what a person could."""
    try:
        elicitation.MODES[offer.mode].validate(offer, answer)
    except elicitation.AnswerError as exc:
        raise Unparseable(f"Not an answer this study accepts: {exc}") from exc


# A token of the reply with its alternatives: (token text, [(alternative text, log-probability), ...]).
Token = tuple[str, Sequence[tuple[str, float]]]


def probability_first(tokens: Sequence[Token], label_offset: int | None) -> float | None:
    """P(first is better) = P(A) / (P(A) + P(B)) from the alternatives of the token that carries the verdict's
    label (Eq. 3 of the comparative-assessment seed); None when the reply has no log-probabilities there, or
    neither label is among the alternatives."""
    if label_offset is None or not tokens:
        return None
    position = 0
    for text, alternatives in tokens:
        end = position + len(text)
        if end > label_offset:
            mass = {"A": 0.0, "B": 0.0}
            for alt, logprob in alternatives:
                key = _CLEAN.sub("", alt).strip().upper()
                if key in mass and math.isfinite(logprob):
                    mass[key] += math.exp(logprob)
            total = mass["A"] + mass["B"]
            return mass["A"] / total if total > 0 else None
        position = end
    return None
