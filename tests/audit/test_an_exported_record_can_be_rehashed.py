"""The audit CSV carries everything a record's hash covers, JSON columns as JSON: an auditor
re-hashes each exported row, without the database, and sees the evidence the record holds.
A cell is read back with its one quote taken back (audit.csv_export.cell_value): a reason a
person began with "-", "=" or a quote, written with a quote before it so that no spreadsheet
runs it, still hashes as it was made."""

import csv
import io
import json
from datetime import datetime

import pytest

from audit.chain import Actor, record_hash
from audit.csv_export import audit_csv_lines, cell_value
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def exported(run) -> list[dict]:
    records = AuditRecord.objects.filter(run=run).order_by("seq")
    rows = csv.DictReader(io.StringIO("".join(audit_csv_lines(records))))
    return [{name: cell_value(cell) for name, cell in row.items()} for row in rows]


def rehashes(row: dict) -> bool:
    user = row["actor_user_id"]
    return row["hash"] == record_hash(
        run_id=int(row["run"]), seq=int(row["seq"]), action=row["action"],
        step_name=row["step"], actor_kind=row["actor_kind"], actor_label=row["actor"],
        actor_user_id=int(user) if user else None, reason=row["reason"],
        before=json.loads(row["before"]), after=json.loads(row["after"]),
        data=json.loads(row["data"]), created_at=datetime.fromisoformat(row["time"]),
        prev_hash=row["prev_hash"])


def test_every_exported_row_hashes_to_its_hash_and_carries_its_data():
    run = new_run()
    executor.advance_run(run.pk, worker="w1")

    rows = exported(run)

    assert len(rows) == AuditRecord.objects.filter(run=run).count() >= 5
    assert all(rehashes(row) for row in rows)
    succeeded = [row for row in rows if row["action"] == "succeeded"]
    assert succeeded and all(json.loads(row["data"])["key"] for row in succeeded)


@pytest.mark.parametrize("reason", ["-1 duplicate of INV-7", "=2 invoices", "'-1 quoted",
                                    "'plain"])
def test_a_reason_a_spreadsheet_would_run_or_that_begins_with_a_quote_rehashes(reason):
    run = new_run("test-orders", wake=False)
    transitions.terminate(run.pk, actor=Actor.system("operator"), reason=reason,
                          approved_by=Actor.system("second"))

    rows = exported(run)

    assert [row["reason"] for row in rows if row["reason"]][-1] == reason
    assert all(rehashes(row) for row in rows)
