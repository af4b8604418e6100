"""The README's local judge server reads both outputs whole (it once cut output B at its first
blank line, so on real answers it "preferred" the output shown first almost every time)."""

from __future__ import annotations

from annotation.judges import prompts
from tests.judge_server import OUTPUTS


def test_both_outputs_are_read_whole_from_the_default_prompt():
    first = "First paragraph of A.\n\nSecond paragraph of A, a little longer."
    second = "B begins.\n\n- a list item\n- another\n\nB ends here, after two blank lines."
    prompt = prompts.DEFAULT_TEMPLATE.format(
        question="Which is better?",
        input="Say hi.",
        first=first,
        second=second,
        answer_format="Verdict: A | Verdict: B",
    )
    found = OUTPUTS.search(prompt)
    assert (found["first"], found["second"]) == (first, second)
    # a custom template without the closing instruction: B runs to the end
    found = OUTPUTS.search(f"[Output A]\n{first}\n\n[Output B]\n{second}\n")
    assert (found["first"], found["second"]) == (first, second)
