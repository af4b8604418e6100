"""Security pass, M3: generating attention checks never spins on an output that cannot be scrambled."""

from __future__ import annotations

import json
import signal

from annotation.rating import attention
from annotation.studies import creation


def test_an_output_of_one_repeated_word_is_skipped_not_shuffled_forever(researcher):
    lines = [
        {"id": f"r{i}", "input": "Say it.", "outputs": {"a": ["yes yes yes yes yes"], "b": ["no no no no"]}}
        for i in range(3)
    ]
    lines.append({"id": "ok", "input": "Tell me.", "outputs": {"a": ["the cat sat down"], "b": ["a b a b"]}})
    study = creation.do_create_study(
        researcher, "echo", "".join(json.dumps(x) + "\n" for x in lines).encode(), "e.jsonl"
    )

    def too_long(signum, frame):
        raise TimeoutError("generating attention checks did not finish in 10 s")

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(10)
    try:
        made = attention.do_generate_gold(study, 5)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert {g.good_output for g in made} == {"the cat sat down", "a b a b"}
    assert all(
        g.bad_output != g.good_output and sorted(g.bad_output.split()) == sorted(g.good_output.split()) for g in made
    )
