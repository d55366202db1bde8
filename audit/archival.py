"""What the audit app keeps of a run in an archive file (its chain of records, as
audit.offline reads them back), and how they leave the table (see archive.parts).

The table is append-only: its triggers (archive migrations 0002 and 0005) let a DELETE
through only in a transaction that names its archive file (SET LOCAL audit.archival) for
runs tombstoned to that file, which the archive app writes before asking any app to remove
its rows, and whose chains the file's recorded heads close at the last record removed: the
statement removes a run's whole chain at once."""

from django.db import connection

from .models import AuditRecord
from .offline import record_to_dict

ORDER = 10
ARCHIVED = (AuditRecord,)
TRANSIENT: dict = {}


def rows(run_ids: list[int]) -> dict[int, dict]:
    out = {run_id: {"audit": []} for run_id in run_ids}
    for record in (AuditRecord.objects.filter(run_id__in=run_ids).order_by("run_id", "seq")
                   .iterator(chunk_size=5000)):
        out[record.run_id]["audit"].append(record_to_dict(record))
    return out


def remove(run_ids: list[int]) -> None:
    # SQL: the model refuses every delete.
    with connection.cursor() as cursor:
        marks = ", ".join(["%s"] * len(run_ids))
        cursor.execute(f"DELETE FROM {AuditRecord._meta.db_table} WHERE run_id IN ({marks})",
                       run_ids)
