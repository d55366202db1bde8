"""What bench_runtime measures outside itself: what the server wrote to its WAL (the queries
over pg_walinspect), the Celery worker it starts (a child process with the bench workflows
registered) and what /proc says of processes (children, peak memory, CPU), the bench's own
and the database server's backends when the server runs on this machine."""

import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection
from psycopg import errors as pg_errors
from psycopg import sql

ROOT = Path(settings.BASE_DIR)

# The window's records: those of this database's write transactions (found by the pages they
# touch) and any other record touching its pages (pruning, hint-bit page images).
WAL_RECORDS = """
WITH records AS (
    SELECT xid, resource_manager, record_type, record_length,
           block_ref ~ ('rel [0-9]+/' || (SELECT oid FROM pg_database
                                          WHERE datname = current_database()) || '/') AS mine,
           block_ref
    FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
),
writers AS (SELECT DISTINCT xid FROM records WHERE mine AND xid <> '0'),
ours AS (SELECT * FROM records WHERE mine OR xid IN (SELECT xid FROM writers))
"""
WAL_WINDOW_SQL = WAL_RECORDS + """
SELECT count(*) FILTER (WHERE resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%%'),
       sum(record_length)
FROM ours
"""
# Each record's bytes to the relation of its first page (a commit record has none).
WAL_BY_RELATION_SQL = WAL_RECORDS + """
SELECT coalesce(c.relname, '(' || lower(o.resource_manager) || ')'), sum(o.record_length)
FROM ours o
LEFT JOIN pg_class c
  ON c.relfilenode = substring(o.block_ref from 'rel [0-9]+/[0-9]+/([0-9]+)')::oid
GROUP BY 1
"""


# The backends serving the bench: the worker's connections (PGAPPNAME) and this process's.
BENCH_BACKENDS_SQL = """
SELECT pid FROM pg_stat_activity
WHERE datname = current_database()
  AND (application_name = 'bench-worker' OR pid = pg_backend_pid())
"""


def vacuum_if_autovacuum_is_off(out, *, quiet: bool = False) -> None:
    """Vacuum and analyse the tables a run writes when the server does not (autovacuum off,
    as on the development machine). A production server's autovacuum keeps their statistics
    and visibility map current, which the plans and index-only scans rely on; tables nobody
    analysed (a bulk seed, or a fresh database that has grown) would time a database that
    production never has. Not timed."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        if cursor.fetchone()[0] == "on":
            return
        started = time.perf_counter()
        cursor.execute("VACUUM (ANALYZE) runs_run, runs_step, audit_auditrecord, "
                       "runs_runevent")
    if not quiet:
        out.write(f"autovacuum is off on this server: vacuumed the runs, steps, audit and "
                  f"event tables as it would (not timed, {time.perf_counter() - started:.1f}s)")


def drop_bench_database(out) -> None:
    """Drop the benchmark database (refused for a name without 'bench' in it, so a
    DATABASE_URL pointing elsewhere by mistake loses nothing)."""
    name = settings.DATABASES["default"]["NAME"] or ""
    if "bench" not in name:
        raise CommandError(f"--fresh-database drops the database: {name!r} does not look "
                           "like a benchmark database (its name must contain 'bench')")
    connection.close()
    try:
        with psycopg.connect(dbname="postgres", autocommit=True,
                             **server_params()) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))
    except psycopg.OperationalError as exc:
        raise CommandError(f"cannot reach PostgreSQL to drop {name}: {exc}") from exc
    out.write(f"dropped database {name} (a fresh one is measured)")

def ensure_database(out) -> None:
    """Create the benchmark database through the maintenance database if it is missing."""
    name = settings.DATABASES["default"]["NAME"]
    if not name:
        raise CommandError("the default database has no NAME")
    try:
        with psycopg.connect(dbname="postgres", autocommit=True,
                             **server_params()) as admin:
            exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                   [name]).fetchone()
            if exists is None:
                try:
                    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                    out.write(f"created database {name}")
                except pg_errors.DuplicateDatabase:
                    pass  # created meanwhile by another process
    except psycopg.OperationalError as exc:
        raise CommandError(f"cannot reach PostgreSQL to create {name}: {exc}") from exc


def server_params() -> dict:
    """Host, port, user and password of the default database, for plain psycopg."""
    db = settings.DATABASES["default"]
    params = {
        "host": db.get("HOST") or None,
        "port": str(db["PORT"]) if db.get("PORT") else None,
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
    }
    return {k: v for k, v in params.items() if v is not None}


def proc_children(pid: int) -> list[int]:
    try:
        return [int(p) for p in
                Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def proc_status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise CommandError(f"/proc/{pid}/status has no {field}")


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def median(values) -> float:
    return statistics.median(values)


def shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def backends_cpu_seconds() -> dict[int, float] | None:
    """CPU seconds of each backend serving the bench, or None when the server's processes
    are not on this machine (then /proc has no such pid, or another program's)."""
    with connection.cursor() as cursor:
        cursor.execute(BENCH_BACKENDS_SQL)
        pids = [row[0] for row in cursor.fetchall()]
    cpu = {}
    for pid in pids:
        try:
            if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"postgres"):
                return None
            cpu[pid] = proc_cpu_seconds(pid)
        except OSError:
            return None
    return cpu


class BackendsCpu:
    """The CPU the bench's backends spend over a window, those that end within it included.

    The worker closes its connections every CELERY_DB_REUSE_MAX tasks, about once a round:
    a backend read only at the window's two ends loses, when it ends, everything it spent
    in the window, and the figure fell anywhere between a fifth and all of the real one.
    Each backend's CPU is read from /proc at every sample (the list of backends from the
    server every LIST_SECONDS), and one that ended counts with its last reading."""

    LIST_SECONDS = 0.5

    def __init__(self):
        self.before = backends_cpu_seconds()
        self.last = dict(self.before or {})
        self.listed_at = time.monotonic()

    def sample(self, *, relist: bool = False) -> None:
        if self.before is None:
            return
        if relist or time.monotonic() - self.listed_at >= self.LIST_SECONDS:
            self.listed_at = time.monotonic()
            listed = backends_cpu_seconds()
            if listed is None:
                self.before = None
                return
            self.last.update(listed)
            return
        for pid in self.last:
            try:
                self.last[pid] = proc_cpu_seconds(pid)
            except OSError:
                pass  # ended: its last reading stands

    def seconds(self) -> float | None:
        """CPU seconds spent since the window opened, or None where it cannot be read."""
        self.sample(relist=True)
        if self.before is None:
            return None
        return sum(cpu - self.before.get(pid, 0.0) for pid, cpu in self.last.items())


@contextlib.contextmanager
def stopped_on_sigterm():
    """Within the block, SIGTERM (a `timeout`, a CI job cancelled) ends the bench as Ctrl-C
    does, by an exception: the workers it started, each in a session of its own that the
    signal does not reach, are then stopped by the blocks that started them instead of
    left running and taking the broker's tasks."""
    previous = signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


class Worker:
    """A `celery -A console worker` child process with the bench workflows registered."""

    def __init__(self, concurrency: int, log_dir: Path, *, pool: str = "prefork",
                 name: str = "worker", env: dict | None = None):
        self.log_path = log_dir / f"{name}.log"
        self.log_dir = log_dir
        env = {**os.environ, "RUNS_EXTRA_WORKFLOW_MODULES": ",".join(
                   m for m in (os.environ.get("RUNS_EXTRA_WORKFLOW_MODULES", ""),
                               "runs.bench_workflows") if m),
               "PGAPPNAME": "bench-worker", **(env or {})}
        self.started = time.perf_counter()
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "console", "worker", "--loglevel=INFO",
                 f"--pool={pool}", f"--concurrency={concurrency}",
                 "-n", f"bench-{uuid.uuid4().hex[:8]}@%h"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        self.ready_seconds = None

    def wait_ready(self, timeout: float = 60) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise CommandError(f"the worker exited ({self.process.returncode}):\n"
                                   + self.log_path.read_text()[-3000:])
            if " ready." in self.log_path.read_text():
                self.ready_seconds = time.perf_counter() - self.started
                return self.ready_seconds
            time.sleep(0.02)
        raise CommandError(f"the worker was not ready after {timeout}s:\n"
                           + self.log_path.read_text()[-3000:])

    def children(self) -> list[int]:
        return proc_children(self.process.pid)

    def cpu_seconds(self) -> float:
        """CPU of the pool processes, which execute the tasks (the figure with a target)."""
        return sum(proc_cpu_seconds(pid) for pid in self.children())

    def consumer_cpu_seconds(self) -> float:
        """CPU of the worker's main process: it fetches from the broker, hands each task to
        the pool and acknowledges it. A deployment pays it too; it is printed beside the
        pool's figure, not inside it."""
        return proc_cpu_seconds(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def verdict_over_rounds(values: list, target: float, *, at_least: bool = False) -> str:
    """A target's verdict from every round's figure: met or MISSED only when all rounds
    agree, so a verdict never flips with the noise of one round; rounds on both sides of the
    target are named as such. "n/a" when a round could not measure it (None)."""
    if not values or None in values:
        return "n/a"
    ok = [value >= target if at_least else value <= target for value in values]
    if all(ok):
        return "met"
    if not any(ok):
        return "MISSED"
    return f"met in {sum(ok)} of {len(ok)} rounds: within the noise"
