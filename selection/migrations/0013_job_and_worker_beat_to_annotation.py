"""Job and WorkerBeat moved to annotation's ground floor (the one home of every background job): the tables stay
(``selection_job``, ``selection_workerbeat``); only Django's record of which app owns them changes."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("selection", "0012_worker_beat"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="Job"),
                migrations.DeleteModel(name="WorkerBeat"),
            ],
            database_operations=[],
        ),
    ]
