"""How long a pair takes a person: the one rule for which times are plausible, used by the study page's flag on a
rater ("implausibly fast", ``studies.monitoring``) and by the time estimate raters and crowd workers are shown
(``allocation.seconds_per_pair``).

- A rater whose median time on pairs with a long output (over ``LONG_OUTPUT_WORDS`` words) is under
  ``FAST_SECONDS`` reads implausibly fast: flagged on the study page, and none of their times set the estimate.
- A single time under the reading floor -- both outputs skimmed at ``READING_WORDS_PER_SECOND`` (1,200 words a
  minute), at least ``FLOOR_SECONDS`` -- is no one's reading time (a double click, a script) and is left out too.
- Screened-out raters' times are left out.
Why: without these rules two raters at 0.3 s per pair made the welcome page say "10 pairs, about 1 minute (at this
study's median of 0 s per pair)" for multi-paragraph answers.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable

FAST_SECONDS = 1.5
LONG_OUTPUT_WORDS = 200
READING_WORDS_PER_SECOND = 20.0
FLOOR_SECONDS = 1.0


def implausibly_fast(long_output_seconds: list[float]) -> bool:
    """Whether a rater's times on pairs with a long output say they do not read them."""
    return bool(long_output_seconds) and statistics.median(long_output_seconds) < FAST_SECONDS


def reading_floor(words_a: int, words_b: int) -> float:
    """The fewest seconds in which a person can have read a pair's two outputs."""
    return max(FLOOR_SECONDS, (words_a + words_b) / READING_WORDS_PER_SECOND)


def plausible_times(rows: Iterable[tuple[int, int, int, int, bool]]) -> list[float]:
    """The plausible seconds among (rater, milliseconds, words of output a, words of output b, screened out) rows."""
    rows = [r for r in rows if not r[4]]
    long_times: dict[int, list[float]] = defaultdict(list)
    for rater, ms, words_a, words_b, _ in rows:
        if max(words_a, words_b) > LONG_OUTPUT_WORDS:
            long_times[rater].append(ms / 1000)
    flagged = {rater for rater, times in long_times.items() if implausibly_fast(times)}
    return [
        ms / 1000
        for rater, ms, words_a, words_b, _ in rows
        if rater not in flagged and ms / 1000 >= reading_floor(words_a, words_b)
    ]
