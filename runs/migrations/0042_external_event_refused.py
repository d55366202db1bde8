# A kept event that the run waiting for it cannot take (its version's schema refuses the
# payload) is marked refused, with the run and the reason, the first time it is met
# (runs.waiting.kept.refuse_kept), and is not tried again. Nullable columns and a constant
# default: added without rewriting the table.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0041_pass_position"),
    ]

    operations = [
        migrations.AddField(
            model_name="externalevent",
            name="refused_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="externalevent",
            name="refused_run_id",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="externalevent",
            name="refused_reason",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
    ]
