"""What the tests of a checkpoint the database rolls back for a clash share: a worker's
sessions made serializable by its DATABASE_URL, another session of the test's database that
holds a row, whether a session waits for that row, and what a run whose undo clashed once
must show afterwards."""

import psycopg
from django.db import connection

from audit.actions import AuditAction
from audit.chain import verify_chain
from audit.models import AuditRecord
from runs.models import RunStatus, ToolCall

# Appended to a worker's DATABASE_URL: every transaction of its sessions is serializable.
SERIALIZABLE = "?options=-c%20default_transaction_isolation%3Dserializable"


def other_session() -> psycopg.Connection:
    params = connection.settings_dict
    return psycopg.connect(dbname=params["NAME"], user=params["USER"] or None,
                           host=params["HOST"] or None, port=params["PORT"] or None)


def waiting_for_a_row(holder: psycopg.Connection) -> bool:
    """Whether another session of this database waits for a lock: the worker's checkpoint,
    on the row the holder updated."""
    row = holder.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'").fetchone()
    return row[0] > 0


def actions(run) -> list[str]:
    return list(AuditRecord.objects.filter(run_id=run.pk).order_by("seq")
                .values_list("action", flat=True))


def undone_once_without_a_take_back(run, script) -> None:
    """The saga's write-note was undone once, its undo sent once, recorded once; nothing
    was taken back, and the run's chain holds."""
    assert run.status == RunStatus.COMPENSATED
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert (note.status, note.compensation_attempt) == ("compensated", 1)
    assert [c[1] for c in script.calls if c[0] == "write-note:compensate"] == \
        [note.compensation_key]  # the undo was sent once
    done = actions(run)
    assert done.count(AuditAction.TOOL_CALL_COMPENSATED) == 1
    assert AuditAction.STEP_LEASE_EXPIRED not in done
    assert AuditAction.LEASE_EXPIRED not in done
    assert verify_chain(AuditRecord.objects.filter(run_id=run.pk).order_by("seq")) is None
