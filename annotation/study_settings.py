"""Where a study's settings live. ``Study`` keeps what the annotation app itself needs (what raters are
asked, what is compared and how it is scheduled); every other app owns its settings as a model with one row
per study -- ``selection.models.SelectionSettings`` (which items raters see, when the live loop stops),
``analytics.models.AnalysisSettings`` (the report's ELO, bootstrap, aggregation, beta) and
``annotation.models.CrowdSettings`` (crowd work and quality control) -- and registers it here from its
``AppConfig.ready()``. Study creation, the settings page and ``do_update_settings`` read this registry, so
they need not know which app owns what; each app reads its own row (``study.selection_settings`` ...) and
maps it to its parameters in one function (``selection.strategies.strategy_parameters``,
``analytics.services.analysis_parameters``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.db import models


@dataclasses.dataclass(frozen=True)
class SettingsGroup:
    accessor: str  # the row's name on a study, e.g. "selection_settings"
    model: type[models.Model]

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.model._meta.concrete_fields if f.name != "study")


GROUPS: dict[str, SettingsGroup] = {}


def register(model: type[models.Model], accessor: str) -> None:
    """An app's settings model: one row per study, reached as ``study.<accessor>``."""
    GROUPS[accessor] = SettingsGroup(accessor, model)


def group_of(field: str) -> SettingsGroup | None:
    """The registered group that owns a setting, or None for a field of ``Study`` itself."""
    return next((g for g in GROUPS.values() if field in g.fields), None)


def create_for(study) -> None:
    """Every registered settings row of a new study, with its defaults."""
    for group in GROUPS.values():
        group.model.objects.get_or_create(study=study)


def value(study, field: str) -> Any:
    """A setting's stored value, wherever it lives."""
    group = group_of(field)
    return getattr(getattr(study, group.accessor) if group else study, field)


def apply(study, changes: dict[str, Any]) -> None:
    """Write settings onto the study and the rows that own them, and save what changed."""
    touched = {}
    for field, new in changes.items():
        group = group_of(field)
        target = getattr(study, group.accessor) if group else study
        setattr(target, field, new)
        if group:
            touched[group.accessor] = target
    study.save()
    for row in touched.values():
        row.save()
