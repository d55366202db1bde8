"""Terminating a run while one of its agent's tool calls is in flight: the call is settled as
a step in flight is, unknown (it may have acted), and its result, when it arrives, is kept as
evidence without changing the terminated run."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from demo.agent_workflow import triage
from demo.sandbox.models import LedgerEntry
from runs.definitions.definition import Found
from runs.machine import transitions
from runs.models import Run, RunStatus, Step, StepStatus, ToolCall
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


def call_ref(call):
    return LedgerEntry.objects.get(transaction_ref=call.idempotency_key).ref

OPERATOR = Actor.system("operator")
SECOND = Actor.system("second")


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


@pytest.fixture
def terminated_mid_post(monkeypatch):
    """post-ledger's function terminates its run, as an operator would at that instant,
    before it posts: the call is running when the run ends."""
    tool = triage.tools["post-ledger"]
    post = tool.fn
    seen = {}

    def terminate_then_post(ctx, args):
        seen["status"] = ToolCall.objects.get(step__run_id=ctx.run_id,
                                              tool="post-ledger").status
        # With a second person's approval: the posting in flight may stand (four eyes).
        transitions.terminate(ctx.run_id, actor=OPERATOR, reason="stop this triage",
                              approved_by=SECOND)
        return post(ctx, args)

    monkeypatch.setattr(tool, "fn", terminate_then_post)
    return seen


def test_a_write_call_in_flight_at_terminate_becomes_unknown_and_its_late_result_is_kept(
        terminated_mid_post):
    run = advance(start_triage())
    # Ended with the posting's outcome unknown: the run stays with a person until settled.
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION, "ended_unsettled")
    assert terminated_mid_post["status"] == "running"
    call = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert call.status == "unknown" and call.error_class == "unknown"
    assert call.error_message == "in flight when the run was terminated"
    step = Step.objects.get(run=run, name="triage")
    assert (step.status, step.error_message) == (StepStatus.UNKNOWN,
                                                 "in flight when the run was terminated")
    # The posting did happen at the ledger: the call's late result is evidence only.
    assert LedgerEntry.objects.filter(transaction_ref=call.idempotency_key).count() == 1
    records = list(AuditRecord.objects.filter(run=run).order_by("seq")
                   .values_list("action", "data__tool_call"))
    # The call's own record, in the terminate's transaction, before the run's.
    assert records.index(("terminated", call.ref)) < records.index(("terminated", None))
    late = AuditRecord.objects.get(run=run, action="late_result", data__tool_call=call.ref)
    assert late.data["succeeded"] is True and late.data["remote_ref"] == call_ref(call)
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    assert ToolCall.objects.filter(step__run=run, status="running").count() == 0
    # Settling the posting by its key ends the run; the agent does not go on.
    transitions.reconcile_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                    verdict=Found(call_ref(call)), actor=OPERATOR,
                                    reason="found at the ledger", evidence="ledger by key")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.TERMINATED
    assert ToolCall.objects.filter(step__run=run).count() == 4


def test_a_read_call_in_flight_at_terminate_is_settled_as_a_read_step_is(monkeypatch):
    # One rule for any effect in flight when its run is terminated, a step's or a call's:
    # its outcome is unknown and its late result is recorded on it. A read changed nothing
    # elsewhere, so it does not keep the run from ending.
    tool = triage.tools["read-invoice"]
    read = tool.fn

    def terminate_then_read(ctx, args):
        transitions.terminate(ctx.run_id, actor=OPERATOR, reason="stop this triage")
        return read(ctx, args)

    monkeypatch.setattr(tool, "fn", terminate_then_read)
    run = advance(start_triage(key="tenant-42:terminated-mid-read"))
    assert run.status == RunStatus.TERMINATED
    call = ToolCall.objects.get(step__run=run, tool="read-invoice")
    record = AuditRecord.objects.get(run=run, action="terminated", data__tool_call=call.ref)
    assert (record.before, record.after) == ({"call_status": "running"},
                                             {"call_status": "unknown"})
    assert record.data["error"] == "in flight when the run was terminated"
    # The read's result arrived after the end: kept on the call, the run still terminated.
    assert call.status == "succeeded"
    assert AuditRecord.objects.filter(run=run, action="late_result_recorded",
                                      data__tool_call=call.ref).count() == 1
    assert Step.objects.get(run=run, name="triage").status == StepStatus.UNKNOWN
    assert not AuditRecord.objects.filter(run=run, action="outcome_unknown").exists()
    assert LedgerEntry.objects.count() == 0
