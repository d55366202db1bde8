"""What a refused request must leave exactly as it was.

The product's state, field by field: every run (status, audit_seq, fencing_token), every
step (status, attempt), the number of audit records, every approval request (status).
And, more broadly, every table: PostgreSQL counts the rows the current transaction
inserted, updated and deleted in each table (pg_stat_xact_user_tables, live within the
transaction every test runs in), so a refused request that wrote anything anywhere shows.
One query per snapshot: the matrix takes two for each of its thousands of cases.
"""

import json
from dataclasses import dataclass

from django.db import connection

from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from runs.models import Run, Step

_SQL = f"""
SELECT
  (SELECT coalesce(json_agg(json_build_array(id, status, audit_seq, fencing_token)
                            ORDER BY id), '[]') FROM {Run._meta.db_table}),
  (SELECT coalesce(json_agg(json_build_array(id, status, attempt) ORDER BY id), '[]')
     FROM {Step._meta.db_table}),
  (SELECT count(*) FROM {AuditRecord._meta.db_table}),
  (SELECT coalesce(json_agg(json_build_array(id, status) ORDER BY id), '[]')
     FROM {ApprovalRequest._meta.db_table}),
  (SELECT coalesce(json_object_agg(relid::regclass::text, n), '{{}}') FROM (
     SELECT relid, pg_stat_get_xact_tuples_inserted(relid)
                   + pg_stat_get_xact_tuples_updated(relid)
                   + pg_stat_get_xact_tuples_deleted(relid) AS n
       FROM unnest(%s::oid[]) AS relid) AS counted WHERE n > 0)
"""
# The tables: those pg_stat_xact_user_tables lists (looked up once; its own query costs
# more than the rest of the snapshot).
_TABLES = """
SELECT array_agg(relid) FROM pg_stat_xact_user_tables
"""
_tables: list[int] | None = None


def _rows(value) -> tuple:
    rows = json.loads(value) if isinstance(value, str) else value
    return tuple(tuple(row) for row in rows)


@dataclass(frozen=True)
class Snapshot:
    runs: tuple  # (id, status, audit_seq, fencing_token)
    steps: tuple  # (id, status, attempt)
    audit_records: int
    approvals: tuple  # (id, status)
    writes: dict  # table -> rows inserted, updated or deleted so far in this transaction

    def product(self) -> tuple:
        return self.runs, self.steps, self.audit_records, self.approvals

    def product_changes(self, later: "Snapshot") -> list[str]:
        said = []
        for name, mine, theirs in zip(("runs", "steps", "audit records", "approval requests"),
                                      self.product(), later.product(), strict=True):
            if mine != theirs:
                said.append(f"{name}: {_difference(mine, theirs)}")
        return said

    def tables_written(self, later: "Snapshot") -> dict[str, int]:
        return {table: n - self.writes.get(table, 0) for table, n in later.writes.items()
                if n != self.writes.get(table, 0)}


def _difference(before, after) -> str:
    if isinstance(before, int):
        return f"{before} -> {after}"
    return f"was {sorted(set(before) - set(after))}, now {sorted(set(after) - set(before))}"


def snapshot() -> Snapshot:
    global _tables
    with connection.cursor() as cursor:
        if _tables is None:
            cursor.execute(_TABLES)
            _tables = cursor.fetchone()[0]
        cursor.execute(_SQL, [_tables])
        runs, steps, audit_records, approvals, writes = cursor.fetchone()
    return Snapshot(runs=_rows(runs), steps=_rows(steps), audit_records=audit_records,
                    approvals=_rows(approvals),
                    writes=json.loads(writes) if isinstance(writes, str) else writes)
