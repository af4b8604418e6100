"""Study-wide error across system pairs (docs/decisions.md#study-wide-error): the one home of "which alpha does a
pair's decision use". A study of K systems decides K (K - 1) / 2 pairs, each with its own anytime-valid confidence
sequence at level alpha_pair; by the union bound the chance that any pair's sequence ever misses its mean (and so
that any decision is false) is at most the sum of the pairs' alphas. Bonferroni's split alpha_pair = alpha / pairs
therefore holds alpha study-wide however often anyone looks, whatever the dependence between pairs.

``control``: "per_pair" (alpha for every pair: each pair alone holds alpha), "study_wide" (Bonferroni split), or
"auto" (study-wide when the study has more than two systems, per pair otherwise: with two systems they coincide).
"""

from __future__ import annotations

CONTROLS = ("auto", "per_pair", "study_wide")


def pair_count(systems: int) -> int:
    """Unordered pairs of ``systems`` systems."""
    return max(systems, 0) * (max(systems, 0) - 1) // 2


def in_force(control: str, systems: int) -> str:
    """The control a study of ``systems`` systems uses: "per_pair" or "study_wide" ("auto" resolved)."""
    if control not in CONTROLS:
        raise ValueError(f"control must be one of {', '.join(CONTROLS)}, got {control!r}")
    if control == "auto":
        return "study_wide" if systems > 2 else "per_pair"
    return control


def pair_alpha(alpha: float, systems: int, control: str = "auto") -> float:
    """The alpha each pair's confidence sequence uses so that the study holds ``alpha`` as ``control`` says."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if in_force(control, systems) == "study_wide" and pair_count(systems) > 1:
        return alpha / pair_count(systems)
    return alpha
