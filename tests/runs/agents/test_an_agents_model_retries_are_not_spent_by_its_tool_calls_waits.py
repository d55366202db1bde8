"""A model call's transient error is the agent step's error, retried by the step's policy
(runs.agents.agent_loop). The step's retry budget counts the model's failures: a tool call
that waited (its backoff after a 503, a person's approval of its arguments) brings the step
back with another claim, and neither that claim nor the time the call waited is spent from
the budget the model's next error is retried by (effect_rows.CallEffect.step_waits)."""

from datetime import timedelta

import pytest
from django.db.models import F

from audit.actions import AuditAction
from audit.models import AuditRecord
from demo.sandbox import faults
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, Step, ToolCall
from tests.agent_runs import ACTOR, LARGE, SMALL, advance, start_triage
from tests.factories import make_due

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def model_retries(run: Run) -> list[int]:
    """The attempt of the step each retry of the model's turn was counted as (a tool
    call's retries name the call)."""
    records = AuditRecord.objects.filter(run=run, step_name="triage",
                                         action=AuditAction.RETRY_SCHEDULED)
    return [r.data["attempt"] for r in records.order_by("seq") if "tool_call" not in r.data]


def test_one_model_503_after_a_tool_calls_four_backoffs_is_asked_again():
    run = start_triage(SMALL)
    # The tracker answers 503 four times: the tool's own policy (five attempts) sends the
    # call a fifth time, which lands. Each backoff releases the agent step until it is due.
    faults.add("tracker.create", faults.UNAVAILABLE, times=4)
    for _ in range(30):
        executor.advance_run(run.pk, worker="w1")
        run.refresh_from_db()
        if ToolCall.objects.filter(step__run=run, tool="open-approval-task").exists():
            break
        if run.status == RunStatus.WAITING:
            make_due(run)
    # The model's next turn, once the call has landed, fails once (no change anywhere).
    faults.add("model.chat", faults.UNAVAILABLE, times=1)
    run = advance(run, times=30)

    task = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    assert task.status == "succeeded" and task.attempt == 5
    # The claims after the call's backoffs are no failed attempts of the model: its one
    # 503 did not stop the run for a person with the budget spent.
    assert run.attention_reason != AttentionReason.BUDGET_EXHAUSTED
    assert run.status == RunStatus.COMPLETED, (run.status, run.status_message)
    # Retried as the first failed attempt of the step's budget, not its sixth.
    assert model_retries(run) == [1]


def test_one_model_503_after_two_hours_waiting_for_a_persons_approval_is_asked_again():
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    # Two hours pass while the call waits for a person (the agent's policy allows an hour
    # of retrying): every time the step has kept moves back by as much.
    Step.objects.filter(run=run).update(
        started_at=F("started_at") - timedelta(hours=2),
        budget_started_at=F("budget_started_at") - timedelta(hours=2))
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                 args_hash=call.args_hash, approved=True, actor=ACTOR)
    # The model's turn after the approved call fails once.
    faults.add("model.chat", faults.UNAVAILABLE, times=1)
    run = advance(run, times=30)

    # The wait for the person is not time the model's retries were spent in.
    assert run.attention_reason != AttentionReason.BUDGET_EXHAUSTED
    assert run.status == RunStatus.COMPLETED, (run.status, run.status_message)
    assert model_retries(run) == [1]
