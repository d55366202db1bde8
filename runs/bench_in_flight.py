"""The threads mode's part of `make bench` (bench_runtime): steps that wait on a remote system,
through one worker process holding many of them at once.

One `celery --pool=threads` worker with a connection pool runs runs whose steps POST to a
receiver that answers after a set delay (runs.bench_receiver.SlowReceiver). Each batch's
runs are created beforehand and then all woken; its clock runs from the first wake-up to the
last run completed.

- at 1 s, the figures of the targets, on runs of bench_workflows.STEPS such steps (a run's
  start, wake-up hint and lease paid once for its calls, as in the runtime's own ten-step
  bench): the most steps held at the receiver at once and on average, steps/s, and the
  worker's peak RSS meanwhile;
- at 1 s, the same on one-step runs, where every call also pays a run's wake-up and end:
  IN_FLIGHT_BATCHES batches as large as the worker has threads;
- at LONG_DELAY (a model call's latency), one-step runs: the most steps held at once (a
  process holds its steps/s times the latency);
- the worker's CPU per no-op Celery task (celery.accumulate, no database): what the broker
  and Celery cost per wake-up hint, the floor under the worker CPU of a one-step run.
"""
import time
import uuid
from pathlib import Path

import redis
from celery import current_app
from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection

from audit.chain import Actor

from . import bench_workflows as bw
from .bench_processes import Worker, proc_cpu_seconds, proc_status_kb
from .bench_receiver import SlowReceiver
from .machine.transitions import start_run
from .machine.wakeup import send_wakeups
from .models import Run, RunStatus

IN_FLIGHT_TARGET = 500
REMOTE_STEPS_S_TARGET = 200
IN_FLIGHT_RSS_MB_TARGET = 1000
# The receiver's answer time of the target lines.
REMOTE_LATENCY = 1.0
# Batches of the 1 s measurement, each as many runs as the worker has threads: the first
# fills the pipeline, the rest keep it full.
IN_FLIGHT_BATCHES = 3
LONG_DELAY = 8.0
NOOP_TASKS = 3000
APP_NAME = "bench-worker-threads"
POLL_SECONDS = 0.05


def measure(out, tmp: Path, threads: int, pool: int) -> dict:
    """Start the threads-mode worker, take its figures, stop it."""
    worker = Worker(threads, tmp, pool="threads", name="worker-threads",
                    env={"DB_POOL_MAX_SIZE": str(pool), "PGAPPNAME": APP_NAME,
                         "RUNS_HEARTBEAT_SECONDS": "10"})
    try:
        ready = worker.wait_ready()
        out.write(f"worker: celery threads --concurrency={threads}, DB_POOL_MAX_SIZE={pool}, "
                  f"ready in {ready:.2f}s (not timed)")
        with SlowReceiver(delay=REMOTE_LATENCY) as receiver:
            # Warm-up: the worker's threads, pooled connections and each thread's HTTP
            # connection (one batch as large as the timed ones).
            _batch(worker, receiver, threads, label="in-flight warm-up")
            receiver.max_holding = 0
            one_step = _batch(worker, receiver, IN_FLIGHT_BATCHES * threads,
                              label="in-flight, one-step runs")
            one_step["held"], receiver.max_holding = receiver.max_holding, 0
            # "5" resets the peak RSS (VmHWM) to the current RSS.
            Path(f"/proc/{worker.process.pid}/clear_refs").write_text("5")
            steps = _batch(worker, receiver, threads, label="in-flight", workflow=bw.remote_steps,
                           steps=bw.STEPS)
            steps["held"] = receiver.max_holding
            rss_kb = proc_status_kb(worker.process.pid, "VmHWM")
        for name, batch in (("one-step runs", one_step), (f"{bw.STEPS}-step runs", steps)):
            out.write(f"in-flight, {name} ({batch['elapsed']:.1f}s): {batch['steps']} steps, "
                      f"at most {batch['held']} at the receiver at once; worker CPU "
                      f"{batch['cpu_ms_step']:.2f} ms/step")
        with SlowReceiver(delay=LONG_DELAY) as receiver:
            long = _batch(worker, receiver, 2 * threads, label=f"in-flight at {LONG_DELAY:g} s")
        out.write(f"in-flight at {LONG_DELAY:g} s ({long['elapsed']:.1f}s): {long['steps']} "
                  f"steps, at most {receiver.max_holding} at the receiver at once")
        noop_ms = noop_task_cpu_ms(worker)
    finally:
        worker.stop()
    return {"in_flight": steps["held"], "steps_s": steps["steps"] / steps["elapsed"],
            "rss_mb": rss_kb / 1024, "threads": threads, "pool": pool,
            "runs": threads, "steps": steps["steps"], "seconds": steps["elapsed"],
            "sessions": max(steps["sessions"], one_step["sessions"]),
            "cpu_ms_step": steps["cpu_ms_step"], "one_step": one_step,
            "in_flight_long": receiver.max_holding, "noop_task_cpu_ms": noop_ms}


def report(out, remote: dict) -> None:
    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    # Fewer threads than the target (a scaled-down --in-flight) say nothing about it.
    rss_verdict = ("n/a" if remote["threads"] < IN_FLIGHT_TARGET
                   else verdict(remote["rss_mb"] <= IN_FLIGHT_RSS_MB_TARGET))
    one = remote["one_step"]
    # Each step is held REMOTE_LATENCY: held on average, the steps times that over the time.
    average = remote["steps"] * REMOTE_LATENCY / remote["seconds"]
    out.write(f"in-flight steps: {remote['in_flight']} (on average {average:.0f})")
    out.write(f"steps/s at 1 s remote latency: {remote['steps_s']:.1f}")
    out.write(f"worker RSS MB at {remote['threads']} in flight: {remote['rss_mb']:.0f}")
    out.write(f"one-step runs at 1 s remote latency: {one['steps'] / one['elapsed']:.1f} steps/s, "
              f"at most {one['held']} in flight")
    out.write(f"in-flight steps at {LONG_DELAY:g} s remote latency: "
              f"{remote['in_flight_long']}")
    noop = remote["noop_task_cpu_ms"]
    out.write(f"worker CPU ms per step of a {bw.STEPS}-step run: {remote['cpu_ms_step']:.2f}; "
              f"per one-step run: {one['cpu_ms_step']:.2f}, of which a no-op Celery task "
              f"costs {'n/a' if noop is None else format(noop, '.2f')}")
    out.write(f"in-flight: {remote['runs']} runs of {bw.STEPS} steps, each step a call to a "
              f"receiver answering after 1 s, through celery --pool=threads "
              f"--concurrency={remote['threads']} with DB_POOL_MAX_SIZE={remote['pool']}, in "
              f"{remote['seconds']:.1f}s; at most {remote['sessions']} database sessions of "
              f"the worker at once")
    out.write(
        "targets: "
        f"in-flight steps >= {IN_FLIGHT_TARGET} "
        f"({verdict(remote['in_flight'] >= IN_FLIGHT_TARGET)}), "
        f"steps/s at 1 s remote latency >= {REMOTE_STEPS_S_TARGET} "
        f"({verdict(remote['steps_s'] >= REMOTE_STEPS_S_TARGET)}), "
        f"worker RSS MB at {IN_FLIGHT_TARGET} in flight <= {IN_FLIGHT_RSS_MB_TARGET:,} "
        f"({rss_verdict})")


def _batch(worker: Worker, receiver: SlowReceiver, runs: int, *, label: str,
           workflow=bw.remote, steps: int = 1) -> dict:
    """`runs` runs of `workflow` (of `steps` steps each), created beforehand and then all
    woken; the clock runs from the first wake-up to the last run completed."""
    actor = Actor.system("bench")
    batch = uuid.uuid4().hex[:12]
    run_ids = [start_run(workflow=workflow.name, business_key=f"{batch}-{i}",
                         input={"n": i, "url": receiver.url}, actor=actor,
                         wake=False)[0].pk for i in range(runs)]
    deadline = time.monotonic() + 60 + runs * steps / 10 + steps * receiver.delay
    sessions, sampled = 0, 0.0
    cpu_before = proc_cpu_seconds(worker.process.pid)
    started = time.perf_counter()
    send_wakeups(run_ids)
    with connection.cursor() as cursor:
        while True:
            if time.monotonic() - sampled > 0.1:
                cursor.execute("SELECT count(*) FROM pg_stat_activity "
                               "WHERE application_name = %s", [APP_NAME])
                sessions, sampled = max(sessions, cursor.fetchone()[0]), time.monotonic()
            cursor.execute("SELECT count(*) FROM runs_run WHERE id = ANY(%s) "
                           "AND status NOT IN ('completed', 'attention')", [run_ids])
            if cursor.fetchone()[0] == 0:
                break
            if time.monotonic() > deadline:
                raise CommandError(f"{label}: runs not finished in time; worker log: "
                                   f"{worker.log_path}")
            time.sleep(POLL_SECONDS)
    elapsed = time.perf_counter() - started
    stuck = Run.objects.filter(pk__in=run_ids).exclude(status=RunStatus.COMPLETED)
    if stuck.exists():
        raise CommandError(f"{label}: {stuck.count()} of {runs} runs did not complete: "
                           f"{list(stuck.values_list('pk', 'status', 'status_message')[:3])}")
    return {"elapsed": elapsed, "steps": runs * steps, "sessions": sessions,
            "cpu_ms_step": 1000 * (proc_cpu_seconds(worker.process.pid) - cpu_before)
            / (runs * steps)}


def noop_task_cpu_ms(worker: Worker) -> float:
    """The worker's CPU per celery.accumulate task (Celery's own, which returns its argument
    and touches no database), NOOP_TASKS of them sent at once: receiving, running and
    acknowledging a message, what every wake-up hint costs before the runtime's work. None
    on another broker than Redis, whose queue this reads to see them all taken."""
    if not settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        return None
    queue = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    # Messages left unacknowledged by a process gone before the bench (another use of this
    # Redis database) stay until their visibility timeout: they are not waited for.
    earlier = _unacked(queue)
    cpu_before = proc_cpu_seconds(worker.process.pid)
    with current_app.producer_or_acquire() as producer:
        for i in range(NOOP_TASKS):
            current_app.send_task("celery.accumulate", args=(i,), producer=producer)
    deadline = time.monotonic() + 120
    while queue.llen(current_app.conf.task_default_queue) or _unacked(queue) - earlier:
        if time.monotonic() > deadline:
            raise CommandError(f"no-op tasks not taken in time; worker log: {worker.log_path}")
        time.sleep(POLL_SECONDS)
    return 1000 * (proc_cpu_seconds(worker.process.pid) - cpu_before) / NOOP_TASKS


def _unacked(queue: redis.Redis) -> set[bytes]:
    # kombu's Redis transport keeps the delivered, not yet acknowledged messages here, by
    # delivery tag.
    return set(queue.hkeys("unacked"))
