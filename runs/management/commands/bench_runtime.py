"""Benchmark the runtime on PostgreSQL: steps per second and commits per step.

    make bench
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/durable_bench \
        .venv/bin/python manage.py bench_runtime [--runs 200]

Starts N runs of a ten-step no-op workflow (not timed), then advances them one after another
in this process, as one worker would (timed). Every step is a write step, so the full
checkpoint path is measured: intent, outcome and audit records. The commits are counted by
the server (pg_stat_database.xact_commit), so a stray autocommit SELECT counts as what it
is. The figure is compared with a bare loop of one-row UPDATE + COMMIT on the same server:
the runtime cannot be faster than the commits it needs.
"""

import time
import uuid

import psycopg
from celery.signals import before_task_publish
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from psycopg import errors as pg_errors
from psycopg import sql
from pydantic import BaseModel

from audit.chain import Actor
from runs.definition import Workflow
from runs.executor import advance_run
from runs.models import Run, RunStatus
from runs.transitions import start_run

STEPS = 10
CALIBRATION_SELECTS = 50
COMMITS_PER_STEP_TARGET = 2.0
RATIO_TARGET = 0.3


class BenchIn(BaseModel):
    n: int


bench = Workflow("bench-noop-10", version=1, input=BenchIn)


def _declare_step(i: int):
    """One no-op write step; a factory so each function keeps its own `i`."""

    @bench.write(f"step-{i}")
    def noop(ctx):
        return {"step": i, "n": ctx.input.n}

    return noop


BENCH_STEPS = [_declare_step(i) for i in range(1, STEPS + 1)]


def _server_params() -> dict:
    """Host, port, user and password of the default database, for plain psycopg."""
    db = settings.DATABASES["default"]
    params = {
        "host": db.get("HOST") or None,
        "port": str(db["PORT"]) if db.get("PORT") else None,
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
    }
    return {k: v for k, v in params.items() if v is not None}


class _Counter:
    """Counts SQL statements on the Django connection and wake-up hints published."""

    def __init__(self):
        self.queries = 0
        self.hints = 0

    def __call__(self, execute, sql_, params, many, context):
        self.queries += 1
        return execute(sql_, params, many, context)

    def on_publish(self, sender=None, **kwargs):
        self.hints += 1


class Command(BaseCommand):
    help = ("Benchmark the runtime on PostgreSQL: steps/s and commits per step of a ten-step "
            "no-op workflow, against a bare UPDATE+COMMIT loop.")
    # The database may not exist yet: no system check may touch it before handle() creates it.
    requires_system_checks = []
    READ_OVERHEAD = 2  # commits of one _commit_count call: the flush and the read

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=int, default=200,
                            help="runs to start and advance (default 200)")
        parser.add_argument("--bare-seconds", type=float, default=2.0,
                            help="duration of the bare UPDATE+COMMIT loop (default 2)")

    def handle(self, *args, **options):
        runs, bare_seconds = options["runs"], options["bare_seconds"]
        if runs < 1:
            raise CommandError("--runs must be at least 1")
        if bare_seconds <= 0:
            raise CommandError("--bare-seconds must be positive")
        if connection.vendor != "postgresql":
            raise CommandError(
                "bench_runtime measures PostgreSQL commits, but the default database is "
                f"{connection.vendor} ({settings.DATABASES['default']['ENGINE']}). Run it with "
                "DATABASE_URL=postgres://postgres@127.0.0.1:5432/durable_bench (make bench)."
            )
        self._ensure_database()
        call_command("migrate", verbosity=0)
        if connection.pg_version < 150000:
            raise CommandError("bench_runtime needs PostgreSQL 15 or later "
                               "(pg_stat_force_next_flush); the server is "
                               f"{connection.pg_version}")

        out = self.stdout
        out.write(f"database: {connection.settings_dict['NAME']} on "
                  f"{connection.settings_dict.get('HOST') or 'local socket'}, PostgreSQL "
                  f"{connection.pg_version // 10000}.{connection.pg_version % 10000}")
        out.write(f"DEBUG={settings.DEBUG}" + (" (Django logs every query; DEBUG=0 measures "
                                                "without)" if settings.DEBUG else ""))
        self._warn_other_sessions()
        self._calibrate()

        counter = _Counter()
        before_task_publish.connect(counter.on_publish, weak=False)
        try:
            run_ids = self._start_runs(runs)
            start_hints, counter.hints = counter.hints, 0
            steps, elapsed, commits, queries = self._advance_all(run_ids, counter)
            timed_hints = counter.hints
        finally:
            before_task_publish.disconnect(counter.on_publish)

        not_done = Run.objects.filter(pk__in=run_ids).exclude(status=RunStatus.COMPLETED)
        if not_done.exists():
            raise CommandError(f"{not_done.count()} of {runs} runs are not completed in the "
                               "database after the timed part")

        bare_rate, bare_commits = self._bare_loop(bare_seconds)

        steps_per_s = steps / elapsed
        commits_per_step = commits / steps
        ratio = steps_per_s / bare_rate
        out.write(f"runs: {runs} x {STEPS} write steps in {elapsed:.2f}s on one worker; "
                  f"{commits} commits, {queries} SQL statements through the ORM "
                  f"({queries / steps:.2f} per step; the one-statement checkpoints go "
                  "through psycopg directly and are not in this count)")
        out.write(f"wake-up hints published: {start_hints} while starting (not timed), "
                  f"{timed_hints} in the timed part")
        out.write(f"bare loop: {bare_commits} UPDATE+COMMIT in {bare_seconds:.1f}s")
        out.write(
            f"targets: commits per step <= {COMMITS_PER_STEP_TARGET:g} "
            f"({'met' if commits_per_step <= COMMITS_PER_STEP_TARGET else 'MISSED'}), "
            f"ratio >= {RATIO_TARGET:g} ({'met' if ratio >= RATIO_TARGET else 'MISSED'})"
        )
        out.write(f"steps/s: {steps_per_s:.2f}")
        out.write(f"commits per step: {commits_per_step:.2f}")
        out.write(f"bare commits/s: {bare_rate:.2f}")
        out.write(f"ratio: {ratio:.2f}")

    # --- setup ---------------------------------------------------------------------------

    def _ensure_database(self) -> None:
        """Create the benchmark database through the maintenance database if it is missing."""
        name = settings.DATABASES["default"]["NAME"]
        if not name:
            raise CommandError("the default database has no NAME")
        try:
            with psycopg.connect(dbname="postgres", autocommit=True,
                                 **_server_params()) as admin:
                exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                       [name]).fetchone()
                if exists is None:
                    try:
                        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                        self.stdout.write(f"created database {name}")
                    except pg_errors.DuplicateDatabase:
                        pass  # created meanwhile by another process
        except psycopg.OperationalError as exc:
            raise CommandError(f"cannot reach PostgreSQL to create {name}: {exc}") from exc

    def _warn_other_sessions(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                           "current_database() AND pid <> pg_backend_pid()")
            others = cursor.fetchone()[0]
        if others:
            self.stderr.write(f"warning: {others} other session(s) on this database; their "
                              "commits would be counted as ours")

    def _commit_count(self) -> int:
        """The database's committed transactions, with this session's own counts flushed.

        A backend flushes its statistics when it goes idle, at most about once a second
        unless forced. pg_stat_force_next_flush() forces the flush at the end of its own
        (autocommit) transaction, which is therefore counted; the SELECT that reads the
        counter is one more commit, counted by the next read. Between two calls the
        counter thus grows by the commits in between plus 2.
        """
        if connection.in_atomic_block or not connection.get_autocommit():
            raise CommandError("commit counting needs the connection in autocommit")
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_force_next_flush()")
            cursor.execute("SELECT xact_commit FROM pg_stat_database "
                           "WHERE datname = current_database()")
            return cursor.fetchone()[0]

    def _calibrate(self) -> None:
        """Check the counter on a known number of commits: one per autocommit SELECT."""
        before = self._commit_count()
        with connection.cursor() as cursor:
            for _ in range(CALIBRATION_SELECTS):
                cursor.execute("SELECT 1")
        counted = self._commit_count() - before - self.READ_OVERHEAD
        if counted != CALIBRATION_SELECTS:
            self.stderr.write(f"warning: commit counter check counted {counted} commits for "
                              f"{CALIBRATION_SELECTS} autocommit SELECTs; another session "
                              "is committing on this database and the figure is inflated")
        else:
            self.stdout.write(f"commit counter check: {CALIBRATION_SELECTS} autocommit SELECTs "
                              f"counted as {counted} commits")

    def _start_runs(self, runs: int) -> list[int]:
        batch = uuid.uuid4().hex[:12]
        actor = Actor.system("bench")
        run_ids = []
        for i in range(runs):
            run, created = start_run(workflow=bench.name, business_key=f"bench-{batch}-{i}",
                                     input={"n": i}, actor=actor)
            if not created:
                raise CommandError(f"run bench-{batch}-{i} already existed")
            run_ids.append(run.pk)
        return run_ids

    # --- the measurements -----------------------------------------------------------------

    def _advance_all(self, run_ids: list[int], counter: _Counter):
        """Advance every run to the end, one after another; (steps, seconds, commits,
        statements) of the timed part."""
        statuses: dict[str, int] = {}
        before = self._commit_count()
        with connection.execute_wrapper(counter):
            started = time.perf_counter()
            for run_id in run_ids:
                status = advance_run(run_id, worker="bench")
                statuses[str(status)] = statuses.get(str(status), 0) + 1
            elapsed = time.perf_counter() - started
        commits = self._commit_count() - before - self.READ_OVERHEAD
        if statuses.get(RunStatus.COMPLETED.value, 0) != len(run_ids):
            raise CommandError(f"not every run completed: {statuses}")
        return len(run_ids) * STEPS, elapsed, commits, counter.queries

    def _bare_loop(self, seconds: float) -> tuple[float, int]:
        """Commits per second of a one-row UPDATE + COMMIT loop on the same database."""
        params = _server_params()
        with psycopg.connect(dbname=settings.DATABASES["default"]["NAME"], autocommit=False,
                             **params) as bare:
            with bare.cursor() as cursor:
                cursor.execute("CREATE TABLE IF NOT EXISTS bench_bare "
                               "(id int PRIMARY KEY, v int)")
                cursor.execute("INSERT INTO bench_bare (id, v) VALUES (1, 0) "
                               "ON CONFLICT (id) DO NOTHING")
                bare.commit()
                commits = 0
                started = time.perf_counter()
                deadline = started + seconds
                while True:
                    cursor.execute("UPDATE bench_bare SET v = v + 1 WHERE id = 1")
                    bare.commit()
                    commits += 1
                    now = time.perf_counter()
                    if now >= deadline:
                        break
        return commits / (now - started), commits
