"""Whatever keys a rater presses, what is stored is what they chose: on every pair of a study with two further
questions (a forced choice and a 5-point scale), a seeded random mix of digits, letters (the further questions' own
keys), Tab, Shift+Tab, arrows and Enter, in Chromium; before every Enter the test reads what the page shows selected,
and the researcher's export must hold exactly that for every question of every judgment -- also where the server
refused a submit first (a browser that does not check ``required``) and the re-shown form had to carry the answers."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Judgment, Pair
from annotation.studies import creation, enrolment, lifecycle
from tests.browser.conftest import wait_until_rating_page_ready
from tests.conftest import study_jsonl

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FURTHER = "clarity | forced_choice | Which output is clearer?\nscale | preference_scale | How much better is it?"
MAIN_KEYS = ["1", "2", "3"]
FURTHER_KEYS = list("abcdefgh")  # clarity: a b c; the scale: d e f g h (annotation/questions.py gives them out)
MOVES = ["Tab", "Tab", "Shift+Tab", "ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown"]
OUTPUT = re.compile(r"(sys-[ab]) output (\d) for item (\d)\.")

# What the page shows, read in one go: the selected option of each question, the comment, both outputs, the
# submission key (a new one on every form the server sends) and whether this is a change of an earlier answer.
READ = """() => {
  const f = document.getElementById("rating-form");
  if (!f) return null;
  const picked = (name) => { const e = f.querySelector(`input[name="${name}"]:checked`); return e ? e.value : null; };
  const error = f.querySelector(".error");
  return {
    choice: picked("choice"), clarity: picked("q-clarity-choice"), scale: picked("q-scale-choice"),
    comment: f.querySelector("textarea[name=comment]").value,
    first: document.querySelector("[data-testid=output-1]").innerText.trim(),
    second: document.querySelector("[data-testid=output-2]").innerText.trim(),
    key: f.querySelector("input[name=key]").value,
    error: error ? error.innerText : null,
  };
}"""


# Where the focus is: in a question's group (its field's name), in a text box, or elsewhere.
FOCUS = """() => {
  const e = document.activeElement;
  const group = e.closest("fieldset");
  const input = group && group.querySelector("input");
  return {question: input ? input.name : null, typing: e.tagName === "TEXTAREA",
          scrolls: e.tagName !== "INPUT" && e.hasAttribute("tabindex")};
}"""
# What each key selects where it acts (annotation/elicitation.py and annotation/questions.py write them on the page).
SELECTS = {
    "1": ("choice", "first"),
    "2": ("choice", "second"),
    "3": ("choice", "tie"),
    "ArrowLeft": ("choice", "first"),
    "ArrowRight": ("choice", "second"),
    "ArrowDown": ("choice", "tie"),
    "a": ("clarity", "first"),
    "b": ("clarity", "second"),
    "c": ("clarity", "tie"),
    "d": ("scale", "first:2"),
    "e": ("scale", "first:1"),
    "f": ("scale", "tie"),
    "g": ("scale", "second:1"),
    "h": ("scale", "second:2"),
}
FIELD = {"choice": "choice", "q-clarity-choice": "clarity", "q-scale-choice": "scale"}


def on_screen(page) -> dict[str, Any]:
    """What the rating page shows; empty when no rating form is on screen (an assignment's end)."""
    return page.evaluate(READ) or {}


def output_of(text: str) -> tuple[str, str, str]:
    """(system, sample, item) of an output, from its own text."""
    match = OUTPUT.fullmatch(text)
    assert match is not None, text
    system, sample, item = match.groups()
    return system, sample, item


def press(page, key: str) -> None:
    """Press a key and check it acted where the focus is: a letter on its own question, wherever the focus; a digit
    or an arrow on the main question unless the focus is in a further question (there an arrow moves within that
    question, as a radio group's own arrows do, and a digit does nothing) or on a region that scrolls (an arrow
    scrolls it); nothing but typing in a text box, and Tab only moves the focus."""
    before, focus = on_screen(page), page.evaluate(FOCUS)
    page.keyboard.press(key)
    after = on_screen(page)
    changed = {q for q in ("choice", "clarity", "scale") if after[q] != before[q]}
    here = FIELD.get(focus["question"] or "")
    why = (key, focus, before, after)
    if focus["typing"] or key in ("Tab", "Shift+Tab"):
        assert not changed, why
    elif (len(key) == 1 and key.isalpha()) or (
        here in (None, "choice") and key in SELECTS and not (focus["scrolls"] and key.startswith("Arrow"))
    ):
        question, value = SELECTS[key]
        assert after[question] == value and changed <= {question}, why
    elif key.startswith("Arrow") and here in ("clarity", "scale"):
        assert changed <= {here}, why  # the group's own arrows, never the main question
        assert FIELD.get(page.evaluate(FOCUS)["question"] or "") == here, why  # and the focus stays there
    elif key == "ArrowUp" and here == "choice":
        assert changed <= {"choice"}, why  # the main group's own arrow (no shortcut of its own)
    else:  # a digit in a further question; an arrow that selects nothing where the focus is
        assert not changed, why


def pair_of(shown: dict) -> tuple[str, ...]:
    """The study pair shown: its item and each system's sample, from the outputs' own text."""
    (s1, n1, item), (s2, n2, _) = output_of(shown["first"]), output_of(shown["second"])
    samples = dict([(s1, n1), (s2, n2)])
    return (f"item-{item}", samples["sys-a"], samples["sys-b"])


def expected_line(shown: dict) -> dict:
    """What the export must say for an answer given with ``shown`` on screen (systems named as it names them)."""
    first, second = output_of(shown["first"])[0], output_of(shown["second"])[0]
    side = {"first": first, "second": second, "tie": "tie"}
    scale, _, strength = shown["scale"].partition(":")
    return {
        "shown_first": first,
        "choice": side[shown["choice"]],
        "answers": {
            "clarity": {"choice": side[shown["clarity"]], "response_set": None, "strength": None},
            "scale": {"choice": side[scale], "response_set": None, "strength": int(strength) if strength else None},
        },
        "comment": shown["comment"].strip() or None,
    }


def exported_line(line: dict) -> dict:
    return {k: line.get(k) for k in ("shown_first", "choice", "answers", "comment")}


def press_enter(page, posts: list, key: str = "Enter") -> bool:
    """Press Enter; True when it sent an answer (then waits for the form the server sent back, or the end)."""
    before, sent = on_screen(page), len(posts)
    page.keyboard.press(key)
    page.wait_for_timeout(250)  # a submit leaves at once (htmx sends from the submit event); none: nothing left
    if len(posts) == sent:
        page.wait_for_load_state()  # Enter may have followed a link ("Change my answer", "Keep it and go on")
        return False
    for _ in range(200):
        now = on_screen(page)
        if not now or now["key"] != before["key"]:
            return True
        page.wait_for_timeout(50)
    raise AssertionError("the answer was sent and no page came back")


QUESTIONS = (("choice", "Which output is better?"), ("clarity", "Which output is clearer?"), ("scale", "How much"))


def refuse_once(page, posts: list, rng: random.Random) -> None:
    """A browser that does not check "required" (an old one, or a form sent from elsewhere): with the scale left
    out the server refuses the answer, names the first question missing, and the form it sends back shows every
    answer that was given (the main choice, the clarity question, the comment)."""
    page.evaluate("() => { document.getElementById('rating-form').noValidate = true; }")
    for key in rng.choices([*MAIN_KEYS, "a", "b", "c", "ArrowLeft", "ArrowRight"], k=rng.randint(2, 6)):
        press(page, key)
    page.locator("#id_comment").fill(f"Typed before a refusal {rng.random():.3f}.")
    before = on_screen(page)
    assert before["scale"] is None
    assert press_enter(page, posts, "Control+Enter")  # from the comment box, where Enter is a new line
    after = on_screen(page)
    missing = next(text for name, text in QUESTIONS if before[name] is None)
    assert after["error"].startswith(missing), after["error"]
    kept = ("choice", "clarity", "scale", "comment", "first", "second")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}


@pytest.mark.slow(seconds=30)
def test_every_key_mix_stores_what_the_screen_shows(browser_page, live_server, researcher, artifacts):
    study = creation.do_create_study(researcher, "keys", study_jsonl(n_items=2, k=5), "keys.jsonl")
    lifecycle.do_update_settings(
        study,
        {"further_questions": FURTHER, "raters_per_item": 1, "judgments_per_assignment": 5, "allow_comment": True},
        None,
    )
    n_pairs = Pair.objects.filter(item__study=study).count()
    assert n_pairs == 10
    rater = enrolment.do_create_rater_link(study, "keyboard")
    rng = random.Random(41)
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" and "/submit/" in r.url else None)
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    answered: dict[tuple, dict] = {}  # the study pair -> what the screen showed when its (last) answer was sent
    seen: list[tuple] = []
    sent = refusals = 0
    for _ in range(2000):
        if not on_screen(page):  # an assignment is complete
            if len(answered) == n_pairs:
                break
            page.get_by_test_id("rate-more").click()
        wait_until_rating_page_ready(page)
        shown = on_screen(page)
        pair = pair_of(shown)
        if pair not in seen:
            seen.append(pair)
            if len(seen) % 3 == 2:
                refuse_once(page, posts, rng)
                refusals += 1
        # a random mix; about one press in eighteen is Enter, which sends the form or is stopped by the browser
        key = rng.choice([*MAIN_KEYS, *FURTHER_KEYS, *MOVES, "Enter"])
        if key != "Enter":
            press(page, key)
            continue
        if press_enter(page, posts):
            assert all(shown[q] for q, _ in QUESTIONS), shown  # never sent with a question unanswered
            after = on_screen(page)
            assert not after.get("error"), after
            answered[pair] = shown
            sent += 1
        assert Judgment.objects.filter(rater=rater).count() == sent  # a stopped Enter stored nothing
    else:
        raise AssertionError(f"not every pair was answered: {len(answered)} of {n_pairs}")
    page.screenshot(path=str(artifacts / "keys-as-pressed.png"), full_page=True)
    assert refusals >= 3
    client = Client()
    client.force_login(researcher)
    export = client.get(reverse("judgments_export", args=[study.pk, "jsonl"]))
    lines = [json.loads(x) for x in b"".join(export.streaming_content).decode().splitlines()]
    assert len(lines) == sent and sum(1 for x in lines if x["revised"]) == sent - n_pairs
    current = {(x["item"], str(x["sample_a"]), str(x["sample_b"])): x for x in lines if not x["revised"]}
    assert set(current) == set(answered)
    for pair, shown in answered.items():
        assert exported_line(current[pair]) == expected_line(shown), pair


def test_one_tab_and_an_arrow_answer_the_further_question_not_the_main_one(browser_page, live_server, study):
    """As reported: 1, Tab, → and Enter on each pair of a study with one further forced choice. The arrow is the
    further question's radio group's own: the main answer stays "Output 1" and the further one is "Output 2"."""
    clarity = "clarity | forced_choice | Which output is clearer?"
    lifecycle.do_update_settings(study, {"further_questions": clarity}, None)
    rater = enrolment.do_create_rater_link(study, "reported")
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    page.goto(live_server.url + rater.link_path())
    page.get_by_role("button", name="Start rating").click()
    for number in range(1, 6):
        page.get_by_role("heading", name=f"Pair {number} of 5").wait_for()
        wait_until_rating_page_ready(page)
        for key in ("1", "Tab", "ArrowRight", "Enter"):
            page.keyboard.press(key)
    page.get_by_test_id("completion-code").wait_for()
    judgments = list(Judgment.objects.filter(rater=rater).order_by("id"))
    assert len(judgments) == 5
    for j in judgments:
        first, second = ("a", "b") if j.a_shown_first else ("b", "a")
        assert (j.choice, j.answers["clarity"]["choice"]) == (first, second)
