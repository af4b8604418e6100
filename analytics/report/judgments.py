"""The report's first sections: which question it analyses, the populations it can be computed for, and the
judgments it counts."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from django.db.models import Count

from analytics.populations import ALL, HUMANS, Population
from analytics.report.data import Row
from annotation import questions
from annotation.models import Item, Judgment, Skip, Study


@dataclasses.dataclass(frozen=True)
class AskedQuestion:
    """A preference question the report can analyse: its key (None for the main question), text and mode."""

    key: str | None
    text: str
    how: str


def asked(study: Study, population: Population) -> tuple[AskedQuestion, list[AskedQuestion]]:
    """(the question ``population`` reads the answers to, every preference question of the study)."""
    every = [AskedQuestion(q.key or None, q.text, q.how) for q in questions.preference_questions(study)]
    return next((q for q in every if (q.key or "") == population.question), every[0]), every


@dataclasses.dataclass(frozen=True)
class PopulationChoice:
    """A population the report can be computed for, with its judgment count."""

    key: str
    label: str
    judgments: int


def population_choices(rows: list[Row]) -> list[PopulationChoice]:
    """The populations a study's report can be computed for, with their judgment counts (screened-out raters
    left out, as by default): humans, each judge, and everyone mixed."""
    kept = [r for r in rows if not r.screened_out]
    judges = sorted({r.rater for r in kept if r.kind == "judge"})
    out = [PopulationChoice(HUMANS, "Humans", sum(1 for r in kept if r.kind == "human"))]
    out += [PopulationChoice(f"judge:{j}", f"Judge {j}", sum(1 for r in kept if r.rater == j)) for j in judges]
    out.append(PopulationChoice(ALL, "Everyone (mixes humans and judges)", len(kept)))
    return out


@dataclasses.dataclass(frozen=True)
class JudgmentCounts:
    """The judgments the report reads: the population's (``total``) of the study's (``study_total``), by rater kind
    over the whole study; those of screened-out raters left out, superseded ones (kept), revisions (replaced), the
    raters, skipped pairs by reason (skips are no judgments), the answers on several outputs with the judgments they
    imply, and the items a researcher excluded in the data manager
    with their current judgments (kept and exported, never read: ``Judgment.objects.analysed``)."""

    total: int
    study_total: int
    by_kind: dict[str, int]
    screened_out_left_out: int
    superseded: int
    revised: int
    raters: int
    skipped: dict[str, int]
    excluded_items: int
    excluded: int
    rankings: int  # the population's answers on several outputs at once (a ranking, or best and worst)
    from_rankings: int  # the judgments of ``total`` they imply (annotation/implied_pairs.py)


def judgment_counts(study: Study, population: Population, every: list[Row], rows: list[Row]) -> JudgmentCounts:
    """The counts of ``rows`` (the population's) among ``every`` row of the study."""
    kinds: dict[str, int] = defaultdict(int)
    for r in every:
        kinds[r.kind] += 1
    skipped = Skip.objects.filter(rater__study=study).values_list("reason").annotate(n=Count("id")).order_by("reason")
    return JudgmentCounts(
        total=len(rows),
        study_total=len(every),
        by_kind=dict(kinds),
        screened_out_left_out=0 if population.include_screened else sum(1 for r in every if r.screened_out),
        superseded=sum(1 for r in rows if r.superseded),
        revised=Judgment.objects.filter(study=study, revised=True).count(),
        raters=len({r.rater for r in rows}),
        skipped=dict(skipped),
        excluded_items=Item.objects.filter(study=study, excluded=True).count(),
        excluded=Judgment.objects.filter(study=study, revised=False, pair__item__excluded=True).count(),
        rankings=len({r.ranking for r in rows if r.ranking is not None}),
        from_rankings=sum(1 for r in rows if r.ranking is not None),
    )
