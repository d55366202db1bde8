"""PostgreSQL, production's database: the store's methods, and the statements that make a
transition's writes one conditional statement, for the executor's hot path.

Recording a step's outcome together with the next step's intent costs, through the ORM, a
SELECT ... FOR UPDATE, two step UPDATEs, an audit INSERT and a run UPDATE between BEGIN and
COMMIT: seven round trips for one commit. On PostgreSQL the same writes fit in one statement
(data-modifying CTEs), which is its own transaction in autocommit. The run UPDATE's WHERE
does the work of the lock and the check: the run must still be in the status the lease
holder saw, under its fencing token, with the head of its audit chain unchanged (every
transition appends to the chain, so an unchanged head means nobody else touched the run).
The step updates and audit inserts only happen if that row matched. If it did not, nothing
is written and the caller takes the locking path, which sees what changed.
"""

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from functools import lru_cache
from operator import attrgetter

import orjson
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone
from psycopg import errors as pg_errors

from audit.models import AuditRecord

from ..models import Run, RunEvent, Step
from . import server_clock, transactions
from .base import Store
from .prepared import prepared_cursor, read_run_and_steps


# The field lists are asked for at every checkpoint: looked up once per process.
@lru_cache(maxsize=32)
def _fields(model, names: tuple) -> tuple:
    return tuple(model._meta.get_field(name) for name in names)


@lru_cache(maxsize=4)
def _inserted_fields(model) -> tuple:
    return tuple(f for f in model._meta.concrete_fields if not f.primary_key)


def _recordset(fields) -> str:
    return ", ".join(f"{f.column} {f.cast_db_type(connection)}" for f in fields)


# The run columns of a lease: when the statement renews the lease, they are stamped with the
# statement's clock (the server's, unless the caller gives a time), never a worker's.
# Whether it renews, and for how long, are c's columns: the run's columns then take one
# parameter each, in their order (_run_values).
_LEASE_COLUMNS = {
    "lease_expires_at": "CASE WHEN (SELECT renew FROM c) THEN (SELECT t + lease FROM c) "
                        "ELSE %s::timestamptz END",
    "heartbeat_at": "CASE WHEN (SELECT renew FROM c) THEN (SELECT t FROM c) "
                    "ELSE %s::timestamptz END",
}


@lru_cache(maxsize=8)
def _run_values(run_fields: tuple) -> Callable:
    return _values_of(_fields(Run, run_fields))


def _values_of(fields) -> Callable:
    """One getter of an object's values of `fields`, in their order (a tuple even for one
    field): asked for per field, they were a fifth of a checkpoint's calls."""
    getter = attrgetter(*(f.attname for f in fields))
    return getter if len(fields) > 1 else lambda obj: (getter(obj),)


@lru_cache(maxsize=8)
def _statement(run_fields: tuple, step_fields: tuple, with_events: bool) -> str:
    # Steps and audit records travel as one JSON array each (json_to_recordset), so the
    # statement has few parameters and one shape whatever the number of rows: psycopg and
    # the server keep it prepared. As json, not jsonb: the server reads the text once into
    # the columns, where jsonb's input first builds the whole document in its binary form
    # (about a twentieth of the backend's CPU a step). Status events come with a status
    # change only: a step's checkpoint has none, and the server would still open their
    # table and its indexes at every execution of a shape that may insert one (two shapes,
    # each prepared once).
    run_set = ", ".join(f"{f.column} = {_LEASE_COLUMNS[f.column]}" if f.column in _LEASE_COLUMNS
                        else f"{f.column} = %s::{f.cast_db_type(connection)}"
                        for f in _fields(Run, run_fields))
    steps = [Step._meta.pk, *_fields(Step, step_fields)]
    step_set = ", ".join(f"{f.column} = v.{f.column}" for f in steps[1:])
    audit = _inserted_fields(AuditRecord)
    audit_columns = ", ".join(f.column for f in audit)
    events = _inserted_fields(RunEvent)
    event_columns = ", ".join(f.column for f in events)
    return (
        # statement_timestamp(): the server's clock when this statement began, which a
        # claim's due time and a lease are judged and stamped by.
        "WITH c AS (SELECT coalesce(%s::timestamptz, statement_timestamp()) AS t, "
        "%s::boolean AS renew, %s::interval AS lease), "
        f"r AS (UPDATE {Run._meta.db_table} SET {run_set} "
        "WHERE id = %s::bigint AND fencing_token = %s::bigint AND status = %s "
        "AND audit_seq = %s::integer "
        "AND (NOT %s::boolean OR next_wake_at <= (SELECT t FROM c)) "
        "RETURNING id, lease_expires_at, heartbeat_at), "
        f"s AS (UPDATE {Step._meta.db_table} AS t SET {step_set} "
        f"FROM json_to_recordset(%s::json) AS v({_recordset(steps)}) "
        # The id list lets the planner use the primary key; it cannot guess how few rows
        # the recordset holds and would otherwise scan the whole table.
        "WHERE t.id = ANY(%s::bigint[]) AND t.id = v.id AND EXISTS (SELECT 1 FROM r) "
        "RETURNING t.id), "
        f"a AS (INSERT INTO {AuditRecord._meta.db_table} ({audit_columns}) "
        f"SELECT {audit_columns} FROM json_to_recordset(%s::json) AS v({_recordset(audit)}) "
        "WHERE EXISTS (SELECT 1 FROM r) RETURNING id) "
        + (f", e AS (INSERT INTO {RunEvent._meta.db_table} ({event_columns}) "
           f"SELECT {event_columns} FROM json_to_recordset(%s::json) "
           f"AS v({_recordset(events)}) WHERE EXISTS (SELECT 1 FROM r) RETURNING id) "
           if with_events else "") +
        # The stamped lease only when the statement stamped it: reading two timestamps back
        # at every checkpoint cost a tenth of a worker's CPU per step.
        "SELECT count(*), max(r.lease_expires_at) FILTER (WHERE c.renew), "
        "max(r.heartbeat_at) FILTER (WHERE c.renew) FROM r, c"
    )


def _json_default(value):
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} in a checkpoint")


# json.dumps with options would build a new encoder at each call.
_json_encode = json.JSONEncoder(default=_json_default, separators=(",", ":")).encode
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS


def _encode(rows) -> str:
    """The rows as one JSON array. orjson writes what json writes (a time as its ISO text,
    keys that are numbers as their text) in a fifth of the time: encoding was an eighth of
    a worker's CPU a step. What it refuses (an integer past 64 bits) json writes; a
    dataclass, which orjson would write as an object, goes to json, which refuses it as
    before (a row's fields are text, numbers, times and JSON already checked)."""
    try:
        return orjson.dumps(rows, option=_ORJSON_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return _json_encode(rows)


class _Rows:
    """Objects of a model as a statement's JSON array takes them: the columns written and
    the getter of an object's values for them."""

    def __init__(self, fields: tuple):
        self.columns = tuple(f.column for f in fields)
        self.values = _values_of(fields)

    def json(self, objects) -> str:
        columns, values = self.columns, self.values
        return _encode([dict(zip(columns, values(obj), strict=True)) for obj in objects])


@lru_cache(maxsize=32)
def _updated(model, names: tuple) -> _Rows:
    return _Rows((model._meta.pk, *_fields(model, names)))


@lru_cache(maxsize=4)
def _inserted(model) -> _Rows:
    return _Rows(_inserted_fields(model))


@lru_cache(maxsize=1)
def _started_run() -> _Rows:
    return _Rows(tuple(f for f in Run._meta.concrete_fields if f.attname != "workflow_id"))


def write_if_unchanged(*, run: Run, steps: list[Step], records: list[AuditRecord],
                       events: list[RunEvent], run_fields: list[str], step_fields: list[str],
                       expect_token: int, expect_status: str, expect_seq: int,
                       renew_lease: bool = False, wake_due: bool = False,
                       clock: datetime | None = None) -> bool:
    """Write the run, steps, audit records and status events in one statement if the run
    row still has the expected token, status and audit chain head (and, with `wake_due`,
    its wake-up time has come). With `renew_lease` the statement stamps the run's lease
    from its own clock, and the run object is given the stamped values. Returns whether
    anything was written."""
    sql = _statement(tuple(run_fields), tuple(step_fields), bool(events))
    lease = timedelta(seconds=settings.RUNS_LEASE_SECONDS)
    # The id list as PostgreSQL's text of an array: a list would be inspected by psycopg,
    # item by item, to choose its type, at every checkpoint.
    ids = "{" + ",".join([str(step.id) for step in steps]) + "}"
    params = [clock, renew_lease, lease, *_run_values(tuple(run_fields))(run),
              run.pk, expect_token, expect_status, expect_seq, wake_due,
              _updated(Step, tuple(step_fields)).json(steps), ids,
              _inserted(AuditRecord).json(records)]
    if events:
        params.append(_inserted(RunEvent).json(events))
    # Prepared: this always-identical statement is parsed and planned once per connection.
    with prepared_cursor() as cursor:
        cursor.execute(sql, params, prepare=True)
        matched, lease_expires_at, heartbeat_at = cursor.fetchone()
    if matched == 1 and renew_lease:
        run.lease_expires_at, run.heartbeat_at = lease_expires_at, heartbeat_at
    return matched == 1


def update_rows(model, objects: list, field_names: list[str]) -> None:
    """Write `field_names` of many rows of `model` in one statement (their values travel as
    one JSON array, as the checkpoint's do): the batch transitions' counterpart of
    save(update_fields=...) per row, without the CASE per row and field of bulk_update."""
    if not objects:
        return
    fields = [model._meta.pk, *_fields(model, tuple(field_names))]
    table = model._meta.db_table
    assignments = ", ".join(f"{f.column} = v.{f.column}" for f in fields[1:])
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS t SET {assignments} "
            f"FROM json_to_recordset(%s::json) AS v({_recordset(fields)}) "
            "WHERE t.id = ANY(%s::bigint[]) AND t.id = v.id",
            [_updated(model, tuple(field_names)).json(objects), [obj.pk for obj in objects]])


def insert_rows(model, objects: list) -> None:
    """Insert many new rows of `model` (audit records, run events) in one statement, their
    values one JSON array as the checkpoint's are: the batch transitions' counterpart of
    bulk_create, without a parameter per field and row. The rows' ids are not read back."""
    if not objects:
        return
    fields = _inserted_fields(model)
    columns = ", ".join(f.column for f in fields)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {model._meta.db_table} ({columns}) SELECT {columns} "
            f"FROM json_to_recordset(%s::json) AS v({_recordset(fields)})",
            [_inserted(model).json(objects)])


@lru_cache(maxsize=4)
def _start_statement(tombstones: str | None) -> str:
    # The run, its steps, its first audit record and its progress event in one statement, its
    # own transaction in autocommit. The run is inserted only if this statement's snapshot
    # holds neither a run nor a tombstone (runs.machine.retention) for the key; the rest only
    # if the run was.
    from ..models import Workflow

    run_fields = [f for f in Run._meta.concrete_fields if f.attname != "workflow_id"]
    run_columns = ", ".join(f.column for f in run_fields)
    steps = [f for f in Step._meta.concrete_fields if not f.primary_key]
    step_columns = ", ".join(f.column for f in steps)
    audit_columns = ", ".join(f.column for f in _inserted_fields(AuditRecord))
    event_columns = ", ".join(f.column for f in _inserted_fields(RunEvent))
    workflows, runs = Workflow._meta.db_table, Run._meta.db_table
    archived = (f"AND NOT EXISTS (SELECT 1 FROM {tombstones} "
                "WHERE workflow_name = %(workflow)s AND business_key = %(key)s) "
                if tombstones else "")
    return (
        f"WITH w AS (INSERT INTO {workflows} (name, created_at) "
        "VALUES (%(workflow)s, %(now)s) ON CONFLICT (name) DO NOTHING RETURNING id), "
        f"r AS (INSERT INTO {runs} ({run_columns}, workflow_id) "
        f"SELECT {run_columns}, coalesce((SELECT id FROM w), "
        f"(SELECT id FROM {workflows} WHERE name = %(workflow)s)) "
        f"FROM json_to_recordset(%(run)s::json) AS v({_recordset(run_fields)}) "
        f"WHERE NOT EXISTS (SELECT 1 FROM {runs} "
        "WHERE workflow_name = %(workflow)s AND business_key = %(key)s) "
        f"{archived}"
        "ON CONFLICT (workflow_name, business_key) DO NOTHING RETURNING id, workflow_id), "
        f"s AS (INSERT INTO {Step._meta.db_table} ({step_columns}) "
        f"SELECT {step_columns} FROM json_to_recordset(%(steps)s::json) "
        f"AS v({_recordset(steps)}) WHERE EXISTS (SELECT 1 FROM r)), "
        f"a AS (INSERT INTO {AuditRecord._meta.db_table} ({audit_columns}) "
        f"SELECT {audit_columns} FROM json_to_recordset(%(audit)s::json) "
        f"AS v({_recordset(_inserted_fields(AuditRecord))}) WHERE EXISTS (SELECT 1 FROM r)), "
        f"e AS (INSERT INTO {RunEvent._meta.db_table} ({event_columns}) "
        f"SELECT {event_columns} FROM json_to_recordset(%(events)s::json) "
        f"AS v({_recordset(_inserted_fields(RunEvent))}) WHERE EXISTS (SELECT 1 FROM r)) "
        # The id of this process's next run, taken now so that it costs no statement then.
        f"SELECT workflow_id, nextval(pg_get_serial_sequence('{runs}', 'id')) FROM r"
    )


# This process's next run id, per database, taken by the statement that inserted the last run.
_next_ids: dict[tuple, int] = {}


def _id_slot() -> tuple:
    return (connection.alias, connection.settings_dict["NAME"])


def next_run_id() -> int:
    """A run id from the run table's sequence, before the run exists: its first audit
    record's hash covers it. Taken by the previous insert_run_if_new of this process (one
    statement less per run); the first one of a process is asked for. An id so kept may be
    lower than ids other processes used meanwhile: run ids are unique, not in start order
    (created_at is)."""
    run_id = _next_ids.get(_id_slot())
    if run_id is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))",
                           [Run._meta.db_table])
            run_id = _next_ids[_id_slot()] = cursor.fetchone()[0]
    return run_id


def forget_run_id() -> None:
    """Drop the kept run id (a statement failed: the id may have been used)."""
    _next_ids.pop(_id_slot(), None)


def insert_run_if_new(*, run: Run, steps: list[dict], records: list[AuditRecord],
                      events: list[RunEvent], tombstones: str | None) -> int | None:
    """Insert `run` (its pk already taken from the sequence), its steps, audit records and
    events in one statement, unless its (workflow, business key) is taken by a run or by a
    tombstone in `tombstones`. Returns the run's workflow row id, or None if nothing was
    written. The workflow row is made if it is missing."""
    params = {
        "workflow": run.workflow_name, "key": run.business_key, "now": run.created_at,
        "run": _started_run().json([run]),
        "steps": json.dumps(steps, default=_json_default, separators=(",", ":")),
        "audit": _inserted(AuditRecord).json(records),
        "events": _inserted(RunEvent).json(events),
    }
    try:
        with prepared_cursor() as cursor:
            cursor.execute(_start_statement(tombstones), params, prepare=True)
            row = cursor.fetchone()
    except Exception:
        forget_run_id()
        raise
    if row is None:
        return None  # the kept id is still unused
    _next_ids[_id_slot()] = row[1]
    return row[0]


class PostgresStore(Store):
    name = "postgresql"

    # The clock: workers' clocks drift and can be wrong by minutes; the database server is one
    # clock all workers share. Statements that judge a lease use the server's now() inside the
    # statement. Times a transition stamps in Python (a claim's lease, the next attempt, audit
    # times) come from now(): this process's clock corrected by its offset from the server's,
    # measured again every REMEASURE_SECONDS (a worker whose clock jumps is corrected within
    # that time, at one short query per interval, not one per transition).
    REMEASURE_SECONDS, STEP_SECONDS = 30.0, 0.5
    open_transactions = staticmethod(transactions.open_transactions)
    transaction_id = staticmethod(transactions.transaction_id)
    server_now = staticmethod(server_clock.server_now)

    def __init__(self):
        self._clock_lock = threading.Lock()
        self._offset: timedelta | None = None
        self._measured_at, self._measured_wall = 0.0, timezone.now()

    def update_rows(self, model, objects: list, field_names: list[str]) -> None:
        # One statement per table, the values one JSON array (below).
        update_rows(model, objects, field_names)

    def insert_rows(self, model, objects: list) -> None:
        insert_rows(model, objects)

    def read_run_and_steps(self, run_id: int) -> tuple[Run | None, list[Step]]:
        return read_run_and_steps(run_id)

    def write_if_unchanged(self, **rows) -> bool:
        # One statement: in autocommit its own transaction, the commit of the hot path.
        return write_if_unchanged(**rows)

    def transaction_lock(self, key: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])

    next_run_id = staticmethod(next_run_id)
    forget_run_id = staticmethod(forget_run_id)
    insert_run_if_new = staticmethod(insert_run_if_new)

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
        wall, since = timezone.now(), time.monotonic() - self._measured_at
        # This host's clock stepped (by hand, a VM resumed) if it moved otherwise than the
        # monotonic clock since the measurement: measured again at once, not up to 30 s on,
        # while a lease, a backoff, a lookup's trust time would be stamped off by the step.
        if self._offset is None or since > self.REMEASURE_SECONDS or abs(
                (wall - self._measured_wall).total_seconds() - since) > self.STEP_SECONDS:
            self.measure_clock()
        return timezone.now() + self._offset

    def measure_clock(self) -> None:
        with self._clock_lock:
            before, server, after = timezone.now(), self.server_now(), timezone.now()
            self._offset = server - (before + (after - before) / 2)
            self._measured_at, self._measured_wall = time.monotonic(), after

    lock_wait_statements = ("SELECT set_config('lock_timeout', %s, false)", "RESET lock_timeout")

    @contextlib.contextmanager
    def pass_lock(self, job: str, key: int) -> Iterator[bool]:
        # A session-level advisory lock (runs.machine.single_pass says why and its price).
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

    def executing_by_step(self, run_id: int) -> dict[str, timedelta]:
        with connection.cursor() as cursor:
            cursor.execute(_EXECUTING_SQL.format(
                table=connection.ops.quote_name(AuditRecord._meta.db_table)),
                [run_id])
            return dict(cursor.fetchall())

    def url(self) -> str:
        db = connection.settings_dict
        auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
        return f"postgres://{auth}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"


# Each ended attempt's time (its record carries when it started), summed per step, in one
# query; a tool call's records carry its own attempts (within its step's): not counted.
_EXECUTING_SQL = """
SELECT step_name, SUM(created_at - (data->>'started_at')::timestamptz)
FROM {table}
WHERE run_id = %s AND step_name <> '' AND data->>'started_at' IS NOT NULL
  AND data->>'tool_call' IS NULL
GROUP BY step_name
"""
