"""Repeated arena prompts: where the near-repeat threshold (``selection.arena.REPEAT_COSINE``) sits between distinct
real prompts and the small edits a rater makes to send a prompt again (bench/README.md, "Repeated arena prompts").

    DEBUG=1 python bench/arena_repeats.py

Prompts: AlpacaEval's 805 instructions and Vicuna-80's questions (../shared/data), embedded with the study encoder
(all-MiniLM-L6-v2, as ``selection.embedding`` loads it). Distinct prompts: every pair's cosine, the highest ones
shown with their texts (a benchmark's own near-duplicates among them), and how many pairs reach each threshold.
Templated prompts (written here): distinct questions from one template. Edits: six deterministic changes of every
prompt (case and end punctuation, a polite prefix, a thank-you suffix, a typo, a word dropped, a question frame); the
share of each kind at or above each threshold.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
DATA = ROOT.parent / "shared" / "data"
THRESHOLDS = (0.8, 0.85, 0.9, 0.95)
# distinct prompts from one template (written here, not real data): where a threshold would start to take a different
# question for a repeat -- what an arena's raters, sharing tasks, send more often than a benchmark's curated prompts
TEMPLATED = (
    ("What is 2 + 2?", "What is 3 + 5?"),
    ("Translate 'good morning' into French.", "Translate 'good morning' into German."),
    ("Write a poem about the sea.", "Write a poem about the moon."),
    ("Write a haiku about autumn.", "Write a haiku about spring."),
    ("What is the capital of France?", "What is the capital of Germany?"),
    ("hi", "hello"),
    ("Summarize the plot of Hamlet.", "Summarize the plot of Macbeth."),
    ("Who won the 2018 World Cup?", "Who won the 2014 World Cup?"),
    ("Write a Python function that reverses a string.", "Write a Python function that reverses a list."),
    ("How do I bake bread?", "How do I bake sourdough bread?"),
)


def prompts() -> list[str]:
    with gzip.open(DATA / "alpaca_eval" / "ae1" / "instructions.jsonl.gz", "rt", encoding="utf-8") as f:
        alpaca = [json.loads(line)["instruction"] for line in f]
    vicuna = [
        json.loads(line)["text"]
        for line in (DATA / "prd_vicuna80_human" / "vicuna_questions.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return list(dict.fromkeys(alpaca + vicuna))  # exact repeats are the exact rule's, not the threshold's


def edits(prompt: str) -> dict[str, str]:
    words = prompt.split()
    longest = max(range(len(words)), key=lambda i: len(words[i]))
    w = words[longest]
    typo = w[:1] + w[2:3] + w[1:2] + w[3:] if len(w) > 3 else w + w[-1:]
    dropped = words[: len(words) // 2] + words[len(words) // 2 + 1 :] if len(words) > 2 else words
    return {
        "case and end punctuation": prompt.lower().rstrip(".?!"),
        "polite prefix": "Please, " + prompt[:1].lower() + prompt[1:],
        "thank-you suffix": prompt + " Thanks!",
        "one typo": " ".join(words[:longest] + [typo] + words[longest + 1 :]),
        "a word dropped": " ".join(dropped),
        "question frame": "Can you help me with this: " + prompt,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=8, help="distinct pairs shown, highest cosine first")
    args = parser.parse_args()
    import django

    django.setup()
    from selection import embedding

    texts = prompts()
    model = embedding.load_encoder(embedding.PACKAGED_ENCODER)

    def unit(batch: list[str]) -> np.ndarray:
        v = model.encode(batch, batch_size=64, convert_to_numpy=True, show_progress_bar=False).astype(np.float64)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    base = unit(texts)
    cos = base @ base.T
    upper = cos[np.triu_indices(len(texts), k=1)]
    print(f"{len(texts)} distinct prompts, {upper.size:,} pairs; highest cosines:")
    order = np.argsort(-np.where(np.triu(np.ones_like(cos, dtype=bool), k=1), cos, -np.inf), axis=None)
    for flat in order[: args.top]:
        i, j = divmod(int(flat), len(texts))
        print(f"  {cos[i, j]:.3f}  {texts[i][:70]!r}  ~  {texts[j][:70]!r}")
    print("\n| threshold | distinct pairs at or above | prompts with such a pair |")
    print("|---|---|---|")
    np.fill_diagonal(cos, -1.0)
    best = cos.max(axis=1)
    for t in THRESHOLDS:
        print(f"| {t} | {int((upper >= t).sum())} of {upper.size:,} | {int((best >= t).sum())} of {len(texts)} |")
    print("\nDistinct prompts from one template:")
    for a, b in TEMPLATED:
        va, vb = unit([a, b])
        print(f"  {float(va @ vb):.3f}  {a!r} ~ {b!r}")
    kinds = list(edits(texts[0]))
    edited = {kind: unit([edits(t)[kind] for t in texts]) for kind in kinds}
    print("\n| edit | " + " | ".join(f">= {t}" for t in THRESHOLDS) + " | median cosine |")
    print("|---|" + "---|" * (len(THRESHOLDS) + 1))
    for kind in kinds:
        c = (edited[kind] * base).sum(axis=1)
        shares = " | ".join(f"{(c >= t).mean():.1%}" for t in THRESHOLDS)
        print(f"| {kind} | {shares} | {np.median(c):.3f} |")


if __name__ == "__main__":
    main()
