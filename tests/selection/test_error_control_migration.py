"""The error control's migration (docs/decisions.md#study-wide-error): a study created before the setting keeps
the per-pair error its decisions were made at; a new study takes "auto"."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotation.studies import creation
from selection.models import SelectionSettings
from tests.conftest import study_jsonl

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_study_from_before_the_setting_keeps_its_per_pair_error():
    before = ("selection", "0017_one_rater_first")  # the last before 0018_error_control added the setting
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    try:
        executor.loader.build_graph()
        old = executor.loader.project_state([before]).apps
        owner = old.get_model("auth", "User").objects.create(username="old-owner")
        study = old.get_model("annotation", "Study").objects.create(owner_id=owner.pk, name="before")
        old.get_model("selection", "SelectionSettings").objects.create(study_id=study.pk)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())  # through 0018 and every later one: today's models
        assert SelectionSettings.objects.get(study_id=study.pk).error_control == "per_pair"
        fresh = get_user_model().objects.create_user("new-owner")
        new = creation.do_create_study(fresh, "after", study_jsonl(), "n.jsonl")
        assert new.selection_settings.error_control == "auto"
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
