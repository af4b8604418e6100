"""An arena's choice of the next system pair (docs/arena.md#which-two-systems): each pair's chance weight, read from
its stored decision (``PairDecision``, the one home of "is this pair decided"; ``selection/hooks.py`` brings it up to
date after every vote), so that pairs whose order is still open get more of the battles, as Chatbot Arena's active
sampling does. The weights' rule is pure (``selection/core/arena.py``), so the replay bench
(``bench/replay_arena.py``) draws with the very same one."""

from __future__ import annotations

from annotation.models import Study
from selection.core import arena as core
from selection.core import decisions
from selection.models import PairDecision


def pair_weights(study: Study) -> dict[int, float]:
    """Comparison id -> chance weight of each of the study's system pairs still open to battles (not closed)."""
    comparisons = list(study.comparisons.filter(closed=False).values_list("pk", flat=True))
    stored = dict(PairDecision.objects.filter(comparison_id__in=comparisons).values_list("comparison_id", "decision"))
    return {pk: core.weight(decided=stored.get(pk, decisions.UNDECIDED) != decisions.UNDECIDED) for pk in comparisons}
