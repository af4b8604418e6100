"""The judge's prompt and the strict reading of its reply (annotation/judges/prompts.py)."""

from __future__ import annotations

import math

import pytest

from annotation.elicitation import BOTH_BAD, FIRST, NEITHER, SECOND, TIE, Answer
from annotation.judges import prompts

FORCED = prompts.Offer("forced_choice", allow_tie=True)


def test_prompt_fills_placeholders_literally():
    template = "Q: {question}\nIn: {input}\n1: {first}\n2: {second}\n{answer_format}"
    prompt = prompts.render_prompt(template, FORCED, "in {x}", "out {second}", "other {}")
    assert prompt.startswith("Q: Which output is better?\nIn: in {x}\n1: out {second}\n2: other {}\n")
    assert prompt.endswith("Verdict: A | Verdict: B | Verdict: Tie")


def test_template_without_placeholders_is_refused():
    with pytest.raises(ValueError, match=r"\{first\}, \{answer_format\}"):
        prompts.check_template("{input} {second}")


def test_answer_format_follows_the_study():
    assert "Tie" not in prompts.answer_format(prompts.Offer("forced_choice", allow_tie=False))
    assert "Both bad" in prompts.answer_format(prompts.Offer("forced_choice", neither_option=True))
    assert "Acceptable: none" in prompts.answer_format(prompts.Offer("response_set", neither_option=True))
    assert "Acceptable: none" not in prompts.answer_format(prompts.Offer("response_set"))


@pytest.mark.parametrize(
    ("text", "choice"),
    [
        ("Reasons.\nVerdict: A", FIRST),
        ("Reasons.\r\nVerdict: A\r\n", FIRST),
        ("Reasons.\n\n**Verdict:** b.\n", SECOND),
        ("verdict: TIE", TIE),
    ],
)
def test_forced_choice_verdicts(text, choice):
    assert prompts.parse(FORCED, text).answer == Answer(choice=choice)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I prefer A.",
        "Verdict: A\nSome afterthought",
        "Verdict: A or B",
        "Verdict: C",
        "Verdict: Both bad",
        "Verdict: A\nVerdict: B",  # two verdicts: which one is meant is a guess
        "Output A quotes the line\nVerdict: A\nbut I think\nVerdict: B",
        "Reasons.\u2028Verdict: A",
        "Reasons.\x85Verdict: B",  # line breaks only to splitlines(), not to a person
    ],
)
def test_forced_choice_unparseable(text):
    with pytest.raises(prompts.Unparseable):
        prompts.parse(FORCED, text)


def test_options_the_study_does_not_offer_are_unparseable():
    with pytest.raises(prompts.Unparseable, match="not offered"):
        prompts.parse(prompts.Offer("forced_choice", allow_tie=False), "Verdict: Tie")
    assert prompts.parse(prompts.Offer("forced_choice", neither_option=True), "Verdict: Both bad").answer == Answer(
        choice=BOTH_BAD
    )


def test_response_set_and_paired_and_scale():
    rs = prompts.Offer("response_set", neither_option=True)
    assert prompts.parse(rs, "Acceptable: B, A").answer == Answer(response=frozenset({FIRST, SECOND}))
    assert prompts.parse(rs, "Acceptable: none").answer == Answer(response=frozenset({NEITHER}))
    with pytest.raises(prompts.Unparseable):
        prompts.parse(prompts.Offer("response_set"), "Acceptable: none")  # the study offers no 'neither'
    paired = prompts.Offer("paired")
    assert prompts.parse(paired, "x\nVerdict: A\nAlso acceptable: B").answer == Answer(
        choice=FIRST, response=frozenset({SECOND})
    )
    with pytest.raises(prompts.Unparseable):
        prompts.parse(paired, "Verdict: A")
    scale = prompts.Offer("preference_scale")
    assert prompts.parse(scale, "Verdict: B much better").answer == Answer(choice=SECOND, strength=2)
    assert prompts.parse(scale, "Verdict: Same").answer == Answer(choice=TIE)


def test_probability_first_from_the_label_token():
    text = "Fine.\nVerdict: A"
    verdict = prompts.parse(FORCED, text)
    assert text[verdict.label_offset] == "A"
    tokens = [
        ("Fine", [("Fine", -0.1)]),
        (".", [(".", -0.1)]),
        ("\nVerdict", [("\nVerdict", 0.0)]),
        (":", [(":", 0.0)]),
        (" A", [(" A", math.log(0.6)), (" B", math.log(0.2)), (" Tie", math.log(0.2))]),
    ]
    assert prompts.probability_first(tokens, verdict.label_offset) == pytest.approx(0.6 / 0.8)  # Eq. 3
    assert prompts.probability_first(tokens[:4], verdict.label_offset) is None  # no token there
    no_labels = tokens[:4] + [(" A", [(" Tie", -0.1)])]
    assert prompts.probability_first(no_labels, verdict.label_offset) is None
