"""An agent's calls keep their remote systems' limits as a step's call does (one path,
runs.machine.limits.call_within_limits): a tool call waits out a Retry-After its tool's
system gave any caller, a model turn the agent's model_system's, and a call to another
system is not held up. The demo's triage agent against the sandbox over real HTTP."""

from datetime import timedelta

import pytest
from django.utils import timezone

from demo.agent_workflow import triage
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry, ModelCall, Task
from runs.agents import agent_loop
from runs.machine import limits
from runs.machine.errors import TransientError, classify
from runs.models import RunStatus
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)

# How long a system is blocked: long against the agent's calls before the blocked one, on a
# busy machine too (a held call lands after the block ends; one not held, before it).
BLOCKED = timedelta(seconds=5)
# The sandbox stamps its objects when the request arrives, a little after the call was let go.
SLACK = timedelta(seconds=0.1)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


@pytest.fixture
def limited():
    """limited(system, per_second): a rate limit declared for this test only."""
    declared = []

    def limit(system: str, per_second: int = 100):
        limits.rate_limit(system, per_second=per_second)
        declared.append(system)

    yield limit
    for system in declared:
        limits.forget(system=system)


def _triage_while_blocked(system: str):
    """A triage run advanced to its end while `system` is blocked by a Retry-After another
    caller was given: (the run, when the block began)."""
    run = start_triage()
    limits.honour_retry_after(system, BLOCKED.total_seconds())
    blocked_at = timezone.now()
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    return run, blocked_at


def test_a_tool_call_waits_out_a_retry_after_of_its_system_and_other_tools_do_not(limited):
    limited("the ledger")
    _, blocked_at = _triage_while_blocked("the ledger")
    entry, task = LedgerEntry.objects.get(), Task.objects.get()
    assert entry.created_at >= blocked_at + BLOCKED - SLACK
    # The task tracker was not held: its call went out while the ledger was blocked (held,
    # it would have landed after the block ended, as the ledger's did).
    assert task.created_at < blocked_at + BLOCKED - SLACK
    assert task.created_at < entry.created_at


def test_a_model_turn_waits_out_a_retry_after_of_the_agents_model_system(limited):
    limited("the model")
    _, blocked_at = _triage_while_blocked("the model")
    first = ModelCall.objects.order_by("created_at").first()
    assert first.created_at >= blocked_at + BLOCKED - SLACK
    assert LedgerEntry.objects.count() == 1 and Task.objects.count() == 1


def test_model_turns_keep_the_rate_of_the_agents_model_system(limited):
    limited("the model", per_second=2)
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    stamps = list(ModelCall.objects.order_by("created_at").values_list("created_at", flat=True))
    assert len(stamps) == 5
    # At most two in any second: each turn at least a second after the one two before it,
    # as the sandbox stamped their arrival. A request let go on time may arrive late on a
    # busy machine, which narrows the gap it ends; unlimited, the five come within 0.4 s.
    arrival_jitter = timedelta(seconds=0.4)
    assert all(later - earlier >= timedelta(seconds=1) - arrival_jitter
               for earlier, later in zip(stamps, stamps[2:], strict=False)), stamps


def test_a_429_from_the_model_carries_its_retry_after_for_everyone_to_honour():
    faults.add("model.chat", faults.RATE_LIMIT)
    client = agent_loop.model_client()
    try:
        with pytest.raises(TransientError) as raised:
            agent_loop.ask_model(client, triage, [{"role": "user", "content": "Triage."}])
    finally:
        client.close()
    assert raised.value.retry_after == 1.0
    assert classify(raised.value).retry_after == 1.0
