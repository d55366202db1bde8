"""Worker processes: their heartbeats, and what the workers page shows of them.

A worker writes its own row (see console.celery): the registry is what workers say of
themselves, the runs they hold are what the leases say. The two are joined by name (the
lease owner, host:pid), so a process that holds a lease but never registered (an older
worker, a script calling the executor) still shows, as unregistered."""

import logging
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.db.models.functions import Now

from .. import store
from ..error_text import first_line
from ..execution.executor import worker_name
from ..machine.storable import whole_number
from ..models import Run, RunStatus
from ..store import read_only
from ..worker_models import Worker

logger = logging.getLogger(__name__)

# The statuses in which a run's lease is held by a worker.
HELD = (RunStatus.RUNNING, RunStatus.COMPENSATING)
# Workers that stopped (or went silent) longer ago than this leave the page.
SHOWN_FOR = timedelta(days=1)
# Rows of workers silent or stopped this long are deleted when a worker starts.
FORGOTTEN_AFTER = timedelta(days=7)
# At most this many workers, and this many held runs named per worker, on the page.
WORKERS_SHOWN = 500
RUNS_NAMED = 20
# The name under which a busy process's beat waits for its next transition transaction.
JOINED_BEAT = "worker-registry-beat"


def beat(*, queues: str = "", name: str | None = None) -> None:
    """Record that the process `name` (this one by default) is alive; its first beat
    registers it."""
    name = name or worker_name()
    host, _, pid = name.rpartition(":")
    updated = Worker.objects.filter(name=name).update(heartbeat_at=Now(), stopped_at=None,
                                                      queues=queues)
    if not updated:
        Worker.objects.update_or_create(name=name, defaults={
            "host": host or socket.gethostname(), "pid": whole_number(pid) or os.getpid(),
            "queues": queues, "started_at": Now(), "heartbeat_at": Now(),
            "stopped_at": None})


def beat_the_silent(names: list[str], *, queues: str = "", older_than: timedelta) -> None:
    """Beat for those of the processes `names` whose last beat is older than `older_than`,
    by the database's clock (which wrote it), and register those without a row. A statement
    that matches no row writes nothing and commits nothing: beating for processes that beat
    themselves costs no commit."""
    cutoff = ExpressionWrapper(Now() - Value(older_than), output_field=DateTimeField())
    Worker.objects.filter(name__in=names, heartbeat_at__lt=cutoff).update(
        heartbeat_at=Now(), stopped_at=None, queues=queues)
    known = set(Worker.objects.filter(name__in=names).values_list("name", flat=True))
    for name in names:
        if name not in known:
            beat(queues=queues, name=name)


def stopped(*, name: str | None = None) -> None:
    """Record that the process `name` stopped cleanly (it holds no lease any more)."""
    Worker.objects.filter(name=name or worker_name()).update(stopped_at=Now(),
                                                            heartbeat_at=Now())


class Heartbeat:
    """The beats of one worker process, written on the database session its tasks already
    use (no session of its own: a worker keeps exactly one).

    After a task, a beat that is due joins the process's next transition transaction
    (runs.store.join_next_transaction): a busy worker commits nothing of its own for its
    beats. On the worker's timer, while it is idle, a due beat is written by itself. With
    the prefork pool the worker beats on its timer for those of its pool's processes that
    have not beaten within an interval (the idle ones); the busy ones beat along their own
    transactions. A failed beat (the database away) is logged and tried again at the next.
    """

    def __init__(self, *, queues: str = ""):
        self.queues = queues
        self.last = float("-inf")

    def after_task(self) -> None:
        # Every half interval: a busy process's row is then never older than half an
        # interval and a claim, and the prefork worker's check (an interval) leaves it be.
        now = time.monotonic()
        if now - self.last < settings.WORKER_HEARTBEAT_SECONDS / 2:
            return
        self.last = now
        store.join_next_transaction(JOINED_BEAT, self._beat_along)

    def _beat_along(self) -> None:
        beat(queues=self.queues)

    def __call__(self, names=None, *, force: bool = False) -> None:
        """The timer's beat (`force` when the worker starts): for this process, or for the
        pool processes `names`."""
        names = names or None  # a pool with no process: the worker beats for itself
        now = time.monotonic()
        if not force and names is None and now - self.last < settings.WORKER_HEARTBEAT_SECONDS:
            return
        self.last = now
        try:
            if force:  # a worker starting: the rows of processes long gone are dropped
                Worker.objects.filter(heartbeat_at__lt=store.current().now() - FORGOTTEN_AFTER) \
                    .delete()
            if names is None:
                store.withdraw_joined(JOINED_BEAT)  # written here and now instead
                beat(queues=self.queues)
            elif force:
                for name in names:
                    beat(queues=self.queues, name=name)
            else:
                beat_the_silent(names, queues=self.queues,
                                older_than=timedelta(seconds=settings.WORKER_HEARTBEAT_SECONDS))
        except DatabaseError as exc:
            if read_only.refuses_writes(exc):
                read_only.refused(logger, "worker heartbeat", exc)
                connection.close()  # a new session next time (database_outage.beat_pass)
                return
            if store.session_ended(exc):
                # Its session ended under it (killed, a restart, a failover): said in one
                # line, as the tasks say it, and beaten again on a new one at the next.
                logger.warning("worker heartbeat: the database session ended (%s); beating "
                               "again on a new one", first_line(exc))
                connection.close()
                return
            logger.exception("worker heartbeat failed")
            connection.close_if_unusable_or_obsolete()
        else:
            read_only.went_through(logger, "worker heartbeat")

    def stop(self, names=None) -> None:
        try:
            for name in names or [worker_name()]:
                stopped(name=name)
        except DatabaseError:
            logger.exception("could not record the worker's stop")


@dataclass
class WorkerRow:
    name: str
    host: str
    pid: int | None
    queues: str
    started_at: datetime | None
    heartbeat_at: datetime | None
    stopped_at: datetime | None
    silent: bool
    registered: bool
    held: list[int] = field(default_factory=list)
    held_count: int = 0
    expired: int = 0


@dataclass(frozen=True)
class WorkersPage:
    workers: list[WorkerRow]
    lease_seconds: float
    now: datetime


def workers_page(*, workflow_ids: frozenset[int] | None,
                 now: datetime | None = None) -> WorkersPage:
    """The workers seen lately, each with the runs it holds now (among those the person may
    see), newest heartbeat first; those silent past a lease are marked. Two queries: the
    registry's recent rows (worker_heartbeat_idx) and the held runs (run_held_idx:
    as many rows as runs are running, whatever the number of finished ones).

    Judged by the database's clock, which wrote every beat and lease on the page: by the web
    host's own, one a minute ahead would show every live worker silent and its leases run
    out, and one behind would show a dead worker alive."""
    now = now or store.current().now()
    lease = timedelta(seconds=settings.RUNS_LEASE_SECONDS)
    rows = {}
    for worker in Worker.objects.filter(heartbeat_at__gte=now - SHOWN_FOR) \
            .order_by("-heartbeat_at", "name")[:WORKERS_SHOWN]:
        rows[worker.name] = WorkerRow(
            name=worker.name, host=worker.host, pid=worker.pid, queues=worker.queues,
            started_at=worker.started_at, heartbeat_at=worker.heartbeat_at,
            stopped_at=worker.stopped_at, registered=True,
            silent=worker.stopped_at is None and worker.heartbeat_at < now - lease)
    held = Run.objects.filter(status__in=HELD).exclude(lease_owner="")
    if workflow_ids is not None:
        held = held.filter(workflow_id__in=workflow_ids)
    for owner, pk, expires, renewed in held.order_by("pk").values_list(
            "lease_owner", "pk", "lease_expires_at", "heartbeat_at"):
        row = rows.get(owner)
        if row is None:
            host, _, pid = owner.rpartition(":")
            row = rows[owner] = WorkerRow(
                name=owner, host=host or owner, pid=whole_number(pid),
                queues="", started_at=None, heartbeat_at=None, stopped_at=None,
                silent=True, registered=False)
        row.held_count += 1
        if len(row.held) < RUNS_NAMED:
            row.held.append(pk)
        if expires is not None and expires < now:
            row.expired += 1
        # A lease renewed is a sign of life too: a worker busy with one long step beats
        # only after it (its beats share the thread that runs the step), but the step
        # renews its lease meanwhile.
        if row.registered and renewed is not None and renewed > row.heartbeat_at:
            row.heartbeat_at = renewed
            row.silent = row.stopped_at is None and renewed < now - lease
    return WorkersPage(workers=list(rows.values()), lease_seconds=settings.RUNS_LEASE_SECONDS,
                       now=now)
