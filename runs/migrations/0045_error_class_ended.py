# An undo a person's end of its run stopped says so in its error class, not only in its
# message (runs.machine.transitions.in_flight): ended_in_doubt, an undo in flight then whose
# outcome its sender may still bring; ended_undoing, an agent step's undo stopped with its
# calls undone only so far. Rows written before carried these as messages; they are given
# their class here. Few rows match (compensation failed, one of two sentences), and the
# sentences are written out: a migration keeps the values of its time.

from django.db import migrations, models

FAILED = "compensation_failed"
IN_FLIGHT_AT_END = "in flight when the run was terminated"
ENDED_BEFORE_UNDONE = "ended by a person before every tool call of it was undone"


def classify(apps, schema_editor):
    alias = schema_editor.connection.alias
    for model in ("Step", "ToolCall"):
        rows = apps.get_model("runs", model).objects.using(alias).filter(status=FAILED)
        rows.filter(error_class="unknown", error_message=IN_FLIGHT_AT_END) \
            .update(error_class="ended_in_doubt")
        rows.filter(error_class="", error_message=ENDED_BEFORE_UNDONE) \
            .update(error_class="ended_undoing")


def unclassify(apps, schema_editor):
    alias = schema_editor.connection.alias
    for model in ("Step", "ToolCall"):
        rows = apps.get_model("runs", model).objects.using(alias).filter(status=FAILED)
        rows.filter(error_class="ended_in_doubt").update(error_class="unknown")
        rows.filter(error_class="ended_undoing").update(error_class="")


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0044_key_head_indexes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="step",
            name="error_class",
            field=models.CharField(blank=True, choices=[
                ("transient", "Transient"), ("permanent", "Permanent"), ("unknown", "Unknown"),
                ("model_format", "Model Format"), ("exhausted", "Exhausted"),
                ("unclassified", "Unclassified"), ("ended_in_doubt", "Ended In Doubt"),
                ("ended_undoing", "Ended Undoing")], max_length=16),
        ),
        migrations.RunPython(classify, unclassify),
    ]
