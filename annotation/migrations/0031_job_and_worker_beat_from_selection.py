"""Job and WorkerBeat, moved here from the selection app (every background job is annotation's) without touching
their tables."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0030_places_claimed_as_shown"),
        ("selection", "0013_job_and_worker_beat_to_annotation"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Job",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("kind", models.CharField(max_length=40)),
                        ("params", models.JSONField(default=dict)),
                        ("status", models.CharField(choices=[("queued", "Queued"), ("running", "Running"),
                                                             ("done", "Done"), ("failed", "Failed"),
                                                             ("stopped", "Stopped")],
                                                    default="queued", max_length=10)),
                        ("done", models.PositiveIntegerField(default=0)),
                        ("total", models.PositiveIntegerField(default=0)),
                        ("message", models.TextField(blank=True)),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("finished", models.DateTimeField(blank=True, null=True)),
                        ("heartbeat", models.DateTimeField(blank=True, help_text="Last sign of life of a long job's "
                                                                                 "worker.", null=True)),
                        ("study", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="jobs",
                                                    to="annotation.study")),
                    ],
                    options={"db_table": "selection_job", "ordering": ["-created", "-id"]},
                ),
                migrations.CreateModel(
                    name="WorkerBeat",
                    fields=[
                        ("worker_id", models.CharField(max_length=64, primary_key=True, serialize=False)),
                        ("host", models.CharField(max_length=255)),
                        ("pid", models.PositiveIntegerField()),
                        ("started", models.DateTimeField()),
                        ("last_seen", models.DateTimeField(db_index=True)),
                    ],
                    options={"db_table": "selection_workerbeat"},
                ),
            ],
            database_operations=[],
        ),
    ]
