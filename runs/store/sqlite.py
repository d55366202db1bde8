"""The demo's embedded database (SQLite, WAL, immediate transactions)."""

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from audit.models import AuditRecord

from ..models import Run, RunEvent, Step, Workflow
from .base import Store


class SqliteStore(Store):
    """The demo's embedded database. It lives in this machine's processes: its clock is
    this one, and a lock across processes is a file lock under VAR_DIR."""

    name = "sqlite"

    def session_lost(self, exc: Exception, session) -> bool:
        # A file: only one it cannot open is out of reach; "database is locked" or a missing
        # table is the statement's own error on a database that answers.
        return "unable to open database file" in str(exc)

    def next_run_id(self) -> int:
        # The run's id is in its first audit record's hash, so it is taken before the
        # insert: reserved in the table's AUTOINCREMENT counter, which no later insert
        # reuses (SQLite gives max(counter, largest id) + 1).
        table = Run._meta.db_table
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
            row = cursor.fetchone()
            cursor.execute(f"SELECT coalesce(max(id), 0) FROM {table}")
            run_id = max(row[0] if row else 0, cursor.fetchone()[0]) + 1
            if row:
                cursor.execute("UPDATE sqlite_sequence SET seq = %s WHERE name = %s",
                               [run_id, table])
            else:
                cursor.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)",
                               [table, run_id])
        return run_id

    def insert_run_if_new(self, *, run: Run, steps: list[dict], records: list[AuditRecord],
                          events: list[RunEvent], tombstones: str | None) -> int | None:
        # One immediate transaction: the key checks and the inserts hold the write lock.
        with transaction.atomic():
            if Run.objects.filter(workflow_name=run.workflow_name,
                                  business_key=run.business_key).exists():
                return None
            if tombstones:
                with connection.cursor() as cursor:
                    cursor.execute(f"SELECT 1 FROM {tombstones} "  # noqa: S608 - a table name
                                   "WHERE workflow_name = %s AND business_key = %s",
                                   [run.workflow_name, run.business_key])
                    if cursor.fetchone():
                        return None
            workflow, _ = Workflow.objects.get_or_create(name=run.workflow_name)
            run.workflow_id = workflow.pk
            run.save(force_insert=True)
            columns = {f.column: f.attname for f in Step._meta.concrete_fields}
            Step.objects.bulk_create([Step(**{columns[c]: v for c, v in row.items()})
                                      for row in steps])
            self.insert_rows(AuditRecord, records)
            self.insert_rows(RunEvent, events)
        return workflow.pk

    @contextlib.contextmanager
    def pass_lock(self, job: str, key: int) -> Iterator[bool]:
        path = Path(settings.VAR_DIR) / "locks" / f"{job}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def url(self) -> str:
        return f"sqlite:///{connection.settings_dict['NAME']}"
