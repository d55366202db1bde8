"""A call of workflow code that never ends (a receiver dripping its answer a byte at a time,
step code caught in a loop) is interrupted at 4/5 of its lease by the executor, in the main
thread where a worker of the prefork or solo pool runs it: the worker records it as an
unknown outcome (a write is settled by key, a read tried again) and goes on, instead of
being held for ever, and another worker with it at every take-back."""

import threading
import time

import pytest

from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import deadline
from runs.models import RunStatus, StepStatus
from tests.factories import make_due, new_run, step

pytestmark = pytest.mark.django_db(transaction=True)
LEASE = 1.0  # a deadline of 0.8 s


@pytest.fixture(autouse=True)
def _short_lease(settings):
    settings.RUNS_LEASE_SECONDS = LEASE
    settings.RUNS_HEARTBEAT_SECONDS = 0


def _advance(run):
    started = time.monotonic()
    status = executor.advance_run(run.pk, worker="w1")
    return status, time.monotonic() - started


def test_a_read_that_never_ends_is_interrupted_and_tried_again(script):
    script.reset()
    run = new_run()
    script.plan["fetch"] = ["hang"]
    status, took = _advance(run)
    # The sleep is an hour: only the deadline ended it; the read waits for its retry.
    assert took < 600 and status == RunStatus.WAITING
    make_due(run)
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    fetch = step(run, "fetch")
    assert fetch.status == StepStatus.SUCCEEDED and fetch.attempt == 2
    retried = AuditRecord.objects.get(run=run, action="retry_scheduled", step_name="fetch")
    assert "step fetch still running after 0.8 s" in retried.data["error"]


def test_a_write_interrupted_after_it_acted_is_settled_by_key_never_sent_again(script):
    script.reset()
    run = new_run()
    script.plan["create-task"] = ["effect-then-hang"]
    status, _ = _advance(run)
    assert status == RunStatus.COMPLETED
    task = step(run, "create-task")
    assert task.status == StepStatus.SUCCEEDED and task.attempt == 1
    assert len([c for c in script.calls if c[0] == "create-task"]) == 1
    assert script.reconcile_calls == [("create-task", task.idempotency_key)]
    assert len(script.effects) == 2  # the task and the ledger entry, once each
    unknown = AuditRecord.objects.get(run=run, action="outcome_unknown")
    assert "interrupted there; it may have acted" in unknown.data["error"]


def test_a_long_step_that_heartbeats_keeps_its_deadline_with_its_lease(script):
    script.reset()
    run = new_run()

    def long_fetch(ctx):
        for _ in range(5):
            time.sleep(0.4)
            assert ctx.heartbeat()
        return {"order": "long", "amount": 1}

    script.plan["fetch"] = [long_fetch]
    status, took = _advance(run)
    assert took >= 2.0 and status == RunStatus.COMPLETED
    assert step(run, "fetch").attempt == 1 and step(run, "fetch").result["order"] == "long"


def test_nothing_is_armed_outside_the_executor_or_off_the_main_thread():
    results = []

    def in_thread():
        with deadline.calls_bounded(), deadline.bounded("a call"):
            time.sleep(1.2)
        results.append("ended")

    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join(timeout=10)
    with deadline.bounded("a console lookup"):
        time.sleep(1.2)
    assert results == ["ended"]
