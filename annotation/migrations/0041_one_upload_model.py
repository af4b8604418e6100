"""One model for the files waiting for their background import (annotation/uploads.py): StudyUpload and
JudgmentUpload become Upload, with a kind (study / judgments). Their rows move over with their creation times, and
the jobs that import them name their new rows -- an "import" job found its study's file by the study, a "judgments"
job by the old row's id; both kinds now carry {"upload": id} -- so a job queued before the upgrade still runs.
Reversible: the rows and the jobs' ids go back (a study's second study file, which the old model could not hold and
the import never makes, would be left behind)."""

import django.db.models.deletion
from django.db import migrations, models

# the kind of file, its old model, its job's kind
KINDS = (("study", "StudyUpload", "import"), ("judgments", "JudgmentUpload", "judgments"))


def move(source, target, ids, **fields):
    """Copy the rows ``ids`` of ``source`` to ``target``, one file in memory at a time, with their creation times;
    {old id: new id}."""
    moved = {}
    for pk in ids:
        row = source.objects.get(pk=pk)
        new = target.objects.create(study_id=row.study_id, filename=row.filename, data=row.data, **fields)
        target.objects.filter(pk=new.pk).update(created=row.created)  # auto_now_add wrote the time of the copy
        moved[pk] = new.pk
    return moved


def set_upload(job, upload):
    """The job's params naming ``upload`` (None: naming none)."""
    job.params = {**{k: v for k, v in job.params.items() if k != "upload"}, **({"upload": upload} if upload else {})}
    job.save(update_fields=["params"])


def forwards(apps, schema_editor):
    Upload, Job = apps.get_model("annotation", "Upload"), apps.get_model("annotation", "Job")
    for kind, name, job_kind in KINDS:
        old = apps.get_model("annotation", name)
        moved = move(old, Upload, list(old.objects.order_by("pk").values_list("pk", flat=True)), kind=kind)
        # an "import" job found its study's file by the study, a "judgments" job by the file's id
        file_of = dict(old.objects.values_list("study_id" if kind == "study" else "pk", "pk"))
        for job in Job.objects.filter(kind=job_kind):
            key = job.study_id if kind == "study" else job.params.get("upload")
            if key in file_of:
                set_upload(job, moved[file_of[key]])


def backwards(apps, schema_editor):
    Upload, Job = apps.get_model("annotation", "Upload"), apps.get_model("annotation", "Job")
    for kind, name, job_kind in KINDS:
        old = apps.get_model("annotation", name)
        files = Upload.objects.filter(kind=kind).order_by("pk").values_list("pk", "study_id")
        if kind == "study":  # a study held one study file: its first (the import never stages two)
            first = {}
            for pk, study_id in files:
                first.setdefault(study_id, pk)
            ids = sorted(first.values())
        else:
            ids = [pk for pk, _ in files]
        moved = move(Upload, old, ids)
        for job in Job.objects.filter(kind=job_kind):
            upload = job.params.get("upload")
            if kind == "study" and upload is not None:
                set_upload(job, None)  # found by its study again
            elif upload in moved:
                set_upload(job, moved[upload])


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0040_task_fill_order"),
    ]

    operations = [
        migrations.CreateModel(
            name="Upload",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(choices=[("study", "Study file"), ("judgments", "Judgments file")],
                                          max_length=10)),
                ("filename", models.CharField(blank=True, max_length=255)),
                ("data", models.BinaryField()),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("study", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="uploads",
                                            to="annotation.study")),
            ],
        ),
        migrations.RunPython(forwards, backwards),
        migrations.DeleteModel(name="JudgmentUpload"),
        migrations.DeleteModel(name="StudyUpload"),
    ]
