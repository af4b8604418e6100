"""An arena with ready battles for the tests of its background samples and separability: the arena from
``setup.do_create_arena`` against tests/judge_server.py's ``gen-`` models, each battle stored as
docs/arena.md#how-a-battle-is-stored says a READY battle is (its prompt an item, the two replies the systems' sample
0 with a ledger row the budget counts, the two a pair, held as the battle's one-pair assignment by
``rating.battles.do_hold_battle``)."""

from __future__ import annotations

from annotation.arena import setup
from annotation.models import (
    Battle,
    Comparison,
    Generation,
    GenerationCall,
    Item,
    Pair,
    Rater,
    Study,
    text_hash,
    word_count,
)
from annotation.rating import battles as rating_battles


def arena(researcher, server, *, samples: int = 2, models=("gen-terse-a", "gen-verbose-b"), **fields) -> Study:
    systems = [setup.SystemSpec(f"sys-{m}", m, server.base_url) for m in models]
    endpoint_fields = {"max_retries": 1, "timeout_seconds": 5.0, **fields}
    return setup.do_create_arena(researcher, "arena", systems, samples=samples, endpoint_fields=endpoint_fields)


def ready_battle(
    study: Study, prompt: str, comparison: Comparison | None = None, rater: Rater | None = None, replies=None
) -> Battle:
    """A READY battle on ``prompt``: its item, and both systems' sample 0 (``replies``: their texts, default a
    reply naming the system) with their ledger rows."""
    comparison = comparison or study.comparisons.order_by("pk").first()
    assert comparison is not None
    n = Battle.objects.filter(study=study).count() + 1
    # by default each battle has a rater of its own: a rater's newer ready battle ends their earlier one's vote
    # (models.arena.in_play), which a test of one rater's battles asks for by passing ``rater``
    rater = (
        rater
        or Rater.objects.get_or_create(study=study, external_id=f"r{n}", defaults={"source": Rater.Source.OPEN_LINK})[0]
    )
    item = Item.objects.create(
        study=study, external_id=f"battle-{n}", input=prompt, position=n, metadata={"arena": True}
    )
    battle = Battle.objects.create(
        study=study, rater=rater, item=item, comparison=comparison, a_shown_first=True, status=Battle.Status.READY
    )
    texts = replies or (f"{comparison.system_a} answers {prompt}", f"{comparison.system_b} answers {prompt}")
    shown = []
    for system, text in zip((comparison.system_a, comparison.system_b), texts, strict=True):
        generation = Generation.objects.create(
            item=item, system=system, sample_index=0, text=text, text_hash=text_hash(text), n_words=word_count(text)
        )
        GenerationCall.objects.create(
            endpoint=system.endpoint,
            item=item,
            sample_index=0,
            status=GenerationCall.Status.GENERATED,
            replies=1,
            generation=generation,
        )
        shown.append(generation)
    rating_battles.do_hold_battle(battle, Pair.objects.create(item=item, generation_a=shown[0], generation_b=shown[1]))
    battle.refresh_from_db()
    return battle
