"""A study's life after its import: its settings changed (the plan rebuilt, or frozen once raters started),
paused / resumed / archived, duplicated, deleted."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from annotation import rater_words, setting_ranges, study_settings
from annotation.errors import ServiceError
from annotation.models import (
    Comparison,
    Generation,
    GoldPair,
    Item,
    Study,
    System,
    SystemEndpoint,
    Task,
)
from annotation.plan import planning
from annotation.studies import creation, team


@transaction.atomic
def do_update_settings(
    study: Study,
    changes: dict[str, Any],
    explicit: list[tuple[int, int]] | None,
    background: bool = False,
    by: User | None = None,
) -> Study:
    """Apply a validated settings form; rebuild the plan when a plan field changed. ``background`` (a request):
    a plan that would first embed outputs not embedded yet is built by the worker (``planning.do_queue_plan``), never in
    the request; commands and scripts build it at once. A value outside its setting's range (``setting_ranges``) is
    refused with the setting's name before anything changes. ``by``: who changed them, for the audit trail (each
    changed setting, before and after)."""
    setting_ranges.check_changes(study, changes)
    changes = _default_instructions(study, changes)
    before = {f: study_settings.value(study, f) for f in changes}

    def changed(fields) -> bool:
        return any(study_settings.value(study, f) != changes[f] for f in fields if f in changes)

    plan_changed = changed(study_settings.plan_fields())
    if study.pair_mode == Study.PairMode.EXPLICIT or changes.get("pair_mode") == Study.PairMode.EXPLICIT:
        current = sorted(study.comparisons.values_list("system_a_id", "system_b_id"))
        plan_changed = plan_changed or (explicit is not None and sorted(explicit) != current)
    answer_changed = changed(study_settings.answer_fields())
    if plan_changed or answer_changed:
        planning.lock_plan(study, exclusive=True)  # no rater starts between the check below and the new plan
    if (plan_changed or answer_changed) and study.has_started():
        raise ServiceError(
            "Raters have already started on this study, so its comparison plan "
            "(pairs per assignment, raters per item, system pairs, scheduling) and how raters "
            "answer (the elicitation mode) are frozen."
        )
    study_settings.do_apply(study, changes)
    differ = {f: [_audited(before[f]), _audited(changes[f])] for f in changes if before[f] != changes[f]}
    if explicit is not None and plan_changed and study.pair_mode == Study.PairMode.EXPLICIT:
        differ["explicit_pairs"] = [None, [list(p) for p in sorted(explicit)]]
    if differ:
        team.do_audit(study, by, "settings", "changed " + ", ".join(differ), differ)
    if plan_changed:
        if background and planning.plan_needs_worker(study):
            planning.comparison_systems(study, explicit)  # too many pairs is said now, not by a failed job
            Task.objects.filter(study=study).delete()  # nobody starts on the old plan meanwhile
            if explicit is not None:  # the ticked pairs are the plan's input: kept for the job
                planning.do_set_explicit_pairs(study, explicit)
            planning.do_queue_plan(study)
        else:
            planning.do_rebuild_plan(study, explicit)
    planning.do_reconsider_closed_pairs(study)  # e.g. the study stopped buying decided pairs: they open again
    return study


def _default_instructions(study: Study, changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` with SepLab's default instructions following what one answer covers (``Study.answer_unit``): the
    pairs' default for pairs, the rankings' for several outputs -- only while the study's instructions are one of the
    two (a researcher's own text is never touched)."""
    text = str(changes.get("instructions", study.instructions)).strip()
    if text not in (rater_words.PAIR_INSTRUCTIONS, rater_words.RANKING_INSTRUCTIONS):
        return changes
    ranks = changes.get("answer_unit", study.answer_unit) != Study.AnswerUnit.PAIRS
    wanted = rater_words.RANKING_INSTRUCTIONS if ranks else rater_words.PAIR_INSTRUCTIONS
    return changes if text == wanted else {**changes, "instructions": wanted}


def _audited(value: Any) -> Any:
    """A setting's value as the audit trail keeps it (JSON): a system by its name."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


SETTABLE_STATUSES = (Study.Status.ACTIVE, Study.Status.PAUSED, Study.Status.ARCHIVED)


def do_set_status(study: Study, status: str) -> Study:
    if status not in SETTABLE_STATUSES:
        raise ServiceError(f"status: {status!r} is not one of {', '.join(SETTABLE_STATUSES)}")
    if study.status == Study.Status.IMPORTING:
        raise ServiceError("status: the study is still being imported")
    Study.objects.filter(pk=study.pk).update(status=status)
    study.status = status
    return study


def do_delete_study(study: Study, typed_name: str) -> None:
    """Delete the study and everything in it, once its name is typed to confirm."""
    if typed_name.strip() != study.name:
        raise ServiceError("Type the study's name exactly to confirm the deletion.")
    study.delete()


@transaction.atomic
def do_duplicate_study(study: Study, name: str, owner: User | None = None) -> Study:
    """A new study with the same items, outputs, attention checks and every setting (the researcher's own
    copy to run again, ``owner``'s: by default the study's): no raters, judgments, links or team. Its plan is built
    afresh from the copied settings."""
    owner = owner or study.owner
    name = creation.check_study_name(owner, name)
    skip = {"id", "name", "created", "open_link_enabled", "open_link_nonce", "status", "baseline", "owner"}
    copy = Study.objects.create(
        name=name,
        owner=owner,
        **{
            f.name: getattr(study, f.name)
            for f in Study._meta.concrete_fields
            if f.name not in skip and f.attname not in skip | {"baseline_id", "owner_id"}
        },
    )
    for group in study_settings.GROUPS.values():
        source = getattr(study, group.accessor)
        group.model._default_manager.create(study=copy, **{f: getattr(source, f) for f in group.fields})
    systems = {s.pk: System.objects.create(study=copy, name=s.name) for s in study.systems.all()}
    for endpoint in SystemEndpoint.objects.filter(system__study=study):  # a generated system stays one, where it
        # came from with it (its ledger stays with the original: the copy's outputs are copies), so the copy's
        # Systems page can go on generating what is missing, and a system not complete is not compared
        endpoint.pk, endpoint.id, endpoint._state.adding = None, None, True
        endpoint.system, endpoint.stop_requested = systems[endpoint.system_id], False
        if owner != study.owner:  # a collaborator's copy: the owner's stored key stays the owner's to spend
            endpoint.api_key, endpoint.api_key_url = "", ""
        endpoint.save()
    if study.baseline_id:
        copy.baseline = systems[study.baseline_id]
        copy.save(update_fields=["baseline"])
    originals = list(study.items.all())
    items = Item.objects.bulk_create(
        Item(
            study=copy,
            external_id=i.external_id,
            input=i.input,
            messages=i.messages,
            reference=i.reference,
            metadata=i.metadata,
            position=i.position,
        )
        for i in originals
    )
    item_of = {old.pk: new for old, new in zip(originals, items, strict=True)}
    generations = Generation.objects.filter(item__study=study).values_list(
        "item_id", "system_id", "sample_index", "text", "text_hash", "n_words", "provenance"
    )
    Generation.objects.bulk_create(
        (
            Generation(item=item_of[i], system=systems[s], sample_index=k, text=t, text_hash=h, n_words=w, provenance=p)
            for i, s, k, t, h, w, p in generations.iterator(chunk_size=2000)
        ),
        batch_size=2000,
    )
    GoldPair.objects.bulk_create(
        GoldPair(study=copy, input=g.input, good_output=g.good_output, bad_output=g.bad_output)
        for g in study.gold_pairs.all()
    )
    explicit = None
    if study.pair_mode == Study.PairMode.EXPLICIT:
        explicit = [
            (systems[a].pk, systems[b].pk)
            for a, b in Comparison.objects.filter(study=study).values_list("system_a_id", "system_b_id")
        ]
    planning.do_rebuild_plan(copy, explicit)
    return copy
