"""A worker started with a hard time limit (--time-limit) no longer than a call the runtime
lets run (4/5 of RUNS_LEASE_SECONDS, or RUNS_CALL_LIMIT_SECONDS with heartbeats on) would
kill its pool process in such a call, and again at each take-back, until the run waits for
a person. It is refused at start, in one line naming the option and the setting, before it
takes any work; a limit above it, or none, starts (real worker processes)."""

import subprocess
import sys

import pytest

from tests.processes import ROOT, child_env, start_worker, stop, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _worker(*options: str, **env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "console", "worker", "--pool=prefork",
         "--concurrency=1", "--without-gossip", "--without-mingle", "--without-heartbeat",
         *options], cwd=ROOT, env=child_env(**env), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize(("limit", "env", "named"), [
    ("--time-limit=30", {"RUNS_LEASE_SECONDS": 30}, "RUNS_LEASE_SECONDS (30 s)"),
    ("--time-limit=600", {"RUNS_HEARTBEAT_SECONDS": 5, "RUNS_CALL_LIMIT_SECONDS": 900},
     "RUNS_CALL_LIMIT_SECONDS (900 s)"),
], ids=["below-the-lease", "below-the-call-limit"])
def test_a_hard_time_limit_that_would_cut_a_call_stops_the_worker_naming_it(limit, env, named):
    worker = _worker(limit, **env)
    try:
        out, err = worker.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        worker.kill()
        out, err = worker.communicate()
        raise AssertionError(f"the worker started with {limit}: {err[-2000:]}") from None
    assert worker.returncode == 2, err[-2000:]
    lines = [line for line in err.splitlines() if "--time-limit" in line]
    assert len(lines) == 1 and lines[0].startswith("celery: --time-limit (task_time_limit)")
    assert named in lines[0] and "Traceback" not in err


def test_a_hard_time_limit_above_the_lease_starts(tmp_path):
    worker = start_worker("limited", tmp_path, pool="prefork", options=("--time-limit=31",),
                          RUNS_LEASE_SECONDS=30)
    try:
        wait_for(lambda: "ready." in (tmp_path / "limited.log").read_text(), timeout=60,
                 what="the worker to start")
    finally:
        stop(worker)
