"""The demo's raters: a few simulated people who rate through the same services as the browser does, and
one simulated LLM judge imported as verdict files are, so a newcomer's first report, separability page and
stopping status have something to show.

The three demo systems are fictional; each has a latent quality on the logit scale. A person prefers the
better output with probability logistic(quality difference + an item effect) and calls a tie now and then;
the judge follows the same qualities more sharply, leans towards the output shown first (a positional bias,
as real judges do), reports P(first system better), and judges every pair humans saw in both orders.
Everything is seeded, so the demo is the same on every machine.
"""

from __future__ import annotations

import json
import math
import random
from typing import cast

from annotation.elicitation import Answer
from annotation.exchange import exports
from annotation.models import Pair, Study
from annotation.rating import allocation, imports, recording
from annotation.studies import enrolment

QUALITY = {"atlas-7b": 0.7, "cirrus-13b": 0.2, "breeze-3b": -0.6}
HUMANS = 5
ASSIGNMENTS_PER_HUMAN = 3
TIE_RATE = 0.12
JUDGE = "demo-judge (simulated)"
JUDGE_FIRST_BIAS = 0.35  # logit added to the first-shown output


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def simulate_humans(study: Study, seed: int = 7) -> int:
    """Demo people who each complete a few assignments; returns how many judgments they made."""
    rng = random.Random(seed)
    item_effect: dict[int, float] = {}
    made = 0
    for n in range(1, HUMANS + 1):
        rater = enrolment.do_create_rater_link(study, f"demo-person-{n}")
        for _ in range(ASSIGNMENTS_PER_HUMAN):
            assignment = allocation.do_start_assignment(rater)
            if assignment is None:
                break
            for index, shown in enumerate(
                assignment.pairs.select_related("pair__generation_a__system", "pair__generation_b__system")
            ):
                pair = cast(Pair, shown.pair)  # the demo study has no attention checks: a study pair each
                a, b = pair.generation_a.system.name, pair.generation_b.system.name
                effect = item_effect.setdefault(pair.item_id, rng.gauss(0.0, 0.8))
                if rng.random() < TIE_RATE:
                    choice = "tie"
                else:
                    a_wins = rng.random() < _logistic(QUALITY[a] - QUALITY[b] + effect)
                    choice = "first" if a_wins == shown.a_shown_first else "second"
                allocation.do_mark_shown(shown)  # as the rating page does before an answer
                recording.do_record_judgment(
                    shown,
                    idempotency_key=f"demo-{rater.pk}-{assignment.pk}-{index}",
                    answer=Answer(choice=choice),
                    client_time_ms=rng.randint(6000, 40000),
                )
                made += 1
    return made


def judge_lines(study: Study, seed: int = 11) -> bytes:
    """The simulated judge's verdicts, in the judgment file format, on every pair humans judged, both orders."""
    rng = random.Random(seed)
    lines, seen = [], set()
    for line in exports.judgment_lines(study):
        key = (line["item"], line["system_a"], line["sample_a"], line["system_b"], line["sample_b"])
        if line["rater_kind"] != "human" or key in seen:
            continue
        seen.add(key)
        a, b = line["system_a"], line["system_b"]
        for first in (a, b):
            logit = 1.6 * (QUALITY[a] - QUALITY[b]) + rng.gauss(0.0, 0.7)
            logit += JUDGE_FIRST_BIAS if first == a else -JUDGE_FIRST_BIAS
            p_a = _logistic(logit)
            choice = a if p_a > 0.5 else b
            lines.append(
                {
                    "id": f"judge-{'-'.join(map(str, key))}-{first}",
                    "item": line["item"],
                    "system_a": a,
                    "sample_a": line["sample_a"],
                    "system_b": b,
                    "sample_b": line["sample_b"],
                    "shown_first": first,
                    "rater": JUDGE,
                    "rater_kind": "judge",
                    "choice": choice,
                    "probability_a": round(p_a, 4),
                }
            )
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


def populate(study: Study) -> dict[str, int]:
    """Humans, then the judge on the same pairs; the number of each."""
    humans = simulate_humans(study)
    summary = imports.do_import_judgments(study, judge_lines(study), "demo-judge.jsonl")
    return {"human": humans, "judge": summary.created}
