"""The planned looks' migration (docs/decisions.md#group-sequential-looks): a study created before the setting keeps
continuous monitoring, as its decisions were made and its stored sequences are; a new study takes five planned
looks with futility stops below 0.1."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotation.studies import creation
from selection.models import SelectionSettings
from tests.conftest import study_jsonl

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_study_from_before_the_setting_keeps_continuous_monitoring():
    before = ("selection", "0018_error_control")  # the last before 0019_decision_looks added the setting
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    try:
        executor.loader.build_graph()
        old = executor.loader.project_state([before]).apps
        owner = old.get_model("auth", "User").objects.create(username="old-owner")
        study = old.get_model("annotation", "Study").objects.create(owner_id=owner.pk, name="before")
        old.get_model("selection", "SelectionSettings").objects.create(study_id=study.pk)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        assert SelectionSettings.objects.get(study_id=study.pk).decision_looks == 0
        fresh = get_user_model().objects.create_user("new-owner")
        new = creation.do_create_study(fresh, "after", study_jsonl(), "n.jsonl")
        assert (new.selection_settings.decision_looks, new.selection_settings.decision_futility) == (5, 0.1)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
