# The admin's filters of the audit log and the access chain, each along an index: the
# records of what people did (actor kind "user"), newest first, were found by reading the
# whole log, where the system's records are nearly all of it (the index is partial: the
# system's records add nothing to it); the access chain's records of one action, by reading
# the whole chain. Built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("audit", "0008_access_head_seal"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="auditrecord",
            index=models.Index(condition=models.Q(("actor_kind", "user")), fields=["id"],
                               name="audit_person_idx"),
        ),
        AddIndexConcurrently(
            model_name="accessrecord",
            index=models.Index(fields=["action", "seq"], name="access_action_idx"),
        ),
    ]
