"""An agent's prompt function is the workflow's code: what it raises is the agent step's
error, classified as a step function's is (an unexpected exception: attention, naming it;
a transient error: a retry by the step's policy), never an exception out of the worker that
leaves the run running under its lease, to be taken back again and again until it is held
as "workers keep stopping" with the cause only in a worker's log. The model is not asked."""

import pytest

from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransientError
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, ErrorClass, RunStatus, Step
from tests.agent_runs import ACTOR
from tests.workflows import assist

pytestmark = pytest.mark.django_db


def _advanced_with_prompt(monkeypatch, raised: Exception):
    asked = []

    def prompt(ctx):
        raise raised

    monkeypatch.setattr(assist, "prompt_fn", prompt)
    monkeypatch.setattr(agent_loop, "ask_model", lambda client, spec, conversation, **kw:
                        asked.append(conversation) or ModelTurn(content="done", tool_calls=[]))
    run, _ = transitions.start_run(workflow="test-agent", business_key="prompt-raises",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    executor.advance_run(run.pk, worker="w1")  # raises nothing
    run.refresh_from_db()
    assert not asked
    return run, Step.objects.get(run=run, name="assist")


def test_an_unexpected_exception_stops_the_run_for_a_person_naming_it(monkeypatch):
    run, step = _advanced_with_prompt(monkeypatch, KeyError("tenant"))
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNCLASSIFIED_ERROR
    assert run.lease_owner == "" and step.lease_owner == ""
    assert step.status == "failed" and step.error_class == ErrorClass.UNCLASSIFIED
    assert "KeyError" in step.error_message and "tenant" in step.error_message
    assert AuditRecord.objects.filter(run=run, action="attention").count() == 1


def test_a_transient_error_is_retried_by_the_steps_policy(monkeypatch):
    run, step = _advanced_with_prompt(monkeypatch, TransientError("the CRM is busy"))
    assert run.status == RunStatus.WAITING and run.next_wake_at is not None
    assert step.status == "scheduled" and step.error_class == ErrorClass.TRANSIENT
    assert "the CRM is busy" in step.error_message
