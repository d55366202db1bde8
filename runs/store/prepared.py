"""PostgreSQL's prepared statements on Django's connection, for the executor's hot path:
the one cursor they go through, and the claim's read of a run and its steps (its write, the
checkpoint statement, is runs.store.postgres's)."""

import contextlib
import threading
import weakref
from datetime import UTC
from functools import lru_cache, partial

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import signals
from django.db.models.base import ModelState
from psycopg.types.datetime import TimestamptzLoader

from ..models import Run, Step

# The psycopg connections told to keep one generic plan per prepared statement.
_generic_plans: weakref.WeakSet = weakref.WeakSet()
# This thread's psycopg cursor and the connection it is on (below).
_kept = threading.local()


@contextlib.contextmanager
def prepared_cursor():
    """psycopg's own cursor on Django's connection (the thread's own, not the proxy, whose
    every attribute is a lookup): it binds parameters on the server, so `execute(...,
    prepare=True)` parses and plans a statement once per connection (settings:
    prepare_threshold; without it psycopg ignores prepare=True). A new connection (after a
    health check or a lost session) prepares its statements again. One cursor per thread
    serves every statement on its connection: a new one would look up the dumpers and
    loaders of every parameter and column again, a tenth of a checkpoint's calls.

    PostgreSQL would still re-plan the checkpoint at every execution: its generic plan's
    estimate (the step id list) looks dearer than a custom one, though both take the same
    primary keys. force_generic_plan, set once per session, keeps the one plan; it touches
    prepared statements only, and the ORM's queries are not prepared (client-side binding).
    wrap_database_errors: a lost connection raises Django's OperationalError and marks the
    connection for the check that replaces it, as with any ORM statement."""
    db = connections[DEFAULT_DB_ALIAS]  # `connection` stands for this one
    if db.connection is None:
        db.ensure_connection()
    raw = db.connection
    if getattr(_kept, "connection", None) is not raw:
        _kept.connection, _kept.cursor = raw, _new_cursor(db, raw)
    cursor = _kept.cursor
    with db.wrap_database_errors:
        if raw not in _generic_plans:
            # Transactional, like any SET: the session counts as set once it has committed
            # (at once in autocommit; never inside a test's transaction, which sets it again
            # at each statement).
            cursor.execute("SET plan_cache_mode = force_generic_plan")
            transaction.on_commit(partial(_generic_plans.add, raw))
        yield cursor


def _new_cursor(db, raw: psycopg.Connection) -> psycopg.Cursor:
    cursor = psycopg.Cursor(raw)
    # Django reads a timestamptz with a subclass of psycopg's loader that sets its own time
    # zone (UTC) on each value: a Python class, where psycopg's own has a C version, which
    # is then not used (the claim reads a dozen timestamps a step). In a session whose time
    # zone is UTC too, as Django sets it, psycopg's own loader gives the same values
    # (aware, in datetime.UTC): this cursor uses it.
    if db.timezone is UTC and raw.info.parameter_status("TimeZone") == "UTC":
        cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
    return cursor


@lru_cache(maxsize=1)
def _claim_read() -> tuple[str, "_Loader", "_Loader"]:
    steps, runs = Step._meta.concrete_fields, Run._meta.concrete_fields
    columns = ", ".join([f"s.{f.column}" for f in steps] + [f"r.{f.column}" for f in runs])
    return (f"SELECT {columns} FROM {Step._meta.db_table} s "
            f"JOIN {Run._meta.db_table} r ON r.id = s.run_id "
            "WHERE s.run_id = %s::bigint ORDER BY s.position",
            _Loader(Step, 0), _Loader(Run, len(steps)))


class _Loader:
    """Model instances from a slice of a row, as the ORM's from_db makes them (the same
    field converters, e.g. JSONField's), without compiling a query per read and, when no
    receiver listens to pre_init/post_init, without Model.__init__'s per-field work."""

    def __init__(self, model, start: int):
        fields = model._meta.concrete_fields
        self.model, self.start, self.stop = model, start, start + len(fields)
        self.attnames = [f.attname for f in fields]
        self.converters = [(i, f.from_db_value) for i, f in enumerate(fields)
                           if hasattr(f, "from_db_value")]

    def __call__(self, row, alias: str):
        values = list(row[self.start:self.stop])
        for i, convert in self.converters:
            values[i] = convert(values[i], None, connection)
        model = self.model
        if signals.pre_init.has_listeners(model) or signals.post_init.has_listeners(model):
            return model.from_db(alias, None, values)
        instance = model.__new__(model)
        instance.__dict__.update(zip(self.attnames, values, strict=True))
        state = instance._state = ModelState()
        state.adding, state.db = False, alias
        return instance


def read_run_and_steps(run_id: int) -> tuple[Run | None, list[Step]]:
    """The run and its steps in position order (each step's .run is the run), by one
    prepared statement: what the claim reads, through the ORM, cost about as much CPU as the
    rest of the claim. (None, []) when the run has no steps; the caller asks for the run."""
    sql, load_step, load_run = _claim_read()
    with prepared_cursor() as cursor:
        cursor.execute(sql, [run_id], prepare=True)
        rows = cursor.fetchall()
    if not rows:
        return None, []
    alias = connection.alias
    run = load_run(rows[0], alias)
    steps = [load_step(row, alias) for row in rows]
    for step in steps:
        step.run = run
    return run, steps
