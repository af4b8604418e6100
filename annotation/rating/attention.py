"""Attention checks (gold pairs): written by the researcher or made from the study's own outputs."""

from __future__ import annotations

import random

from annotation.models import Generation, GoldPair, Study


def do_generate_gold(study: Study, count: int, seed: int | None = None) -> list[GoldPair]:
    """Attention checks made from the study's own outputs: a real output against the same words
    shuffled into nonsense, which any attentive rater rejects."""
    rng = random.Random(study.seed if seed is None else seed)
    generations = list(Generation.objects.filter(item__study=study, sample_index=0).select_related("item"))
    rng.shuffle(generations)
    made: list[GoldPair] = []
    for g in generations:
        if len(made) == count:
            break
        words = g.text.split()
        if len(words) < 4 or len(set(words)) < 2:  # one word repeated cannot be scrambled into nonsense
            continue
        shuffled = words[:]
        rng.shuffle(shuffled)
        if shuffled == words:  # a rotation by one differs from the original whenever two words differ
            shuffled = words[1:] + words[:1]
        made.append(
            GoldPair.objects.create(study=study, input=g.item.input, good_output=g.text, bad_output=" ".join(shuffled))
        )
    return made


def do_add_gold_pair(study: Study, input: str, good_output: str, bad_output: str) -> GoldPair:
    return GoldPair.objects.create(study=study, input=input, good_output=good_output, bad_output=bad_output)
