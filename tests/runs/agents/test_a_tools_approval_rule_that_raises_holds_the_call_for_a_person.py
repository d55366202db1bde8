"""A tool's approval rule (approve_if, the workflow's code) that raises, or answers neither
True nor False, cannot say whether a call may go unasked: the call waits for a person's
approval, as one the rule asks for does, and is made once they approve it. It is never made
unasked, and the exception never escapes the worker, which left the run running under its
lease with the call pending."""

import dataclasses

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.definitions.declarations import tool_approval
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import RunStatus, ToolCall
from tests.agent_runs import ACTOR
from tests.workflows import assist

pytestmark = pytest.mark.django_db


def raises(args):
    raise ValueError("no approval threshold configured")


# A rule answering neither True nor False (a forgotten `return` answers None) is read as an
# approval step's is (runs.machine.rule_answers): a person decides. Read as a truth value,
# None and 0 made the call unasked.
@pytest.mark.parametrize("approve_if", [raises, lambda args: None, lambda args: 0],
                         ids=["raises", "answers None", "answers 0"])
def test_the_call_waits_for_a_person_and_is_made_once_approved(script, monkeypatch,
                                                                approve_if):
    script.reset()

    monkeypatch.setitem(assist.tools, "write-note", dataclasses.replace(
        assist.tools["write-note"], approve_if=approve_if,
        approval=tool_approval(approvers=("group:approvers",))))
    answers = [ModelTurn(content="", tool_calls=[
        {"id": "c1", "name": "write-note", "arguments": '{"text": "a"}'}])]
    monkeypatch.setattr(agent_loop, "ask_model", lambda client, spec, conversation, **kw:
                        answers.pop(0) if answers else ModelTurn(content="done", tool_calls=[]))
    run, _ = transitions.start_run(workflow="test-agent", business_key="rule-raises",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)

    executor.advance_run(run.pk, worker="w1")  # raises nothing

    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and run.lease_owner == ""
    (call,) = ToolCall.objects.filter(step__run=run)
    assert call.status == "waiting" and not script.calls
    assert AuditRecord.objects.filter(run=run, action="tool_call_approval_requested").count() == 1

    transitions.decide_tool_call(run.pk, step_name="assist", call_ref=call.ref,
                                 args_hash=call.args_hash, approved=True,
                                 actor=Actor.system("approver"))
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert [name for name, *_ in script.calls] == ["write-note"]
