# The access chain's admin search (runs.admin.AccessRecordAdmin) names an actor exactly, or
# the start of a subject: each along its own index, where Django's search read the whole
# chain, which grows with every grant, revocation and token for as long as the system lives.
# The subject's index uses varchar_pattern_ops so that it answers a prefix (LIKE 'q%')
# whatever the database's collation, and equality too. Built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("audit", "0006_refuse_truncate"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="accessrecord",
            index=models.Index(fields=["actor_label"], name="access_actor_idx"),
        ),
        AddIndexConcurrently(
            model_name="accessrecord",
            index=models.Index(fields=["subject"], name="access_subject_idx",
                               opclasses=["varchar_pattern_ops"]),
        ),
    ]
