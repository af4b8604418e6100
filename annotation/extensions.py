"""Where the other apps plug into annotation. selection and analytics stand on annotation; annotation never imports
them (tests/test_architecture.py), so what it needs from them it finds here, filled from their ``AppConfig.ready``:

- ``item_chooser()``: how the plan picks the items of each system pair (selection's strategies, the live loop and
  the embeddings they need). The plan cannot be built without one: a missing chooser is a configuration error,
  never a silent "every item".
- ``page_context(page, study)``: what the study page and the settings page show of other apps (selection's live
  status and strategy, analytics' parameters), merged into the page's template context; ``page_context("item",
  item)``: what an item's page shows of them (analytics' verdicts, disagreements and rulings).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

Progress = Callable[[int, int], None]


@dataclasses.dataclass(frozen=True)
class ItemChooser:
    """What the plan asks of item selection, one function each (``do_*``: it stores what it decides)."""

    do_choose: Callable[..., list]
    """``do_choose(study, comparison, candidates)``: the items of one system pair to release first, in release order
    (a live method's first representatives, a static method's whole choice), stored with the run that chose them.
    ``ValueError`` when it cannot."""
    do_advance: Callable[..., Any]
    """``do_advance(study, comparison_id)``: after an assignment with a place in that system pair completed, what a
    live method decided (an object with ``comparison``, ``items`` to release, ``seed`` and ``counted``: the items
    whose judgments count; the loop's outcome stored), or None."""
    needs_worker: Callable[..., bool]
    """``needs_worker(study)``: whether choosing would first do slow work (embedding outputs) that must not run
    inside a request."""
    do_prepare: Callable[..., Any]
    """``do_prepare(study, progress)``: that slow work (the embeddings stored), done by the background worker before
    the plan is built."""
    do_decide: Callable[..., tuple[set, set] | None]
    """``do_decide(study, assignment)``: after the assignment completed, the decisions of the system pairs it had
    places in brought up to date (and stored); returns the ids of the system pairs to close now (decided, or not
    needed by the ranking) and of those to open again (needed by the ranking again), or None when the study does
    not stop buying decided pairs."""
    fills_items_first: Callable[..., bool]
    """``fills_items_first(study)``: whether raters should finish started items before new ones start (the study's
    decisions observe an item once all its raters are in)."""
    do_reconsider_decisions: Callable[..., set]
    """``do_reconsider_decisions(study)``: after its settings change, the ids of every system pair the study no
    longer buys, from the decisions as last brought up to date (the stored decisions are forgotten when it stops
    buying decided pairs)."""
    do_recount_decisions: Callable[..., set]
    """``do_recount_decisions(study, item_ids)``: after the data manager excluded those items or included them again,
    the stored decisions of the system pairs with tasks on them decided again over the judgments that count now (a
    betting sequence takes no observation back); returns the ids of every system pair the study no longer buys."""
    pair_weights: Callable[..., dict] = lambda study: {}
    """``pair_weights(study)``: an arena's chance weight of each system pair for its next battle (comparison id ->
    weight > 0), read from each pair's decision (``selection/arena.py``: a pair still undecided weighs more); a pair
    missing from it is never drawn."""
    draw_pair: Callable[..., Any] = lambda weights, avoid=None: None
    """``draw_pair(weights, avoid)``: one arena pair id drawn with chance proportional to ``weights`` (from
    ``pair_weights``), never ``avoid`` (the rater's previous pair) unless it is the only one; None without pairs --
    the same rule the replayed arena runs (``selection.core.arena.draw``)."""
    first_raters: Callable[..., int] = lambda study: study.raters_per_item
    """``first_raters(study)``: how many raters a new rating task asks for at first (fewer than the study's raters
    per item when the plan comes back for the others only where they pay)."""


_CHOOSER: list[ItemChooser] = []
_PAGES: dict[str, list[Callable[[Any], dict]]] = {"study": [], "settings": [], "item": []}


def set_item_chooser(chooser: ItemChooser) -> None:
    _CHOOSER[:] = [chooser]


def item_chooser() -> ItemChooser:
    if not _CHOOSER:
        raise ImproperlyConfigured("No item chooser is registered: add the 'selection' app to INSTALLED_APPS.")
    return _CHOOSER[0]


def add_page_context(page: str, contribute: Callable[[Any], dict]) -> None:
    """``contribute(study)`` adds to the template context of ``page`` ("study" or "settings"); for "item" (an item's
    page) it is ``contribute(item)``."""
    if contribute not in _PAGES[page]:
        _PAGES[page].append(contribute)


def page_context(page: str, subject) -> dict:
    context: dict = {}
    for contribute in _PAGES[page]:
        context.update(contribute(subject))
    return context
