"""An answer's style counted as Chatbot Arena counts it (analytics/core/style.py), rule by rule from Arena's
add_markdown_info, and its tokens with cl100k_base (tiktoken's own documented example)."""

from __future__ import annotations

import numpy as np

from analytics.core import style


def test_markdown_is_counted_as_arena_counts_it():
    answer = "\n".join(
        [
            "# Title",
            "## Part",
            "####### seven is no header",
            "#no space",
            "  ### indented is no header",
            "1. first",
            "  2. second",
            "- dash",
            "* star",
            "+ plus",
            "-no space",
            "Some **bold** and __also bold__ and **not\nbold**.",
            "```python",
            "# a comment, not a header",
            "- not a list",
            "**not bold**",
            "```",
        ]
    )
    # headers: '^#{n}\\s' for n = 1..6, a space right after the hashes at a line's start: "# Title" and "## Part"
    # (seven hashes, no space, or an indent match none); list items: 2 ordered + 3 unordered; bold within a line: 2
    assert style.markdown_counts(answer) == (2, 5, 2)
    # Arena removes what lies between the fences, keeping the fences themselves
    assert style.without_code("a ```x\n# h\n``` b") == "a `````` b"


def test_tokens_are_cl100k_base_and_the_counts_come_in_arenas_order():
    assert style.token_counts(["hello world"]).tolist() == [2]  # tiktoken's README: [15339, 1917]
    assert style.token_counts(["<|endoftext|>"]).tolist() == [7]  # a special token's text counts as plain text
    counts = style.style_counts(["hello world", "# Hi\n- **a**"])
    assert style.FEATURES == ("sum_assistant_tokens", "header_count", "list_count", "bold_count")
    np.testing.assert_array_equal(counts[:, 1:], [[0, 0, 0], [1, 1, 1]])
    assert counts.dtype == np.int64 and counts[0, 0] == 2
