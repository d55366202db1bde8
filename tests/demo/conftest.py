"""Fixtures of the drills that run real worker processes against the sandbox."""

import pytest

from tests.processes import start_worker, stop

# The lease of the drills' workers: short, so a killed worker's run is taken back quickly.
DRILL_LEASE_SECONDS = 2


@pytest.fixture
def sandbox_and_broker(live_sandbox, empty_broker):
    """The sandbox served over HTTP, and an empty broker (no hint left by another test)."""
    return live_sandbox


@pytest.fixture
def worker(tmp_path):
    """start(name, **env): a real Celery worker process with the drills' short lease;
    all are stopped after the test."""
    started = []

    def start(name="worker", **env):
        process = start_worker(name, tmp_path, RUNS_LEASE_SECONDS=DRILL_LEASE_SECONDS, **env)
        started.append(process)
        return process

    yield start
    for process in started:
        stop(process)
