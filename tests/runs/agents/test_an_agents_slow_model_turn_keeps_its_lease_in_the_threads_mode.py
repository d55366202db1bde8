"""In the threads mode of a worker (RUNS_HEARTBEAT_SECONDS > 0) a lease is kept alive by the
process's one heartbeat while a call is in flight, since no timer can interrupt a thread.
An agent step's calls are such calls as a step's are (runs.machine.heartbeats.calling):
a model turn longer than the lease keeps it, and the sweeper takes nothing back in the
middle of it. Before, only a plain step's call was registered: the sweeper took the run
back during a model turn, and another worker would have asked the model again."""

import threading
import time

import pytest
from django.db import connection

from audit.actions import AuditAction
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry
from runs.agents import agent_loop
from runs.execution import executor, sweeper
from runs.models import RunStatus
from tests.agent_runs import SMALL, start_triage

pytestmark = pytest.mark.django_db(transaction=True)
TURN_SECONDS = 2.5


def test_a_model_turn_longer_than_the_lease_is_not_taken_back(live_sandbox, settings,
                                                              monkeypatch):
    settings.RUNS_HEARTBEAT_SECONDS = 0.2
    settings.RUNS_LEASE_SECONDS = 1
    ask, asking = agent_loop.ask_model, threading.Event()

    def slow_turn(client, spec, conversation, **kw):
        asking.set()
        time.sleep(TURN_SECONDS)
        return ask(client, spec, conversation, **kw)

    monkeypatch.setattr(agent_loop, "ask_model", slow_turn)
    run = start_triage(SMALL, key="tenant-42:slow-model-turn")
    ended = {}

    def work():
        try:
            ended["status"] = executor.advance_run(run.pk, worker="w1")
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    try:
        assert asking.wait(60), "the agent never asked the model"
        time.sleep(1.5)  # the first model turn is still running, past the lease it began with
        taken_back = sweeper.sweep().expired
    finally:
        worker.join(180)
    assert not worker.is_alive()
    assert taken_back == 0
    assert ended["status"] == RunStatus.COMPLETED
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.LEASE_EXPIRED).exists()
    assert LedgerEntry.objects.count() == 1
