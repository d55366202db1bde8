"""The next step offered for an agent run held by an unknown tool call names the call that
holds it: the one whose outcome must be settled before the run can end. An unknown read
beside it (a read in flight when a run was ended: it changed nothing elsewhere) and an unknown
call of a generation a re-run replaced (kept as history, not acted on) hold nothing, and the
card does not name them, before the run is ended or after, when the run's end waits on that
one call alone. Only where no call holds the end does it name an unknown read: a run reopened
after it was ended with a read in flight whose result never came, its step unknown for it.

The ledger posting's unknown outcome is real (made, timed out, its lookups by key failed);
the other unknown call is placed beside it, since no worker path leaves two calls unknown at
once and no re-run leaves an unknown call behind."""

import pytest

from audit.chain import Actor
from demo.agent_workflow import triage
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus, ToolCall
from runs.operator import guidance
from runs.operator.actions import ACTIONS
from tests.agent_runs import advance, posting_left_unknown, start_triage

pytestmark = pytest.mark.django_db(transaction=True)
OPERATOR = Actor.system("operator")
SECOND = Actor.system("second")
NOT_SETTLED = "outcome unknown: may have happened"


def place_unknown(call: ToolCall, why: str) -> None:
    ToolCall.objects.filter(pk=call.pk).update(status="unknown", error_class="unknown",
                                               error_message=why)


def assert_card_names(run: Run, call: ToolCall) -> None:
    offered = guidance.recommend(run, list(run.steps.order_by("position")))
    assert offered.action is ACTIONS["reconcile_tool_call"], offered.why
    assert offered.call_slug == f"triage-{call.turn}-{call.index}"
    assert call.idempotency_key in offered.why
    assert offered.unknown == [f"whether tool call {call.ref} ({call.tool}) of triage took "
                               "effect in the remote system"]


def end(run: Run) -> Run:
    # With a second person's approval: the effects in doubt may stand (four eyes).
    transitions.terminate(run.pk, actor=OPERATOR, reason="stop this triage",
                          approved_by=SECOND)
    return Run.objects.get(pk=run.pk)


def test_the_next_step_names_the_unknown_posting_not_an_unknown_read_before_it(live_sandbox):
    run = posting_left_unknown()
    posting = ToolCall.objects.get(step__run=run, tool="post-ledger", status="unknown")
    read = ToolCall.objects.get(step__run=run, tool="read-invoice")
    assert read.turn < posting.turn
    place_unknown(read, "in flight when the run was terminated")

    assert_card_names(run, posting)
    run = end(run)

    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
    # The end waits on the posting alone, and the card names it.
    assert run.status_message == (f"ended (stop this triage); not settled yet: triage: tool "
                                  f"call {posting.ref} post-ledger: {NOT_SETTLED}")
    assert [e.name for e in transitions.unsettled_effects(list(run.steps.all()))] == [
        f"triage: tool call {posting.ref} post-ledger"]
    assert_card_names(run, posting)
    read.refresh_from_db()
    assert read.status == "unknown"  # nothing settled it: the card only reads
    assert LedgerEntry.objects.count() == 1


def test_the_next_step_names_the_unknown_posting_not_an_unknown_call_a_rerun_replaced(
        live_sandbox):
    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key="tenant-42:rerun-then-unknown"))
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR, run.status_message
    earlier = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    assert (earlier.generation, earlier.status) == (0, "succeeded")
    # The re-run starts the conversation afresh; this time the posting is made and times
    # out, and its lookups by key fail.
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    faults.add("ledger.lookup", faults.UNAVAILABLE, times=3)
    transitions.rerun_from_step(run.pk, step_name="triage", actor=OPERATOR,
                                reason="the ledger account is fixed", approved_by=SECOND)
    run = advance(Run.objects.get(pk=run.pk))
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME, run.status_message
    posting = ToolCall.objects.get(step__run=run, tool="post-ledger", generation=1)
    assert posting.status == "unknown" and posting.step.status == StepStatus.UNKNOWN
    place_unknown(earlier, "ReadTimeout: timed out")

    assert_card_names(run, posting)
    run = end(run)

    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
    assert run.status_message == (f"ended (stop this triage); not settled yet: triage: tool "
                                  f"call {posting.ref} post-ledger: {NOT_SETTLED}")
    assert_card_names(run, posting)
    earlier.refresh_from_db()
    assert (earlier.generation, earlier.status) == (0, "unknown")
    assert LedgerEntry.objects.count() == 1


def test_a_reopened_run_whose_step_is_unknown_for_a_read_alone_is_offered_that_read(
        live_sandbox, monkeypatch):
    tool = triage.tools["read-invoice"]
    read = tool.fn

    def terminate_then_read(ctx, args):
        transitions.terminate(ctx.run_id, actor=OPERATOR, reason="stop this triage")
        return read(ctx, args)

    monkeypatch.setattr(tool, "fn", terminate_then_read)
    run = advance(start_triage(key="tenant-42:reopened-after-a-read"))
    # A read does not hold the end: the run is terminated with its step unknown.
    assert run.status == RunStatus.TERMINATED
    call = ToolCall.objects.get(step__run=run, tool="read-invoice")
    # As the call stood before its late result came: its worker died before it did.
    place_unknown(call, "in flight when the run was terminated")
    assert transitions.unsettled_effects(list(run.steps.all())) == []

    transitions.reopen(run.pk, actor=OPERATOR, reason="the triage is wanted after all")
    run = Run.objects.get(pk=run.pk)

    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION, AttentionReason.REOPENED)
    assert Step.objects.get(run=run, name="triage").status == StepStatus.UNKNOWN
    assert_card_names(run, call)
    assert LedgerEntry.objects.count() == 0
