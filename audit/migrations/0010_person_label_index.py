# The console's audit page filtered by a person's name read the log backwards along the
# primary key until it had a page of matches or reached the start: at millions of records,
# the whole log for anyone's few records. An index on (label, id) of people's records only
# (actor kind "user"): a step's records, the system's, add nothing to it. Built without
# blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("audit", "0009_admin_filter_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="auditrecord",
            index=models.Index(condition=models.Q(("actor_kind", "user")),
                               fields=["actor_label", "id"], name="audit_person_label_idx"),
        ),
    ]
