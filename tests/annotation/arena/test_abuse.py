"""What an arena checks at vote time and how it files a prompt (``annotation/arena/abuse.py``): a reply naming its own
model, and the automatic tags. The hourly limits at work are tests/annotation/arena/test_battles.py's (they need
votes)."""

from __future__ import annotations

import pytest
import tiktoken

from annotation.arena import abuse


@pytest.mark.parametrize(
    ("text", "names", "found"),
    [
        ("I am Claude, made by Anthropic.", ["claude-3-haiku", "claude"], "claude"),
        ("As GPT-4o I think so.", ["gpt-4o"], "gpt-4o"),
        ("as gpt-4o-mini I think so", ["gpt-4o"], None),  # a longer name is another model's
        ("I run on llama3.2:1b today", ["small", "llama3.2:1b"], "llama3.2:1b"),
        ("Meta-Llama-3-8B here", ["meta-llama/Meta-Llama-3-8B"], "Meta-Llama-3-8B"),  # org/model as model
        ("The colour red is warm.", ["red"], None),  # a plain lower-case label is the researcher's word
        ("Here is a small example.", ["small", "llama3.2:1b"], None),  # create_arena's own help example's label
        ("I am Claude.", ["Claude", "claude-3-haiku"], "Claude"),  # a label that is a name is looked for
        ("The colour Red-2 is warm.", ["red-2"], "red-2"),
        ("A bored cat", ["red-2"], None),  # inside a word
        ("gen-red-2 on 'x': the answer", ["red-2"], None),  # part of a hyphenated name
        ("A is for apple", ["A", "B"], None),  # too short to look for
        ("", ["claude"], None),
        ("By default, the model answers.", ["local", "default"], None),  # a server's placeholder model name
        ("The model says hi", ["mine", "org/model"], None),
        ("I am Mistral.", ["small", "mistral"], "mistral"),  # a plain word that names a model is looked for
    ],
)
def test_a_reply_names_its_own_model_as_a_word_of_its_own_whatever_its_case(text, names, found):
    assert abuse.names_own_model(text, names) == found


@pytest.mark.parametrize(
    ("prompt", "language"),
    [
        ("Write a short poem about the sea and the wind.", "en"),
        ("Écris-moi un poème sur la mer, s'il te plaît.", "fr"),
        ("Wie geht es dir heute, mein Freund?", "de"),
        ("Расскажи мне, пожалуйста, историю о море и ветре.", "ru"),
        ("写一首关于大海的诗", "zh"),
        ("hi", "und"),  # a prompt of a word or two: no language said with confidence
    ],
)
def test_a_prompts_language(prompt, language):
    assert abuse.language(prompt) == language


@pytest.mark.parametrize(
    ("prompt", "code"),
    [
        ("Explain this:\n```python\nprint('hi')\n```", True),
        ("def f(x): return x + 1", True),
        ("Why does this fail?\nint main() {\n  return 0;\n}", True),
        ("for i in range(3): print(i)\nwhile x != 0: x -= 1", True),
        ("Write a Python function that reverses a list.", False),
        ("What is the capital of France? And of Spain?", False),
        ("Tell me a story (a short one).\nThen a poem.", False),
    ],
)
def test_a_prompt_is_code_when_fenced_or_made_of_code_like_lines(prompt, code):
    assert abuse.is_code(prompt) is code


def test_a_prompt_is_long_over_500_tokens_of_cl100k_base():
    encoding = tiktoken.get_encoding(abuse.TOKEN_ENCODING)
    words = " ".join(["river"] * 600)
    tokens = encoding.encode_ordinary(words)
    at_limit = encoding.decode(tokens[: abuse.LONG_TOKENS])
    over = encoding.decode(tokens[: abuse.LONG_TOKENS + 1])
    assert len(encoding.encode_ordinary(at_limit)) == 500 and len(encoding.encode_ordinary(over)) == 501
    assert not abuse.is_long(at_limit) and abuse.is_long(over)


def test_tags_hold_the_three():
    assert abuse.tags("def f(x): return x") == {
        "language": abuse.language("def f(x): return x"),
        "code": True,
        "long": False,
    }
