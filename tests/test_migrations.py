"""The data migrations on a database that holds a study: settings move to their apps' rows with their values,
and existing assignments get their answer counters."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [
    ("annotation", "0010_elicitation_modes_strength_neither"),
    ("selection", "0007_iterative_run_schedule"),
    ("analytics", None),
]


def migrate(targets):
    """Migrate to ``targets`` ((app, None) = none of the app's migrations) and return the models as they were."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


@pytest.fixture(autouse=True)
def back_to_the_latest_schema():
    yield
    migrate(migrate_latest_targets())  # whatever the test did, the next test gets today's schema


@pytest.mark.slow(seconds=17)
def test_settings_and_answer_counters_survive_the_migrations():
    old = migrate(BEFORE)
    Study = old.get_model("annotation", "Study")
    owner = old.get_model("auth", "User").objects.create(username="old-owner")
    study = Study.objects.create(
        owner_id=owner.pk,
        name="before",
        selection_method="diffuse",
        budget=7,
        separability_metric="rouge1",
        separability_threshold=0.3,
        sep_threshold_t=0.5,
        sep_alpha=3.0,
        sep_beta=9.0,
        risk=0.05,
        min_n=4,
        stopping_ties_in_n=False,
        elo_k=16.0,
        bootstrap_rounds=50,
        indeterminacy_beta=0.2,
        rating_aggregation="majority",
        max_assignments_per_rater=3,
        assignment_timeout_minutes=30,
        gold_rate=0.2,
        min_seconds_per_pair=4,
        screen_min_gold=2,
        screen_accuracy=0.7,
    )
    item = old.get_model("annotation", "Item").objects.create(study=study, external_id="i", input="x", position=0)
    systems = [old.get_model("annotation", "System").objects.create(study=study, name=n) for n in "ab"]
    generations = [
        old.get_model("annotation", "Generation").objects.create(
            item=item, system=s, sample_index=0, text=s.name, text_hash=s.name
        )
        for s in systems
    ]
    comparison = old.get_model("annotation", "Comparison").objects.create(
        study=study, system_a=systems[0], system_b=systems[1]
    )
    pair = old.get_model("annotation", "Pair").objects.create(
        item=item, generation_a=generations[0], generation_b=generations[1]
    )
    task = old.get_model("annotation", "Task").objects.create(
        study=study, item=item, comparison=comparison, raters_required=1, position=0
    )
    rater = old.get_model("annotation", "Rater").objects.create(study=study, external_id="r", source="import")
    assignment = old.get_model("annotation", "Assignment").objects.create(
        study=study, rater=rater, task=task, item=item, slot=0
    )
    pairs = [
        old.get_model("annotation", "AssignmentPair").objects.create(
            assignment=assignment,
            pair=pair if n == 0 else None,
            gold=None
            if n == 0
            else old.get_model("annotation", "GoldPair").objects.create(
                study=study, input="g", good_output="g", bad_output="b"
            ),
            position=n,
            a_shown_first=True,
        )
        for n in range(3)
    ]
    old.get_model("annotation", "Judgment").objects.create(
        study=study,
        rater=rater,
        pair=pair,
        assignment=assignment,
        assignment_pair=pairs[0],
        a_shown_first=True,
        choice="a",
        idempotency_key="k",
    )
    old.get_model("annotation", "GoldAnswer").objects.create(
        assignment_pair=pairs[1], rater=rater, answer="first", correct=True, idempotency_key="g"
    )

    new = migrate(migrate_latest_targets())
    assert "budget" not in {f.name for f in new.get_model("annotation", "Study")._meta.fields}
    selection = new.get_model("selection", "SelectionSettings").objects.get(study_id=study.pk)
    assert (
        selection.selection_method,
        selection.budget,
        selection.separability_metric,
        selection.separability_threshold,
        selection.sep_threshold_t,
        selection.sep_alpha,
        selection.sep_beta,
        selection.risk,
        selection.min_n,
        selection.stopping_ties_in_n,
    ) == ("diffuse", 7, "rouge1", 0.3, 0.5, 3.0, 9.0, 0.05, 4, False)
    analysis = new.get_model("analytics", "AnalysisSettings").objects.get(study_id=study.pk)
    assert (analysis.elo_k, analysis.bootstrap_rounds, analysis.indeterminacy_beta, analysis.rating_aggregation) == (
        16.0,
        50,
        0.2,
        "majority",
    )
    crowd = new.get_model("annotation", "CrowdSettings").objects.get(study_id=study.pk)
    assert (
        crowd.max_assignments_per_rater,
        crowd.assignment_timeout_minutes,
        crowd.gold_rate,
        crowd.min_seconds_per_pair,
        crowd.screen_min_gold,
        crowd.screen_accuracy,
    ) == (3, 30, 0.2, 4, 2, 0.7)
    words = new.get_model("annotation", "Generation").objects.values_list("n_words", flat=True)
    assert list(words) == [1, 1]  # counted for the outputs already there
    place = new.get_model("annotation", "AssignmentTask").objects.get(assignment_id=assignment.pk)
    assert (place.task_id, place.item_id, place.rater_id, place.slot) == (task.pk, item.pk, rater.pk, 0)
    counted = new.get_model("annotation", "Assignment").objects.get(pk=assignment.pk)
    assert (counted.n_pairs, counted.answered) == (3, 2)  # a judgment and a gold answer of three pairs


def migrate_latest_targets():
    executor = MigrationExecutor(connection)
    return [key for key in executor.loader.graph.leaf_nodes() if key[0] in ("annotation", "selection", "analytics")]


@pytest.mark.slow(seconds=10)
def test_jobs_queued_before_the_move_keep_their_rows_and_run_through_the_one_entry_point():
    """Job and WorkerBeat moved from selection to annotation with their tables, and a task queued under
    an old task path is run by annotation.jobs.run_job after the upgrade (else its job would stay queued)."""
    from django.utils import timezone

    # analytics as it was then (its budget plans, added later, hang off annotation's newer Job)
    old = migrate(
        [
            ("annotation", "0030_places_claimed_as_shown"),
            ("selection", "0012_worker_beat"),
            ("analytics", "0004_estimate_target"),
        ]
    )
    owner = old.get_model("auth", "User").objects.create(username="queued-owner")
    study = old.get_model("annotation", "Study").objects.create(owner_id=owner.pk, name="queued")
    job = old.get_model("selection", "Job").objects.create(study_id=study.pk, kind="plan", total=2)
    old.get_model("selection", "WorkerBeat").objects.create(
        worker_id="w", host="h", pid=1, started=timezone.now(), last_seen=timezone.now()
    )
    from django_tasks_db.models import DBTaskResult as tasks  # its own app, never rolled back here

    queued = tasks.objects.create(
        task_path="annotation.tasks.run_plan",
        args_kwargs={"args": [job.pk], "kwargs": {}},
        queue_name="default",
        backend_name="default",
        status="READY",
        priority=0,
        run_after=timezone.now(),
    )
    done = tasks.objects.create(
        task_path="analytics.tasks.run_report",
        args_kwargs={"args": [1], "kwargs": {}},
        queue_name="default",
        backend_name="default",
        status="SUCCESSFUL",
        priority=0,
        run_after=timezone.now(),
    )

    new = migrate(migrate_latest_targets())
    moved = new.get_model("annotation", "Job").objects.get(pk=job.pk)
    assert (moved.study_id, moved.kind, moved.total, moved.status) == (study.pk, "plan", 2, "queued")
    assert new.get_model("annotation", "WorkerBeat").objects.get().host == "h"
    assert tasks.objects.get(pk=queued.pk).task_path == "annotation.jobs.run_job"
    assert tasks.objects.get(pk=done.pk).task_path == "analytics.tasks.run_report"  # history stays as it was
    from django.utils.module_loading import import_string

    assert import_string("annotation.jobs.run_job").name == "run_job"


def test_files_waiting_for_their_import_move_to_the_one_upload_model_and_their_queued_jobs_still_run():
    """StudyUpload and JudgmentUpload became Upload (a kind each): the rows move with their bytes and times, the
    queued jobs name their new rows and run after the upgrade, and migrating back restores both tables."""
    import json

    from annotation import study_settings
    from annotation.jobs import run_job

    before = [("annotation", "0040_task_fill_order")]
    old = migrate(before)
    owner = old.get_model("auth", "User").objects.create(username="upload-owner")
    study = old.get_model("annotation", "Study").objects.create(owner_id=owner.pk, name="big", status="importing")
    items = [{"id": f"i{i}", "input": f"q{i}", "outputs": {"a": [f"x{i}"], "b": [f"y{i}"]}} for i in range(3)]
    judgment = {
        "system_a": "a",
        "system_b": "b",
        "shown_first": "a",
        "rater": "r",
        "rater_kind": "human",
        "choice": "a",
    }
    study_file = old.get_model("annotation", "StudyUpload").objects.create(
        study_id=study.pk, filename="s.jsonl", data="".join(json.dumps(x) + "\n" for x in items).encode()
    )
    judgments_file = old.get_model("annotation", "JudgmentUpload").objects.create(
        study_id=study.pk,
        filename="j.jsonl",
        data="".join(json.dumps({"item": f"i{i}", **judgment}) + "\n" for i in range(3)).encode(),
    )
    OldJob = old.get_model("annotation", "Job")
    import_job = OldJob.objects.create(study_id=study.pk, kind="import", total=1)  # found its file by the study
    judgments_job = OldJob.objects.create(study_id=study.pk, kind="judgments", params={"upload": judgments_file.pk})

    new = migrate(migrate_latest_targets())
    assert not {"annotation_studyupload", "annotation_judgmentupload"} & set(connection.introspection.table_names())
    moved = {u.kind: u for u in new.get_model("annotation", "Upload").objects.all()}
    assert sorted(moved) == ["judgments", "study"]
    for kind, was in (("study", study_file), ("judgments", judgments_file)):
        now = moved[kind]
        assert (now.study_id, now.filename, bytes(now.data), now.created) == (
            study.pk,
            was.filename,
            bytes(was.data),
            was.created,
        )
    NewJob = new.get_model("annotation", "Job")
    assert NewJob.objects.get(pk=import_job.pk).params == {"upload": moved["study"].pk}
    assert NewJob.objects.get(pk=judgments_job.pk).params == {"upload": moved["judgments"].pk}

    back = migrate(before)
    restored = back.get_model("annotation", "StudyUpload").objects.get()
    assert (restored.study_id, bytes(restored.data), restored.created) == (
        study.pk,
        bytes(study_file.data),
        study_file.created,
    )
    restored = back.get_model("annotation", "JudgmentUpload").objects.get()
    assert (restored.study_id, bytes(restored.data), restored.created) == (
        study.pk,
        bytes(judgments_file.data),
        judgments_file.created,
    )
    BackJob = back.get_model("annotation", "Job")
    assert BackJob.objects.get(pk=import_job.pk).params == {}
    assert BackJob.objects.get(pk=judgments_job.pk).params == {"upload": restored.pk}

    migrate(migrate_latest_targets())  # and up again: the jobs queued before the upgrade run
    from annotation.models import Job, Judgment, Study, Upload

    study_settings.do_create_defaults(Study.objects.get(pk=study.pk))  # as the import that staged the file did
    run_job.call(import_job.pk)
    run_job.call(judgments_job.pk)
    assert list(Job.objects.filter(study_id=study.pk).values_list("status", flat=True)) == ["done", "done"]
    assert Study.objects.get(pk=study.pk).status == "active" and Judgment.objects.filter(study_id=study.pk).count() == 3
    assert not Upload.objects.exists()
