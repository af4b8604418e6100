"""Prompt templates and instructions saved from a browser before text got one line ending carry the textarea's
"\r\n": rewritten with one line ending (annotation/text.py), as they are now saved."""

from django.db import migrations


def one_line_ending(apps, schema_editor):
    for model, field in (("Judge", "prompt_template"), ("Study", "instructions")):
        cls = apps.get_model("annotation", model)
        for pk, text in cls.objects.filter(**{f"{field}__contains": "\r"}).values_list("pk", field).iterator():
            cls.objects.filter(pk=pk).update(**{field: text.replace("\r\n", "\n").replace("\r", "\n")})


class Migration(migrations.Migration):
    dependencies = [("annotation", "0034_pay_per_assignment")]
    operations = [migrations.RunPython(one_line_ending, migrations.RunPython.noop)]
