"""`make bench` ended by SIGTERM (a `timeout`, a CI job cancelled) left the Celery worker it
had started running: the worker lives in a session of its own, which the signal does not
reach, and nothing stopped it. Now SIGTERM ends the bench as Ctrl-C does, and the worker it
started is stopped. A real bench process on a scratch database, terminated once its worker
is ready."""

import os
import signal
import subprocess
import sys

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from runs.bench_processes import proc_children
from tests.processes import ROOT, child_env, wait_for

pytestmark = pytest.mark.django_db


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def scratch_database():
    db = connection.settings_dict
    name = f"durable_bench_sigterm_{os.getpid()}"
    yield f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{name}"
    with psycopg.connect(dbname="postgres", user=db["USER"], host=db["HOST"], port=db["PORT"],
                         autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))


def test_a_terminated_bench_leaves_no_worker_running(scratch_database, tmp_path):
    out = tmp_path / "bench.out"
    with open(out, "w") as sink:
        bench = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "bench_runtime", "--rounds=1",
             "--round-seconds=60", "--runs=10"],
            cwd=ROOT, env=child_env(DATABASE_URL=scratch_database), stdout=sink,
            stderr=subprocess.STDOUT)
    workers: list[int] = []
    try:
        wait_for(lambda: "ready in" in out.read_text() or bench.poll() is not None,
                 timeout=240, what="the bench's worker to be ready")
        assert bench.poll() is None, out.read_text()
        workers = proc_children(bench.pid)
        assert workers and all(_alive(pid) for pid in workers)

        bench.send_signal(signal.SIGTERM)
        bench.wait(timeout=60)
        wait_for(lambda: not any(_alive(pid) for pid in workers), timeout=30,
                 what="the bench's worker to be stopped")
    finally:
        if bench.poll() is None:
            bench.kill()
        for pid in workers:  # its own session: its group is its pid
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
