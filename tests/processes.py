"""Real processes for the tests about concurrency and crashes: Celery workers and
management commands running against the test database and the test broker."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def child_env(**extra) -> dict:
    """The environment of a child process that shares this test's database and broker."""
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = {**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
           "RUNS_EXTRA_WORKFLOW_MODULES": "tests.workflows", "PYTHONPATH": str(ROOT),
           # The sandbox the test serves (live_server), as the test process sees it.
           "SANDBOX_BASE_URL": settings.SANDBOX_BASE_URL,
           "MODEL_BASE_URL": settings.MODEL_BASE_URL,
           "EXTERNAL_TIMEOUT_SECONDS": str(settings.EXTERNAL_TIMEOUT_SECONDS),
           # Celery's own switch: a worker runs Django's system checks as it starts, which
           # import the URL configuration, views and API schemas (about 0.3 s of CPU) in each
           # of the suite's hundred and more workers; tests/test_system_checks.py runs them.
           "CELERY_SKIP_CHECKS": "1"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def manage(*args, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT,
                            env=child_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def start_worker(name: str, log_dir: Path, *, pool: str = "solo", concurrency: int = 1,
                 options: tuple[str, ...] = (), **env) -> subprocess.Popen:
    """A real Celery worker (solo pool by default: the task runs in the process we may kill;
    the threads pool runs `concurrency` tasks at once in that one process too), with the
    worker's command line `options` (e.g. "--time-limit=2")."""
    log = open(log_dir / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "console", "worker", f"--pool={pool}",
         f"--concurrency={concurrency}",
         "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
         "-n", f"{name}@%h", *options],
        cwd=ROOT, env=child_env(**env), stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def kill_hard(process: subprocess.Popen) -> None:
    """SIGKILL the process and everything it started: no cleanup, no goodbye."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_hard(process)


def succeeded(process: subprocess.Popen, *, timeout: float = 90) -> str:
    """Wait for a command the test started to end, killed if it has not after `timeout`;
    asserts it exited 0 (its stderr as the message). Returns its stdout."""
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    assert process.returncode == 0, err
    return out


def wait_for(predicate, *, timeout: float = 30, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def until_status(run, *statuses, timeout: float = 60):
    """Wait until `run` (advanced by worker processes) is in one of `statuses`, sweeping as
    beat would meanwhile (expired leases, due retries, lost wake-ups); returns it fresh."""
    from runs.execution import sweeper
    from runs.models import Run

    def reached():
        sweeper.sweep()
        return Run.objects.get(pk=run.pk).status in statuses

    wait_for(reached, timeout=timeout, interval=0.3, what=f"run {run.pk} to reach {statuses}")
    return Run.objects.get(pk=run.pk)
