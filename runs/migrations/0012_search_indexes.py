# Indexes for the console's search, built without blocking writes (see
# audit.migration_operations): the start of a business key, and compensation references.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0011_step_outcome_events"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(fields=["business_key"], name="run_business_key_prefix_idx",
                               opclasses=["varchar_pattern_ops"]),
        ),
        AddIndexConcurrently(
            model_name="step",
            index=models.Index(condition=models.Q(("compensation_ref", ""), _negated=True),
                               fields=["compensation_ref"], name="step_compensation_ref_idx"),
        ),
    ]
