"""A cancel that takes effect inside an agent step right after a tool call whose outcome is
unknown (the posting was made and timed out) says so where it is told: the cancel's record
(its reason and where it took effect) and the run's message say the call's outcome is
unknown, never that the call settled, since nothing settled it. A call that answered is
said to have settled (test_cancel_inside_agent)."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from demo.agent_workflow import triage
from demo.sandbox import faults
from runs.machine import transitions
from runs.models import AttentionReason, RunStatus, ToolCall
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)
OPERATOR = Actor.system("olga")
SECOND = Actor.system("second")


def test_a_cancel_after_a_call_of_unknown_outcome_says_its_outcome_is_unknown(
        live_sandbox, monkeypatch):
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    tool = triage.tools["post-ledger"]
    post = tool.fn

    def cancel_then_post(ctx, args):
        # Asked while the posting is in flight; it takes effect once its outcome is in.
        transitions.cancel(ctx.run_id, actor=OPERATOR, reason="wrong vendor",
                           approved_by=SECOND)
        return post(ctx, args)

    monkeypatch.setattr(tool, "fn", cancel_then_post)
    run = advance(start_triage())

    call = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert call.status == "unknown"
    where = f"after tool call {call.ref} (post-ledger), its outcome unknown"
    record = AuditRecord.objects.get(run=run, action="cancelled")
    assert record.data["where"] == where
    assert record.reason == f"cancel took effect {where}"
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
    assert f"cancel took effect {where}" in run.status_message
    for told in (record.reason, record.data["where"], run.status_message):
        assert "(post-ledger) settled" not in told
