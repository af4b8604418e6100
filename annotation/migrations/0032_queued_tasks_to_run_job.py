"""Every background job runs as ``annotation.jobs.run_job``. Tasks queued before the upgrade under the old
task paths would otherwise fail to import in the worker and leave their jobs queued for ever: they are pointed at
the one entry point (the arguments -- the job's id -- are the same). The content types of the two models that moved
here from selection go too (Django made ``annotation.job`` and ``annotation.workerbeat``)."""

from django.conf import settings
from django.db import migrations

OLD_TASKS = (
    "annotation.tasks.run_plan", "annotation.tasks.run_judge", "annotation.tasks.run_study_import",
    "annotation.tasks.run_judgment_import", "selection.tasks.run_embedding", "selection.tasks.run_separability",
    "analytics.tasks.run_report",
)
TASKS_APP = "django_tasks_db" in settings.INSTALLED_APPS


def forwards(apps, schema_editor):
    if TASKS_APP:
        tasks = apps.get_model("django_tasks_database", "DBTaskResult")
        tasks.objects.filter(task_path__in=OLD_TASKS, status="READY").update(task_path="annotation.jobs.run_job")
    content_types = apps.get_model("contenttypes", "ContentType")
    content_types.objects.filter(app_label="selection", model__in=("job", "workerbeat")).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0031_job_and_worker_beat_from_selection"),
        ("contenttypes", "0002_remove_content_type_name"),
    ] + ([("django_tasks_database", "0021_conditional_partial_index_ordering")] if TASKS_APP else [])

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
