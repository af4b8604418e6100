"""What selection plugs into annotation (``annotation/extensions.py``), registered by ``SelectionConfig.ready``:
the plan's item chooser (the study's strategy: a static method's choice or the live loop's first representatives),
the background jobs of embedding and separability, and what the study and settings pages show of selection."""

from __future__ import annotations

from annotation import extensions
from annotation.models import Comparison, Item, Study
from selection import live, services
from selection.strategies import STRATEGIES, is_live, needs_embeddings, strategy_parameters


def choose(study: Study, comparison: Comparison, candidates: list[Item]) -> list[Item]:
    chosen = study.selection_settings
    if is_live(chosen.selection_method):
        return live.start(study, comparison, candidates)
    items, _ = services.run_selection(study, comparison, chosen.selection_method, chosen.budget, study.seed,
                                      strategy_parameters(study), items=candidates)
    return items


def needs_worker(study: Study) -> bool:
    stored = study.selection_settings
    if not needs_embeddings(stored.selection_method, stored.budget, stored.separability_metric):
        return False
    done, total = services.embedding_coverage(study)
    return done < total


def prepare(study: Study, progress: extensions.Progress) -> None:
    services.embed_study(study, progress=progress)


CHOOSER = extensions.ItemChooser(choose=choose, advance=live.advance, needs_worker=needs_worker, prepare=prepare)


def study_page(study: Study) -> dict:
    return {"live_statuses": live.statuses(study), "embedded": services.embedding_coverage(study),
            "settings": study.selection_settings,
            "strategy": STRATEGIES.get(study.selection_settings.selection_method)}


def settings_page(study: Study) -> dict:
    stored = study.selection_settings
    # what the stored settings become, through the same function the plan, select, simulate and the report call
    return {"strategies": STRATEGIES.values(),
            "strategy_parameters": {"method": stored.selection_method, "budget": stored.budget or "every item",
                                    "seed": study.seed, **strategy_parameters(study)}}
