"""An agent's calls keep the rule a step's call keeps (runs.machine.limits.call_within_limits):
when the rate limiter of the call's system cannot be asked, a tool call or a model turn is
not made, its attempt is a transient failure naming the system and its limiter, and it is
made once Redis answers again. The demo's triage agent against the sandbox; Redis out of
reach is a port nothing listens on."""

import socket

import pytest

from demo.sandbox.models import LedgerEntry, ModelCall
from runs.agent_models import ToolCall, ToolCallStatus
from runs.execution import executor
from runs.machine import limits
from runs.models import ErrorClass, RunStatus, Step, StepStatus
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


@pytest.fixture
def unreachable(settings):
    """The limits' Redis pointed at a closed port; yields the reachable URL to restore."""
    reachable = settings.RUNS_LIMITS_REDIS_URL
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.RUNS_LIMITS_REDIS_URL = f"redis://127.0.0.1:{port}/8"
    yield reachable


@pytest.fixture
def limited():
    declared = []

    def limit(system: str):
        limits.rate_limit(system, per_second=100)
        declared.append(system)

    yield limit
    for system in declared:
        limits.forget(system=system)


def test_a_tool_call_is_not_made_while_its_systems_limiter_is_out_of_reach(
        limited, unreachable, settings):
    limited("the ledger")
    run = start_triage()
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and run.lease_owner == ""
    assert LedgerEntry.objects.count() == 0
    call = ToolCall.objects.get(tool="post-ledger")
    assert call.status == ToolCallStatus.SCHEDULED
    assert call.error_class == ErrorClass.TRANSIENT
    assert "the rate limiter of system 'the ledger' could not be reached" in call.error_message

    settings.RUNS_LIMITS_REDIS_URL = unreachable
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert LedgerEntry.objects.count() == 1


def test_a_model_turn_is_not_asked_while_the_model_systems_limiter_is_out_of_reach(
        limited, unreachable, settings):
    limited("the model")
    run = start_triage()
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and run.lease_owner == ""
    assert ModelCall.objects.count() == 0
    agent = Step.objects.get(run=run, status=StepStatus.SCHEDULED)
    assert agent.error_class == ErrorClass.TRANSIENT
    assert "the rate limiter of system 'the model' could not be reached" in agent.error_message

    settings.RUNS_LIMITS_REDIS_URL = unreachable
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
