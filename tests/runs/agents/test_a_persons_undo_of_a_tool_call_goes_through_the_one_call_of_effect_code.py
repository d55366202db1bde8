"""A person's undo of one tool call calls the tool's undo as every effect's code is called
(runs.machine.invocation.invoke): what it returns is checked before anything is recorded.
An undo whose remote reference the database cannot store is recorded as a failed undo,
naming why (asking again sends it again under the same key), never a server error that
leaves the call half undone."""

import pytest

from audit.models import AuditRecord
from demo.agent_workflow import triage
from demo.sandbox import faults
from demo.sandbox.models import Task
from runs.agents.tool_call_undo import undo_tool_call
from runs.definitions.definition import StepResult
from runs.models import AttentionReason, ToolCall
from tests.agent_runs import advance, start_triage
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_an_undo_answering_a_reference_with_a_nul_is_recorded_as_failed(monkeypatch):
    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key="tenant-42:undo-nul-ref"))
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR, run.status_message
    tool = triage.tools["open-approval-task"]
    undo = tool.compensate_fn

    def undo_with_a_nul(ctx, args):
        undo(ctx, args)
        return StepResult(value=None, remote_ref="T-1\x00cancelled")

    monkeypatch.setattr(tool, "compensate_fn", undo_with_a_nul)
    task_call = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    records = AuditRecord.objects.filter(run=run).count()

    call = undo_tool_call(run.pk, step_name="triage", call_ref=task_call.ref, actor=SYSTEM,
                          reason="invoice withdrawn")

    assert call.status == "compensation_failed"
    assert "remote reference" in call.error_message, call.error_message
    assert "\x00" not in call.error_message
    assert call.compensation_ref == ""
    assert AuditRecord.objects.filter(run=run).count() > records  # intent and outcome
    assert Task.objects.get().status == Task.CANCELLED  # the undo acted, once
