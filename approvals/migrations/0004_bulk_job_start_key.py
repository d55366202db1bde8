# A bulk job's start key: the form of one preview, sent twice, starts one job. A column with a
# constant default (added without rewriting the table; the jobs before it keep an empty key,
# which the partial unique index leaves out), the index built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddUniqueConstraintConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("approvals", "0003_bulk_jobs"),
    ]

    operations = [
        migrations.AddField(
            model_name="bulkjob",
            name="start_key",
            field=models.CharField(blank=True, db_default="", default="", max_length=64),
        ),
        AddUniqueConstraintConcurrently(
            model_name="bulkjob",
            constraint=models.UniqueConstraint(condition=models.Q(("start_key", ""),
                                                                  _negated=True),
                                               fields=("requested_by", "start_key"),
                                               name="bulk_job_started_once"),
        ),
    ]
