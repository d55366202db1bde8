"""Benchmark the runtime as production runs it: start_run in the caller, a real Celery worker
advancing the runs from broker wake-ups, PostgreSQL counting the commits.

    make bench
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/durable_bench \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/14 \
        .venv/bin/python manage.py bench_runtime [--runs 100] [--rounds 5]

It starts `celery -A console worker` (prefork, --concurrency 1 by default: one process, one
step at a time, the unit a deployment multiplies) and reports how long it took to be ready.
Then, in several interleaved rounds, a bare loop of one-row INSERT + COMMIT on a connection
with the worker's settings, and a batch of ten-step no-op workflows: each run started by
start_run here (with its wake-up hint, timed per call) and advanced by the worker; the batch
is timed from the first start_run to the last run completed. Every step is a write step, so
the full checkpoint path is measured: intent, outcome, audit records, progress events.

Each round lasts at least --round-seconds (10 by default) on each side: the warm-up measures
the worker's rate and sizes the batches so that one takes about that long, and the bare loop
of the same round runs for as long as its batch took. Short windows let a burst of load on
the machine flip a verdict; ten seconds a side and the median of five rounds do not. Every
figure is printed as its median with the min..max over the rounds.

Database CPU is the backend CPU the server spent for the bench (the worker's connections and
start_run's), read from /proc for the backends' pids: it is measured when the server runs on
this machine, and printed as "n/a" otherwise.

Commits and WAL are read by the server from its own write-ahead log over the timed part
(pg_walinspect): the COMMIT records of the transactions that wrote to this database (start_run's
and the worker's; a read-only transaction writes none and costs no flush), and the bytes of
every record of those transactions or touching this database's pages, full-page images
included. Other databases of the cluster writing meanwhile are left out, and nothing depends on
when a backend reports its statistics. The medians are printed, with the relations that wrote
the most WAL per step; one run whose step returns 10 MB is then measured on its own (peak RSS
of the worker process executing it, WAL written).
"""

import statistics
import tempfile
import time
import uuid
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from audit.arguments import ValuesCutShortCommand
from audit.chain import Actor
from runs import bench_in_flight, store
from runs import bench_workflows as bw
from runs.bench_processes import (
    WAL_BY_RELATION_SQL,
    WAL_WINDOW_SQL,
    BackendsCpu,
    Worker,
    drop_bench_database,
    ensure_database,
    median,
    proc_status_kb,
    shown,
    stopped_on_sigterm,
    vacuum_if_autovacuum_is_off,
    verdict_over_rounds,
)
from runs.machine.storable import (
    number_argument,
    number_in_range,
    whole_number_argument,
    whole_number_in_range,
)
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus

ROOT = Path(settings.BASE_DIR)
POLL_SECONDS = 0.01

WAL_RELATIONS_SHOWN = 8
# The name of the temporary slot that keeps a round's WAL until it is read (_keep_wal).
WAL_SLOT = "durable_bench_runtime"

RATIO_TARGET = 0.3
WAL_PER_STEP_TARGET = 1200
START_RUN_MS_TARGET = 3.0
COMMITS_PER_STEP_TARGET = 1.2
WORKER_CPU_MS_TARGET = 0.4
DB_CPU_MS_TARGET = 0.3
# The ranges of the counts it takes (option: least, most). A bench round is seconds, a
# worker a process or thread of this machine and a pool's a PostgreSQL connection each: the
# most of each is far past what a machine runs, and short of a loop that never ends.
COUNTS = {"--runs": (0, 1_000_000), "--rounds": (1, 1_000), "--concurrency": (1, 1_000),
          "--in-flight": (1, 100_000), "--in-flight-pool": (1, 10_000)}
# The range of --round-seconds (least, most): under a second a round is a burst of the
# machine's load, not a measure; an hour a side is far past what a verdict needs, and short
# of a bench that never ends.
ROUND_SECONDS = (1.0, 3600.0)

class Command(ValuesCutShortCommand):
    help = ("Benchmark the runtime through a real Celery worker on PostgreSQL: steps/s, "
            "commits and WAL per step, start_run ms, against a bare INSERT+COMMIT loop.")
    # The database may not exist yet: no system check may touch it before handle() creates it.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=whole_number_argument, default=0,
                            help="ten-step runs per round (default 0: as many as take "
                                 "--round-seconds at the warm-up's rate)")
        parser.add_argument("--round-seconds", type=number_argument, default=10.0,
                            help="the least duration of each side of a round, from "
                                 f"{ROUND_SECONDS[0]:g} to {ROUND_SECONDS[1]:g} seconds "
                                 "(default 10)")
        parser.add_argument("--rounds", type=whole_number_argument, default=5,
                            help="interleaved rounds of bare loop and runs (default 5)")
        parser.add_argument("--concurrency", type=whole_number_argument, default=1,
                            help="worker processes (default 1: compared with one bare "
                                 "connection)")
        parser.add_argument("--in-flight", type=whole_number_argument,
                            default=bench_in_flight.IN_FLIGHT_TARGET,
                            help="threads of the threads-mode worker, each step waiting 1 s "
                                 f"on a receiver (default {bench_in_flight.IN_FLIGHT_TARGET})")
        parser.add_argument("--fresh-database", action="store_true",
                            help="drop and create the benchmark database first (its name must "
                                 "contain 'bench'): WAL per step is measured on a fresh "
                                 "database, whose indexes are not those of a million runs")
        parser.add_argument("--in-flight-pool", type=whole_number_argument, default=20,
                            help="that worker's database connection pool (default 20)")

    def handle(self, *args, **options):
        runs, rounds = options["runs"], options["rounds"]
        round_seconds, concurrency = options["round_seconds"], options["concurrency"]
        in_flight, in_flight_pool = options["in_flight"], options["in_flight_pool"]
        for option, (low, high) in COUNTS.items():
            whole_number_in_range(options[option[2:].replace("-", "_")], option=option,
                                  low=low, high=high, then="nothing was done")
        # nan and inf are in no range: past a "<= 0" check, nan (every comparison with it is
        # false) and inf (which sizes no batch) ended in a crash after the warm-up had
        # written its runs.
        number_in_range(round_seconds, option="--round-seconds", low=ROUND_SECONDS[0],
                        high=ROUND_SECONDS[1], then="nothing was done")
        if store.current().name != "postgresql":
            raise CommandError(
                "bench_runtime measures PostgreSQL commits, but the default database is "
                f"{store.current().name} ({settings.DATABASES['default']['ENGINE']}). Run it with "
                "DATABASE_URL=postgres://postgres@127.0.0.1:5432/durable_bench (make bench)."
            )
        with stopped_on_sigterm():
            self._measure(options, runs, rounds, round_seconds, concurrency, in_flight,
                          in_flight_pool)

    def _measure(self, options, runs, rounds, round_seconds, concurrency, in_flight,
                 in_flight_pool):
        if options["fresh_database"]:
            drop_bench_database(self.stdout)
        ensure_database(self.stdout)
        call_command("migrate", verbosity=0)
        if connection.pg_version < 150000:
            raise CommandError("bench_runtime needs PostgreSQL 15 or later (pg_walinspect); "
                               f"the server is {connection.pg_version}")
        self._ensure_walinspect()
        out = self.stdout
        broker = settings.CELERY_BROKER_URL
        out.write(f"database: {connection.settings_dict['NAME']} on "
                  f"{connection.settings_dict.get('HOST') or 'local socket'}, PostgreSQL "
                  f"{connection.pg_version // 10000}.{connection.pg_version % 10000}; broker: "
                  f"{broker.split('://', 1)[0]}://{broker.rsplit('@', 1)[-1].split('://')[-1]}")
        out.write(f"DEBUG={settings.DEBUG}" + (" (Django logs every query; DEBUG=0 measures "
                                                "without)" if settings.DEBUG else ""))
        current_app.control.purge()  # hints left over from an interrupted bench

        with tempfile.TemporaryDirectory(prefix="bench-runtime-") as tmp:
            worker = Worker(concurrency, Path(tmp))
            try:
                ready = worker.wait_ready()
                out.write(f"worker: celery prefork --concurrency={concurrency}, ready in "
                          f"{ready:.2f}s (not timed)")
                warm = self._run_batch(worker, 10, label="warm-up")
                if not runs:
                    warm = self._run_batch(worker, max(10, int(warm["steps_s"] / bw.STEPS)),
                                           label="warm-up")
                    # A margin over the warm-up's rate, which a warm cache outruns.
                    runs = max(10, round(1.5 * round_seconds * warm["steps_s"] / bw.STEPS))
                # A round's worth of runs before the tables are first analysed: the first
                # round would start on statistics taken when they held the warm-up's few runs
                # and grow them tenfold, where production's autovacuum analyses a table each
                # time a tenth of it has changed. Measured in one process on a fresh
                # database: that round's start_run took twice the database CPU of the
                # rounds after it, its steps an eighth more; in make bench it was the worst
                # round of every run.
                self._run_batch(worker, runs, label="warm-up")
                out.write(f"warm-up: {runs} ten-step runs, a round's worth, before the tables "
                          "are analysed (not timed)")
                # What the warm-up wrote, analysed as autovacuum would (a fresh database's
                # statistics say its tables are empty), and again before each round as the
                # tables grow: plans made for the empty tables would time a database that
                # production, whose autovacuum analyses a growing table, never has.
                vacuum_if_autovacuum_is_off(out)
                out.write(f"rounds: {rounds} of {runs} ten-step runs, each beside a bare loop "
                          f"as long as its batch (at least {round_seconds:g}s)")
                results = []
                for i in range(rounds):
                    if i:
                        vacuum_if_autovacuum_is_off(out, quiet=True)
                    batch = self._run_batch(worker, runs, label=f"round {i + 1}")
                    bare = self._bare_loop(max(round_seconds, batch["elapsed"]))
                    if batch["elapsed"] < round_seconds:
                        # Shorter than a round should be: the next batches are made longer.
                        runs = round(1.2 * runs * round_seconds / batch["elapsed"])
                    batch["bare"] = bare
                    results.append(batch)
                    out.write(
                        f"round {i + 1} ({batch['elapsed']:.1f}s): bare {bare:.0f} commits/s; "
                        f"{batch['steps_s']:.1f} "
                        f"steps/s; {batch['commits_step']:.4f} commits/step; "
                        f"{batch['wal_step']:.0f} WAL bytes/step; start_run "
                        f"{batch['start_ms']:.2f} ms; worker CPU {batch['cpu_ms_step']:.2f} "
                        f"ms/step; database CPU {shown(batch['db_cpu_ms_step'])} ms/step")
                large = self._large_result(worker)
            finally:
                worker.stop()
            remote = bench_in_flight.measure(out, Path(tmp), in_flight, in_flight_pool)
        self._report(results, large, remote)

    # --- report --------------------------------------------------------------------------

    def _report(self, results: list[dict], large: dict, remote: dict) -> None:
        out = self.stdout
        for r in results:
            r["ratio"] = r["steps_s"] / r["bare"]
        db_cpu = [r["db_cpu_ms_step"] for r in results if r["db_cpu_ms_step"] is not None]
        db_cpu_ms = median(db_cpu) if len(db_cpu) == len(results) else None

        def spread(name: str, fmt: str) -> str:
            values = [r[name] for r in results]
            return (f"{format(median(values), fmt)} "
                    f"({format(min(values), fmt)}..{format(max(values), fmt)})")

        def verdict(ok: bool) -> str:
            return "met" if ok else "MISSED"

        def rounds_verdict(name: str, target: float, *, at_least: bool = False) -> str:
            return verdict_over_rounds([r[name] for r in results], target, at_least=at_least)

        out.write(f"medians over {len(results)} rounds (ratio: the median of each round's "
                  "steps/s over its bare commits/s):")
        out.write(f"steps/s: {spread('steps_s', '.1f')}")
        out.write(f"bare commits/s: {spread('bare', '.1f')}")
        out.write(f"ratio: {spread('ratio', '.3f')}")
        out.write(f"commits per step: {spread('commits_step', '.4f')}")
        out.write(f"WAL bytes per step: {spread('wal_step', '.0f')}")
        out.write(f"start_run ms: {spread('start_ms', '.2f')}")
        relations = {name for r in results for name in r["wal_by_relation"]}
        by_relation = {name: median(r["wal_by_relation"].get(name, 0) for r in results)
                       for name in relations}
        top = sorted(by_relation.items(), key=lambda item: -item[1])[:WAL_RELATIONS_SHOWN]
        out.write("WAL bytes per step by relation: "
                  + ", ".join(f"{name} {size:.0f}" for name, size in top))
        out.write(f"worker CPU ms per step: {spread('cpu_ms_step', '.2f')}")
        consumer = spread("consumer_cpu_ms_step", ".2f")
        out.write("worker consumer CPU ms per step (the main process: broker, hand-off to the "
                  f"pool, acks; beside the target's figure): {consumer}")
        if db_cpu_ms is None:
            out.write("database CPU ms per step: n/a (the server's backends are not "
                      "processes of this machine)")
        else:
            out.write(f"database CPU ms per step: {spread('db_cpu_ms_step', '.2f')}")
        out.write(f"10MB result peak MB: {large['peak_mb']:.1f}")
        out.write(f"10MB result WAL MB: {large['wal_mb']:.3f}")
        out.write(f"10MB result: the worker process peaked at {large['hwm_mb']:.0f} MB RSS "
                  f"({large['peak_mb']:.1f} MB over its {large['base_mb']:.0f} MB before the "
                  f"run); the run took {large['seconds']:.2f}s")
        bench_in_flight.report(out, remote)
        out.write(
            "targets: "
            f"ratio >= {RATIO_TARGET:g} ({rounds_verdict('ratio', RATIO_TARGET, at_least=True)}), "
            f"WAL bytes per step <= {WAL_PER_STEP_TARGET:,} "
            f"({rounds_verdict('wal_step', WAL_PER_STEP_TARGET)}), "
            f"start_run ms <= {START_RUN_MS_TARGET:g} "
            f"({rounds_verdict('start_ms', START_RUN_MS_TARGET)}), "
            f"commits per step <= {COMMITS_PER_STEP_TARGET:g} "
            f"({rounds_verdict('commits_step', COMMITS_PER_STEP_TARGET)}), "
            f"worker CPU ms per step <= {WORKER_CPU_MS_TARGET:g} "
            f"({rounds_verdict('cpu_ms_step', WORKER_CPU_MS_TARGET)}), "
            f"database CPU ms per step <= {DB_CPU_MS_TARGET:g} "
            f"({rounds_verdict('db_cpu_ms_step', DB_CPU_MS_TARGET)})")

    # --- setup ---------------------------------------------------------------------------

    def _ensure_walinspect(self) -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        except Exception as exc:
            raise CommandError(
                "bench_runtime reads commits and WAL from the server's write-ahead log through "
                f"the pg_walinspect extension (PostgreSQL contrib), which failed: {exc}"
            ) from exc

    def _flushed_lsn(self) -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_flush_lsn()::text")
            return cursor.fetchone()[0]

    def _keep_wal(self) -> str:
        """A temporary replication slot on this connection, reserving the WAL from now on:
        other databases of the server (a test suite, say) may write enough WAL for a
        checkpoint to recycle the window's segments before pg_walinspect reads them. The
        slot goes with the session, or at _release_wal."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                           "WHERE slot_name = %s AND temporary", [WAL_SLOT])
            cursor.execute("SELECT lsn::text FROM pg_create_physical_replication_slot(%s, true, "
                           "true) AS s(name, lsn)", [WAL_SLOT])
            return cursor.fetchone()[0]

    def _release_wal(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_drop_replication_slot(%s)", [WAL_SLOT])

    def _wal_window(self, start: str, end: str) -> dict:
        """What this database wrote to the WAL between two flushed positions: the COMMIT
        records of its write transactions, the bytes of every record of those transactions
        or touching its pages (full-page images included), and those bytes by relation."""
        with connection.cursor() as cursor:
            cursor.execute(WAL_WINDOW_SQL, {"start": start, "end": end})
            commits, total = cursor.fetchone()
            cursor.execute(WAL_BY_RELATION_SQL, {"start": start, "end": end})
            by_relation = dict(cursor.fetchall())
        return {"commits": int(commits), "bytes": int(total or 0), "by_relation": by_relation}

    # --- the measurements -----------------------------------------------------------------

    def _run_batch(self, worker: Worker, runs: int, *, label: str,
                   workflow=bw.noop, steps: int = bw.STEPS) -> dict:
        """Start `runs` runs here and wait until the worker has completed them all."""
        actor = Actor.system("bench")
        batch = uuid.uuid4().hex[:12]
        self._keep_wal()
        lsn_before = self._flushed_lsn()
        cpu_before = worker.cpu_seconds()
        consumer_before = worker.consumer_cpu_seconds()
        db_cpu_window = BackendsCpu()
        start_times, run_ids = [], []
        started = time.perf_counter()
        for i in range(runs):
            t = time.perf_counter()
            run, created = start_run(workflow=workflow.name, business_key=f"{batch}-{i}",
                                     input={"n": i}, actor=actor)
            start_times.append(time.perf_counter() - t)
            db_cpu_window.sample()
            if not created:
                raise CommandError(f"run {batch}-{i} already existed")
            run_ids.append(run.pk)
        deadline = time.monotonic() + 60 + runs
        with connection.cursor() as cursor:
            # Runs are claimed in the order they were woken: the last one ends last, nearly
            # always; the count afterwards checks them all.
            for run_id in (run_ids[-1], None):
                while True:
                    if run_id is None:
                        cursor.execute("SELECT count(*) FROM runs_run WHERE id = ANY(%s) "
                                       "AND status NOT IN ('completed', 'attention')",
                                       [run_ids])
                    else:
                        cursor.execute("SELECT count(*) FROM runs_run WHERE id = %s AND "
                                       "status NOT IN ('completed', 'attention')", [run_id])
                    if cursor.fetchone()[0] == 0:
                        break
                    db_cpu_window.sample()
                    if time.monotonic() > deadline:
                        raise CommandError(f"{label}: runs not finished after "
                                           f"{60 + runs}s; worker log: {worker.log_path}")
                    time.sleep(POLL_SECONDS)
        elapsed = time.perf_counter() - started
        cpu = worker.cpu_seconds() - cpu_before
        consumer_cpu = worker.consumer_cpu_seconds() - consumer_before
        # A backend that started during the batch counts from zero, one that ended with its
        # last reading.
        db_cpu = db_cpu_window.seconds()
        # Every commit of the batch is flushed by now (synchronous_commit): the last run's
        # completion was seen above.
        wal = self._wal_window(lsn_before, self._flushed_lsn())
        self._release_wal()
        stuck = Run.objects.filter(pk__in=run_ids).exclude(status=RunStatus.COMPLETED)
        if stuck.exists():
            raise CommandError(f"{label}: {stuck.count()} of {runs} runs did not complete: "
                               f"{list(stuck.values_list('pk', 'status', 'status_message')[:3])}")
        total_steps = runs * steps
        return {
            "elapsed": elapsed, "steps_s": total_steps / elapsed,
            "commits_step": wal["commits"] / total_steps, "wal_step": wal["bytes"] / total_steps,
            "wal": wal["bytes"], "start_ms": 1000 * statistics.fmean(start_times),
            "cpu_ms_step": 1000 * cpu / total_steps,
            "consumer_cpu_ms_step": 1000 * consumer_cpu / total_steps,
            "db_cpu_ms_step": None if db_cpu is None else 1000 * db_cpu / total_steps,
            "wal_by_relation": {name: size / total_steps
                                for name, size in wal["by_relation"].items()},
        }

    def _large_result(self, worker: Worker) -> dict:
        """One run whose step returns 10 MB, through the worker: the peak RSS of the worker
        process over what it held before, and the WAL the run wrote."""
        children = worker.children()
        base = {}
        for pid in children:
            # "5" resets the peak RSS (VmHWM) to the current RSS.
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            base[pid] = proc_status_kb(pid, "VmRSS")
        batch = self._run_batch(worker, 1, label="10MB result", workflow=bw.large, steps=1)
        peaks = {pid: proc_status_kb(pid, "VmHWM") for pid in children}
        pid = max(children, key=lambda p: peaks[p] - base[p])
        return {"peak_mb": (peaks[pid] - base[pid]) / 1024, "hwm_mb": peaks[pid] / 1024,
                "base_mb": base[pid] / 1024, "wal_mb": batch["wal"] / 1e6,
                "seconds": batch["elapsed"]}

    def _bare_loop(self, seconds: float) -> float:
        """Commits per second of a one-row INSERT + COMMIT loop on a connection opened with
        the worker's connection parameters (Django's, so the same synchronous_commit and
        options)."""
        bare = connection.get_new_connection(connection.get_connection_params())
        try:
            bare.autocommit = False
            with bare.cursor() as cursor:
                # The bench's own scratch table, made afresh: an earlier bench version left
                # one of another shape in databases it ran on.
                cursor.execute("DROP TABLE IF EXISTS bench_bare")
                cursor.execute("CREATE TABLE bench_bare (id bigserial PRIMARY KEY, v int NOT NULL)")
                bare.commit()
                commits = 0
                started = time.perf_counter()
                deadline = started + seconds
                while True:
                    cursor.execute("INSERT INTO bench_bare (v) VALUES (%s)", [commits])
                    bare.commit()
                    commits += 1
                    now = time.perf_counter()
                    if now >= deadline:
                        break
        finally:
            bare.close()
        return commits / (now - started)
