"""With heartbeats on (the threads mode of a worker), a call is not interrupted: a thread
cannot be. Its lease is extended while it runs, but for RUNS_CALL_LIMIT_SECONDS at most: a
call that never ends gives its run back to the sweeper, and the next worker settles the
call by key (never sending a write again), instead of the run staying "running" for ever
under a live lease. A step that calls ctx.heartbeat() shows it is alive and keeps going."""

import logging
import threading
import time

import pytest
from django.db import connection

from audit.models import AuditRecord
from runs.definitions.definition import StepResult
from runs.execution import executor, sweeper
from runs.models import Run, RunStatus, StepStatus
from tests.factories import make_due, new_run, step
from tests.processes import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
LIMIT = 2.5


@pytest.fixture(autouse=True)
def _threads_mode(settings):
    settings.RUNS_LEASE_SECONDS = 1.0
    settings.RUNS_HEARTBEAT_SECONDS = 0.2
    settings.RUNS_CALL_LIMIT_SECONDS = LIMIT


def _in_a_thread(run, name):
    def advance():
        try:
            executor.advance_run(run.pk, worker=name)
        finally:
            connection.close()

    thread = threading.Thread(target=advance, name=name, daemon=True)
    thread.start()
    return thread


def test_a_call_that_never_ends_gives_its_run_back_after_its_limit_and_is_settled_by_key(
        script, caplog):
    script.reset()
    run = new_run()
    released = threading.Event()

    def acts_then_hangs(ctx):
        ref = script.effects.setdefault(ctx.key, "create-task-1")
        released.wait(60)  # a receiver that never finishes its answer
        return StepResult({"ref": ref}, remote_ref=ref)

    script.plan["create-task"] = [acts_then_hangs]
    caplog.set_level(logging.WARNING, logger="runs.machine.heartbeats")
    hung = _in_a_thread(run, "thread-1")
    try:
        wait_for(lambda: step(run, "create-task").status == StepStatus.RUNNING, timeout=30,
                 what="create-task to start")
        started = time.monotonic()
        # Past its one-second lease, the heartbeats keep it: nobody takes it back.
        time.sleep(1.5)
        assert sweeper.sweep().expired == 0
        assert Run.objects.get(pk=run.pk).lease_owner == "thread-1"
        # Past its limit, and the lease after the last extension: taken back.
        wait_for(lambda: sweeper.sweep().expired == 1, timeout=30, interval=0.2,
                 what="the run to be taken back")
        assert time.monotonic() - started >= LIMIT - 0.5
        assert any(f"run {run.pk}: its call is still running" in r.getMessage()
                   for r in caplog.records)
        task = step(run, "create-task")
        assert task.status == StepStatus.UNKNOWN

        # The next worker looks the call up by its key, finds it, and goes on.
        make_due(run)
        assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    finally:
        released.set()
        hung.join(30)
    assert not hung.is_alive()
    # The hung call came back late: kept as a late result, nothing done again.
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    task = step(run, "create-task")
    assert task.status == StepStatus.SUCCEEDED and task.attempt == 1
    assert [c for c in script.calls if c[0] == "create-task"] == [
        ("create-task", task.idempotency_key, 1)]
    assert script.reconcile_calls == [("create-task", task.idempotency_key)]
    assert len(script.effects) == 2  # the task and the ledger entry, once each
    assert AuditRecord.objects.filter(run=run, action="lease_expired").count() == 1


def test_a_long_call_that_heartbeats_keeps_its_lease_past_the_limit(script):
    script.reset()
    run = new_run()

    def long_fetch(ctx):
        # 4.5 s, past the 2.5 s limit; each of its heartbeats more than a lease apart (the
        # heartbeat thread extends the lease between them): each starts its limit again.
        for _ in range(3):
            time.sleep(1.5)
            assert ctx.heartbeat()
        return {"order": "long", "amount": 1}

    script.plan["fetch"] = [long_fetch]
    taken_back, done = [], threading.Event()

    def sweep_meanwhile():
        try:
            while not done.is_set():
                taken_back.append(sweeper.sweep().expired)
                time.sleep(0.2)
        finally:
            connection.close()

    sweeping = threading.Thread(target=sweep_meanwhile, daemon=True)
    sweeping.start()
    try:
        status = executor.advance_run(run.pk, worker="w1")
    finally:
        done.set()
        sweeping.join(30)
    assert status == RunStatus.COMPLETED
    assert len(taken_back) >= 10 and sum(taken_back) == 0
    assert step(run, "fetch").attempt == 1 and step(run, "fetch").result["order"] == "long"
