"""Small arenas built straight with the ORM for the board's tests: a study of kind arena whose items are battles'
prompts (each system's replies as its samples), votes imported as people's judgments in a set order, a ``Battle``
per prompt (category, tags, flag), and separabilities stored as the background job stores them."""

from __future__ import annotations

import datetime
import json

from annotation.models import Assignment, AssignmentPair, Battle, Comparison, Judgment, Rater, Study
from annotation.rating import imports
from annotation.studies import creation
from selection.models import ItemSeparability, SeparabilityRun

START = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)


def make_arena(researcher, systems: tuple[str, ...], prompts: int, name: str = "arena", samples: int = 2) -> Study:
    """An arena study with ``prompts`` prompts ("battle-<n>"), every system answering each (``samples`` samples)."""
    lines = [
        json.dumps(
            {
                "id": f"battle-{i}",
                "input": f"Prompt number {i}: tell me about topic {i}.",
                "outputs": {
                    s: [f"{s} says {'#' * (j % 2)} something {j} about topic {i}." for j in range(samples)]
                    for s in systems
                },
            }
        )
        for i in range(prompts)
    ]
    study = creation.do_create_study(researcher, name, ("\n".join(lines) + "\n").encode(), f"{name}.jsonl")
    Study.objects.filter(pk=study.pk).update(kind=Study.Kind.ARENA)
    study.refresh_from_db()
    return study


def add_votes(study: Study, votes: list[tuple], start: int = 0) -> None:
    """Votes (prompt number, rater, system shown as A, system as B, winner: a system's name or "tie") imported as
    judgments in this order (``created`` a minute apart from ``start``), each with its prompt's ``Battle``."""
    lines = []
    for n, (prompt, rater, a, b, winner) in enumerate(votes, start=start):
        lines.append(
            {
                "id": f"vote-{n}",
                "item": f"battle-{prompt}",
                "system_a": a,
                "sample_a": 0,
                "system_b": b,
                "sample_b": 0,
                "shown_first": a,
                "rater": rater,
                "rater_kind": "human",
                "choice": winner,
                "created": (START + datetime.timedelta(minutes=n)).isoformat(),
            }
        )
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "votes.jsonl")
    comparisons = {
        frozenset((c.system_a.name, c.system_b.name)): c
        for c in Comparison.objects.filter(study=study).select_related("system_a", "system_b")
    }
    for n, (prompt, rater, a, b, _) in enumerate(votes, start=start):
        item = study.items.get(external_id=f"battle-{prompt}")
        if Battle.objects.filter(item=item).exists():
            continue
        who = Rater.objects.get(study=study, external_id=rater)
        # as a battle holds its vote: an assignment of one pair, the vote its judgment (docs/arena.md)
        judgment = Judgment.objects.get(study=study, idempotency_key=f"vote-{n}")
        held = Assignment.objects.create(study=study, rater=who, status=Assignment.Status.COMPLETED, n_pairs=1)
        place = AssignmentPair.objects.create(assignment=held, pair=judgment.pair, position=0, a_shown_first=True)
        Judgment.objects.filter(pk=judgment.pk).update(assignment=held, assignment_pair=place)
        Battle.objects.create(
            study=study,
            rater=who,
            item=item,
            comparison=comparisons[frozenset((a, b))],
            a_shown_first=True,
            prompts=[item.input],
            status=Battle.Status.VOTED,
            assignment=held,
        )


def add_separability(study: Study, deltas: dict[int, float]) -> None:
    """Each prompt's separability (prompt number -> delta) under the study's metric, stored for the battle's pair."""
    metric = study.selection_settings.separability_metric
    for prompt, delta in deltas.items():
        battle = Battle.objects.select_related("comparison").get(study=study, item__external_id=f"battle-{prompt}")
        run, _ = SeparabilityRun.objects.get_or_create(study=study, comparison=battle.comparison, metric=metric)
        ItemSeparability.objects.create(run=run, item_id=battle.item_id, self_a=0.9, self_b=0.9, cross=0.5, delta=delta)
