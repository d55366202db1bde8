"""The database behind the runtime, as one object: PostgreSQL in production, SQLite (WAL,
immediate transactions) for the one-command demo. Every difference between the two lives
here, behind the same methods on both; the kernel and its helpers ask `current()` and never
which database they are on (tests/runs/test_one_dialect.py keeps it so).

Where PostgreSQL has a cheaper way, it takes it: a transition's writes in one statement
(runs.checkpoint_sql), the clock of the database server, advisory locks, repeatable-read
snapshots. SQLite reaches the same outcomes through the ORM: its transactions are immediate
(console.settings), so the first statement of a transaction already holds the database's
one write lock, the lock PostgreSQL takes per row with SELECT ... FOR UPDATE.

The store tests (tests/runs/test_store.py) run on both databases in `make test`.
"""

import abc
import contextlib
import fcntl
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone
from psycopg import errors as pg_errors

from audit.actions import AuditAction
from audit.models import AuditRecord

from . import checkpoint_sql
from .models import Run, RunEvent, Step, Workflow


class Store(abc.ABC):
    """One interface for both databases. Its bodies are the ORM's way, which SQLite takes;
    PostgresStore overrides them where it has a cheaper one."""

    name = ""

    # --- the one transaction skeleton ---------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[None]:
        """A transition's transaction: durable (its own commit, refused inside another
        transaction) unless the caller joins it to its own (kernel.within_caller_transaction)."""
        with transaction.atomic(durable=durable):
            yield

    @contextlib.contextmanager
    def locked_run(self, run_id: int, *, durable: bool = True) -> Iterator[Run | None]:
        """The skeleton of a transition on an existing run: a transaction whose first
        statement locks the run; yields it (None if there is no such run). Whatever the
        body writes commits with it, or nothing does if the body raises."""
        with self.transaction(durable=durable):
            yield self.lock_run(run_id)

    def lock_run(self, run_id: int) -> Run | None:
        """The run, locked until the transaction ends. On SQLite select_for_update is
        ignored: the immediate transaction holds the write lock already."""
        return Run.objects.select_for_update().filter(pk=run_id).first()

    def lock_runs(self, queryset, *, skip_locked: bool = False) -> list:
        """The rows of `queryset`, locked (those another transaction holds skipped, if
        `skip_locked`): batches lock in the order the caller gives, so two cannot deadlock."""
        return list(queryset.select_for_update(skip_locked=skip_locked))

    def transaction_lock(self, key: int) -> None:
        """Serialise, until the transaction ends, every transaction that takes `key`. Here
        (SQLite) there is nothing to take: an immediate transaction already excludes every
        other writer."""
        return None

    # --- writes of a transition -----------------------------------------------------------

    def update_rows(self, model, objects: list, field_names: list[str]) -> None:
        """Write `field_names` of each of `objects` (rows of `model`)."""
        for obj in objects:
            obj.save(update_fields=field_names)

    def insert_rows(self, model, objects: list) -> None:
        """Insert new rows of `model` (audit records, run events); ids are not read back."""
        if objects:
            model.objects.bulk_create(objects)

    def read_run_and_steps(self, run_id: int) -> tuple[Run | None, list[Step]]:
        """The run and its steps in position order (each step's .run is the run);
        (None, []) when the run has no steps."""
        steps = list(Step.objects.filter(run_id=run_id).select_related("run")
                     .order_by("position"))
        if not steps:
            return None, []
        run = steps[0].run
        for step in steps:
            step.run = run
        return run, steps

    def write_if_unchanged(self, *, run: Run, steps: list[Step], records: list[AuditRecord],
                           events: list[RunEvent], run_fields: list[str],
                           step_fields: list[str], expect_token: int, expect_status: str,
                           expect_seq: int) -> bool:
        """Write the run, steps, audit records and status events if the run row still has
        the expected fencing token, status and audit chain head (every transition appends
        to the chain: an unchanged head means nobody else touched the run), all or nothing.
        Returns whether anything was written."""
        with transaction.atomic():
            values = {name: getattr(run, Run._meta.get_field(name).attname)
                      for name in run_fields}
            matched = Run.objects.filter(
                pk=run.pk, fencing_token=expect_token, status=expect_status,
                audit_seq=expect_seq).update(**values)
            if matched != 1:
                return False
            self.update_rows(Step, steps, step_fields)
            self.insert_rows(AuditRecord, records)
            self.insert_rows(RunEvent, events)
        return True

    # --- starting a run -------------------------------------------------------------------

    @abc.abstractmethod
    def next_run_id(self) -> int:
        """An id for a run about to be inserted, which no other run has or will get: its
        first audit record's hash covers it, so it is taken before the insert."""

    def forget_run_id(self) -> None:
        """Drop an id kept for the next run (a statement failed: it may have been used)."""
        return None

    @abc.abstractmethod
    def insert_run_if_new(self, *, run: Run, steps: list[dict], records: list[AuditRecord],
                          events: list[RunEvent], tombstones: str | None) -> int | None:
        """Insert `run` (its pk from next_run_id), its steps (column dicts), audit records
        and events, all or nothing, in a transaction of their own, unless its (workflow,
        business key) is taken by a run or by a tombstone in the table `tombstones`. Returns
        the run's workflow row id (the row is made if missing), or None if nothing was
        written."""

    def start_may_try_again(self, exc: IntegrityError) -> bool:
        """Whether insert_run_if_new failed for a reason its next try does not meet again."""
        return False

    # --- time, locks across processes, snapshots ----------------------------------------

    def now(self) -> datetime:
        """The time leases and due times are judged by: the database's clock (an embedded
        database lives in this process: its clock is this one)."""
        return timezone.now()

    @abc.abstractmethod
    def pass_lock(self, job: str, key: int) -> contextlib.AbstractContextManager[bool]:
        """Hold `job`'s lock (or `key`'s) for the block if nobody else does, across every
        process; the context yields whether it is held (runs.single_pass)."""

    @contextlib.contextmanager
    def snapshot(self, *, fast_aggregates: bool = False) -> Iterator[None]:
        """A read-only transaction whose reads all see one snapshot."""
        with transaction.atomic():
            yield

    def allow_archival_removal(self, archive_sha256: str) -> None:
        """In the caller's transaction: let it delete the audit records of runs tombstoned
        to the archive file with this digest (the append-only guard refuses anything else;
        SQLite has no such guard)."""
        return None

    def executing_by_step(self, run_id: int, now: datetime) -> dict[str, timedelta]:
        """{step name: time spent between each intent and the record after it} of a run,
        an intent still open counting until `now` (console.step_times)."""
        totals: dict[str, timedelta] = {}
        open_intents: dict[str, datetime] = {}
        records = (AuditRecord.objects.filter(run_id=run_id).exclude(step_name="")
                   .order_by("seq").values_list("step_name", "action", "created_at"))
        for name, action, at in records:
            began = open_intents.pop(name, None)
            if began is not None:
                totals[name] = totals.get(name, timedelta(0)) + (at - began)
            if action == AuditAction.INTENT:
                open_intents[name] = at
        for name, began in open_intents.items():
            totals[name] = totals.get(name, timedelta(0)) + (now - began)
        return totals

    @abc.abstractmethod
    def url(self) -> str:
        """A DATABASE_URL for a child process to reach this same database."""


class PostgresStore(Store):
    name = "postgresql"

    # The clock: workers' clocks drift and can be wrong by minutes; the database server is
    # one clock all workers share. Statements that judge a lease (expiry, heartbeat) use the
    # server's now() inside the statement. Times a transition stamps in Python (a claim's
    # lease, the next attempt, audit times) come from now(): this process's clock corrected
    # by its measured offset from the server's, measured again every REMEASURE_SECONDS so a
    # worker whose clock jumps is corrected within that time, at the cost of one short
    # query per interval, not one per transition.
    REMEASURE_SECONDS = 30.0

    def __init__(self):
        self._clock_lock = threading.Lock()
        self._offset: timedelta | None = None
        self._measured_at = 0.0

    def update_rows(self, model, objects: list, field_names: list[str]) -> None:
        # One statement per table, the values one JSON array (runs.checkpoint_sql).
        checkpoint_sql.update_rows(model, objects, field_names)

    def insert_rows(self, model, objects: list) -> None:
        checkpoint_sql.insert_rows(model, objects)

    def read_run_and_steps(self, run_id: int) -> tuple[Run | None, list[Step]]:
        return checkpoint_sql.read_run_and_steps(run_id)

    def write_if_unchanged(self, **rows) -> bool:
        # One statement: in autocommit its own transaction, the commit of the hot path.
        return checkpoint_sql.write_if_unchanged(**rows)

    def transaction_lock(self, key: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])

    def next_run_id(self) -> int:
        return checkpoint_sql.next_run_id()

    def forget_run_id(self) -> None:
        checkpoint_sql.forget_run_id()

    def insert_run_if_new(self, **rows) -> int | None:
        return checkpoint_sql.insert_run_if_new(**rows)

    def start_may_try_again(self, exc: IntegrityError) -> bool:
        # The kept run id was taken after all (the sequence was reset, as tests may do; it
        # is forgotten and the next try asks the sequence), or the workflow's row was made
        # by another start that committed while this statement waited on it, a row this
        # statement's snapshot cannot see (its run came out without a workflow).
        cause = exc.__cause__
        if isinstance(cause, pg_errors.NotNullViolation):
            return cause.diag.column_name == "workflow_id"
        return "pkey" in str(exc)

    def now(self) -> datetime:
        if self._offset is None or time.monotonic() - self._measured_at > self.REMEASURE_SECONDS:
            with self._clock_lock:
                before = timezone.now()
                with connection.cursor() as cursor:
                    cursor.execute("SELECT clock_timestamp()")
                    server = cursor.fetchone()[0]
                after = timezone.now()
                self._offset = server - (before + (after - before) / 2)
                self._measured_at = time.monotonic()
        return timezone.now() + self._offset

    @contextlib.contextmanager
    def pass_lock(self, job: str, key: int) -> Iterator[bool]:
        # A session-level advisory lock, released when the pass ends, or by the server
        # when the worker's session dies. It needs a session of its own: behind a
        # transaction-pooling PgBouncer, point workers at PostgreSQL itself.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            (held,) = cursor.fetchone()
        try:
            yield held
        finally:
            if held:
                # A session that died during the pass took its lock with it.
                with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [key])

    @contextlib.contextmanager
    def snapshot(self, *, fast_aggregates: bool = False) -> Iterator[None]:
        with transaction.atomic(), connection.cursor() as cursor:
            # Repeatable read, so every statement sees the one snapshot (under read
            # committed each has its own); settable only as the transaction's first
            # statement, so not inside a caller's transaction, whose snapshot it is.
            if len(connection.atomic_blocks) == 1:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            if fast_aggregates:
                # Aggregates along index ranges run in milliseconds, but a planner that
                # overestimates one crosses jit_above_cost (40 ms compiling it) or prefers
                # a parallel scan of a whole table: workers would only add their start-up.
                cursor.execute("SET LOCAL jit = off")
                cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            yield

    def allow_archival_removal(self, archive_sha256: str) -> None:
        # Transaction-local: the audit trigger lets this transaction delete the records of
        # runs tombstoned to this file, and nothing else.
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('audit.archival', %s, true)", [archive_sha256])

    def executing_by_step(self, run_id: int, now: datetime) -> dict[str, timedelta]:
        with connection.cursor() as cursor:
            cursor.execute(_EXECUTING_SQL.format(
                table=connection.ops.quote_name(AuditRecord._meta.db_table)),
                [now, run_id, AuditAction.INTENT])
            return dict(cursor.fetchall())

    def url(self) -> str:
        db = connection.settings_dict
        auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
        return f"postgres://{auth}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"


# Each intent's time until the step's next record, summed per step, in one query.
_EXECUTING_SQL = """
SELECT step_name, SUM(COALESCE(next_at, %s) - created_at)
FROM (SELECT step_name, action, created_at,
             LEAD(created_at) OVER (PARTITION BY step_name ORDER BY seq) AS next_at
      FROM {table} WHERE run_id = %s AND step_name <> '') AS attempts
WHERE action = %s
GROUP BY step_name
"""


class SqliteStore(Store):
    """The demo's embedded database. It lives in this machine's processes: its clock is
    this one, and a lock across processes is a file lock under VAR_DIR."""

    name = "sqlite"

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


_STORES = {"postgresql": PostgresStore(), "sqlite": SqliteStore()}


def current() -> Store:
    """The store of the default database (the one place that asks which it is)."""
    return _STORES[connection.vendor]
