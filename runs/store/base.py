"""The store's interface, with the ORM's way of each method (what SQLite uses)."""

import abc
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import CharField, Func
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from audit.models import AuditRecord

from ..error_text import first_line
from ..models import Run, RunEvent, Step
from . import read_only
from .json_parts import JsonArrayLength, JsonArrayPart, JsonWith

logger = logging.getLogger(__name__)

# Small writes of this process waiting to ride along its next transition transaction,
# by name (see join_next_transaction).
_joined: dict[str, Callable[[], None]] = {}
_joined_lock = threading.Lock()


def join_next_transaction(name: str, write: Callable[[], None]) -> None:
    """Have `write` done inside the next transition transaction of this process (any
    thread's), instead of in a transaction and a commit of its own: the worker registry's
    beat while the worker is busy (runs.reads.workers.Heartbeat). A write joined again under
    the same name before it ran is done once. It runs in a savepoint: its failure is logged
    and never fails the transition it rode along with."""
    with _joined_lock:
        _joined[name] = write


def withdraw_joined(name: str) -> bool:
    """Take back the write joined under `name`; whether it was still waiting."""
    with _joined_lock:
        return _joined.pop(name, None) is not None


JOINED_WRITES = "a write joined to a transition's transaction"


def _do_joined_writes() -> None:
    # The package's rule, imported here: the package imports this module as it loads.
    from . import session_ended

    with _joined_lock:
        writes = list(_joined.items())
        _joined.clear()
    for name, write in writes:
        try:
            with transaction.atomic():
                write()
        except DatabaseError as exc:
            if read_only.refuses_writes(exc):
                read_only.refused(logger, JOINED_WRITES, exc)
                continue
            if session_ended(exc):
                # Killed, a restart, a failover: said in one line, as the heartbeat and the
                # tasks say it; the transition's own statements meet the same dead session.
                logger.warning("%s (%s) was not written: the database session ended (%s); "
                               "the transition fails with it, and its writer joins it "
                               "again to a later one", JOINED_WRITES, name,
                               first_line(exc))
                continue
            logger.warning("a write joined to a transition's transaction failed",
                           exc_info=True)
        else:
            read_only.went_through(logger, JOINED_WRITES)


class Store(abc.ABC):
    """One interface for both databases. Its bodies are the ORM's way, which SQLite takes;
    PostgresStore overrides them where it has a cheaper one."""

    name = ""

    @property
    def tells_lost_commits(self) -> bool:
        """Whether a transaction's fate can be asked on a new session after its COMMIT's
        answer was lost (runs.execution.lost_commit): PostgreSQL answers by transaction id;
        SQLite commits in the process, with no answer to lose."""
        return self.name == "postgresql"

    # --- the one transaction skeleton ---------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[None]:
        """A transition's transaction: durable (its own commit, refused inside another
        transaction) unless the caller joins it to its own (kernel.within_caller_transaction).
        A durable one first does the writes joined to it (join_next_transaction)."""
        with transaction.atomic(durable=durable):
            if durable and _joined:
                _do_joined_writes()
            yield

    def lock_run(self, run_id: int, *, skip_held: bool = False) -> Run | None:
        """The run, locked until the transaction ends, with `locked_at`: the database's
        clock when the locking statement began (the time a lease holder's transition
        renews its lease by). `skip_held`: None at once, instead of waiting, while another
        transaction holds it. On SQLite select_for_update is ignored: the immediate
        transaction holds the write lock already."""
        return Run.objects.select_for_update(skip_locked=skip_held).annotate(
            locked_at=Now()).filter(pk=run_id).first()

    def lock_runs(self, queryset, *, skip_locked: bool = False) -> list:
        """The rows of `queryset`, locked (those another transaction holds skipped, if
        `skip_locked`): batches lock in the order the caller gives, so two cannot deadlock."""
        return list(queryset.select_for_update(skip_locked=skip_locked))

    # The statements that bound this session's wait for a row another transaction holds
    # and that end the bound (PostgreSQL's lock_timeout); none here: SQLite's writers wait
    # on its busy timeout already.
    lock_wait_statements: tuple[str, str] | None = None

    @contextlib.contextmanager
    def lock_wait_at_most(self, seconds: float) -> Iterator[None]:
        """Inside, this session waits at most `seconds` (0: without end) for a row another
        transaction holds; past it the statement fails (would_not_wait), and its
        transaction with it."""
        if self.lock_wait_statements is None or seconds <= 0:
            yield
            return
        bound, unbound = self.lock_wait_statements
        with connection.cursor() as cursor:
            cursor.execute(bound, [str(round(seconds * 1000))])
        try:
            yield
        finally:
            with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                cursor.execute(unbound)

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
                           expect_seq: int, renew_lease: bool = False, wake_due: bool = False,
                           clock: datetime | None = None) -> bool:
        """Write the run, steps, audit records and status events if the run row still has
        the expected fencing token, status and audit chain head (every transition appends
        to the chain: an unchanged head means nobody else touched the run), all or nothing;
        with `wake_due`, only if the run's wake-up time has come. With `renew_lease` the
        run's lease is stamped from the database's clock (or `clock`, a caller's time), and
        the run object is given the stamped values. Returns whether anything was written.

        Here (SQLite, the demo's embedded database) the database's clock is this machine's."""
        at = clock or timezone.now()
        if renew_lease:
            run.lease_expires_at = at + timedelta(seconds=settings.RUNS_LEASE_SECONDS)
            run.heartbeat_at = at
        with transaction.atomic():
            values = {name: getattr(run, Run._meta.get_field(name).attname)
                      for name in run_fields}
            due = {"next_wake_at__lte": at} if wake_due else {}
            matched = Run.objects.filter(
                pk=run.pk, fencing_token=expect_token, status=expect_status,
                audit_seq=expect_seq, **due).update(**values)
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

    def session_lost(self, exc: Exception, session) -> bool:
        """Whether `exc`, a connection error raised on the open `session`, says the database
        cannot be reached rather than that a statement failed (runs.execution
        .database_outage): a database server's session that psycopg marks closed or broken
        under it (the server or the network went)."""
        return session.closed or session.broken

    # --- time, locks across processes, snapshots ----------------------------------------

    def now(self) -> datetime:
        """The time leases and due times are judged by: the database's clock (an embedded
        database lives in this process: its clock is this one)."""
        return timezone.now()

    def measure_clock(self) -> None:
        """Measure this process's offset from the database's clock now, which now() does by
        itself once every while. Nothing to measure where the database's clock is this
        process's."""
        return None

    def server_now(self) -> datetime:
        """The database's clock read now, in a query of its own where it is another host's:
        what a wait's duration is counted from. now(), the estimate, runs behind or ahead
        for a while after this host's clock stepped; a sleep counted from it would end early
        or late by the step. An embedded database's clock is this process's."""
        return timezone.now()

    def open_transactions(self) -> tuple[int, bool] | None:
        """(the oldest transaction id of another session still open, or the next to be
        given when none is; whether this session has no transaction id yet): on PostgreSQL
        (runs.store.transactions). None on a database with one writer at a time (SQLite,
        the demo's): a writer holds the whole database until it ends, so no id is visible
        above one that may still commit, and an id rolled back is drawn again."""
        return None

    def transaction_id(self) -> int | None:
        """This transaction's id, given now if it had none; None where transactions have
        no ids to compare (a database with one writer at a time, as open_transactions)."""
        return None

    @abc.abstractmethod
    def pass_lock(self, job: str, key: int) -> contextlib.AbstractContextManager[bool]:
        """Hold `job`'s lock (or `key`'s) for the block if nobody else does, across every
        process; the context yields whether it is held (runs.machine.single_pass)."""

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

    def executing_by_step(self, run_id: int) -> dict[str, timedelta]:
        """{step name: the time its ended attempts took}: each attempt's one record (its
        outcome, or the take-back of its lease) carries when it started; a tool call's
        records carry its own attempts, within its step's, and are not counted
        (console.step_times; an attempt still in flight is counted there from its row)."""
        totals: dict[str, timedelta] = {}
        records = (AuditRecord.objects.filter(run_id=run_id).exclude(step_name="")
                   .values_list("step_name", "data", "created_at"))
        for name, data, at in records:
            began = (data or {}).get("started_at")
            if began and "tool_call" not in data:
                totals[name] = totals.get(name, timedelta(0)) + (at - parse_datetime(began))
        return totals

    def sha256_hex(self, expression) -> Func:
        """An expression: the sha256 of a text's UTF-8 bytes in lowercase hex (what
        hashlib's hexdigest gives), to match a value stored as its digest in the query."""
        return Sha256Hex(expression)

    # --- parts of a JSON column, read by the database (runs.store.json_parts) -------------

    def json_array_length(self, expression, path: tuple[str, ...]) -> Func:
        """An expression: how many items the array at `path` (object keys) of the JSON
        `expression` holds; NULL where none is there."""
        return JsonArrayLength(expression, path)

    def json_array_part(self, expression, path: tuple[str, ...], *, start: int = 0,
                        stop: int | None = None, heads: list[str] | None = None) -> Func:
        """An expression: the items `start` to `stop` (not included) of the array at `path`
        of the JSON `expression`, or (`heads`) its text items whose part before the first
        ':' is one of `heads`; a JSON array, [] for none."""
        return JsonArrayPart(expression, path, start=start, stop=stop, heads=heads)

    def json_with(self, expression, *, replaced: dict | None = None, removed=()) -> Func:
        """An expression: the JSON `expression` with the values at the paths `replaced`
        names replaced (by an expression, or a value stored as JSON), and the keys at the
        paths `removed` taken out."""
        return JsonWith(expression, replaced=replaced, removed=removed)

    @abc.abstractmethod
    def url(self) -> str:
        """A DATABASE_URL for a child process to reach this same database."""


class Sha256Hex(Func):
    # SQLite reads the SHA256 function Django gives each connection. Django's SHA256 reads
    # pgcrypto's digest() on PostgreSQL, an extension the database need not have: its
    # built-in sha256() (PostgreSQL 11) takes bytes.
    function = "SHA256"
    output_field = CharField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, **extra_context,
                           template="ENCODE(SHA256(CONVERT_TO(%(expressions)s, 'UTF8')), 'hex')")
