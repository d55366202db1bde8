"""A run ended while a tool call of its agent is unknown but not in flight (the posting was
made and timed out, and its lookups by key failed): the agent step says that a tool call's
outcome was unknown when the run was terminated. "In flight when the run was terminated"
is said only of a call running at that moment (test_terminate_mid_call), which this one
was not."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from runs.machine import transitions
from runs.models import AttentionReason, RunStatus, Step, StepStatus, ToolCall
from tests.agent_runs import posting_left_unknown

pytestmark = pytest.mark.django_db(transaction=True)
OPERATOR = Actor.system("operator")
SECOND = Actor.system("second")


def test_a_call_unknown_before_the_end_is_not_said_to_have_been_in_flight(live_sandbox):
    run = posting_left_unknown()
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    call = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert call.status == "unknown"

    # With a second person's approval: the posting may stand (four eyes).
    transitions.terminate(run.pk, actor=OPERATOR, reason="stop this triage",
                          approved_by=SECOND)

    run.refresh_from_db()
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
    step = Step.objects.get(run=run, name="triage")
    assert (step.status, step.error_class) == (StepStatus.UNKNOWN, "unknown")
    assert step.error_message == "a tool call's outcome unknown when the run was terminated"
    assert "in flight" not in step.error_message
    # The call keeps the error that left it unknown, and the end released no call: none
    # was running, so no call has a record of its own in the terminate.
    call.refresh_from_db()
    assert (call.status, call.error_message) == ("unknown", "ReadTimeout: timed out")
    assert not AuditRecord.objects.filter(run=run, action="terminated",
                                          data__has_key="tool_call").exists()
