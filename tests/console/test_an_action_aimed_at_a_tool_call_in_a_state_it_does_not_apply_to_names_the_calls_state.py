"""Cancelling, undoing or confirming the undo of a tool call in a state the action never
applies to is refused naming the call and its state, and the calls of its step the action
can be aimed at now, if any. It named the step's state instead ("step triage of run N has no
tool call that cancel tool call applies to"), or the run's ("Confirm the undo is not possible
for run N: its completed steps are being undone": the first confirmation moved the run on).
The call's state is told first (tool_call_rules.call_state_refusal, asked by
operator_rules.named_target), the same at the console, the API and the command line; nothing
is written and nothing is sent."""


import pytest
from django.test import Client

from api.tokens import token_create
from approvals.operator_actions import act
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import Task
from runs.models import AttentionReason, RunStatus, ToolCall
from runs.operator.actions import ActionInput
from tests.agent_runs import advance, start_triage
from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    Doors,
    ask,
    with_run_id_said,
)
from tests.runs.agents.test_high_impact_tool_call_undo import paused_at_the_posting, reversals

pytestmark = pytest.mark.django_db(transaction=True)

DOORS = ("console", "api", "cli")


@pytest.fixture
def doors(operator):
    console = Client()
    console.force_login(operator)
    _, plaintext = token_create(name="ops", workflows=["invoice-triage"],
                                acting_user=operator)
    return Doors(operator, console, Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}"))


def as_told(run, words: str) -> str:
    """`words` as ask() reports them (the run's id said RUN)."""
    return with_run_id_said(run.pk, words)


def calls(run) -> list[tuple]:
    return [(c.ref, c.status, c.attempt, c.compensation_attempt) for c in
            ToolCall.objects.filter(step__run=run).order_by("turn", "index")]


def answered(doors, run, action: str, call: ToolCall):
    given = {"reason": "INC-7", "step": "triage", "call": call.ref}
    answers = {door: ask(doors, door, run, action, given) for door in DOORS}
    assert answers["console"] == answers["api"] == answers["cli"], answers
    said = answers["api"]
    assert said.outcome == "refused" and said.records == [] and said.requests == []
    return said


def refused_posting(key: str):
    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key=f"tenant-42:{key}"))
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR, run.status_message
    return run


def test_a_call_that_ran_is_not_cancelled_and_is_named(live_sandbox, doors):
    run = refused_posting("cancel-ran")
    read = ToolCall.objects.get(step__run=run, tool="read-invoice")
    before = calls(run)
    said = answered(doors, run, "cancel_tool_call", read)
    assert said.words == as_told(run, (
        f"tool call {read.ref} (read-invoice) of triage can no longer be cancelled: it "
        "succeeded (succeeded); no call of triage can be cancelled now")), said
    assert said.status == RunStatus.ATTENTION and calls(run) == before


def test_a_call_undone_already_is_not_undone_again_and_is_named(live_sandbox, doors,
                                                                operator):
    run = refused_posting("undo-again")
    task_call = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    act("compensate_tool_call", run.pk, user=operator, given=ActionInput(
        reason="invoice withdrawn", step="triage", call=task_call.ref))
    assert ToolCall.objects.get(pk=task_call.pk).status == "compensated"
    # An undo sent now would take this fault: none may be sent.
    faults.add("tracker.cancel", faults.UNAVAILABLE, times=1)
    before = calls(run)
    said = answered(doors, run, "compensate_tool_call", task_call)
    assert said.words == as_told(run, (
        f"tool call {task_call.ref} (open-approval-task) of triage has no effect that stands "
        "to undo: it was undone (compensated); no call of triage can be undone now")), said
    assert said.status == RunStatus.ATTENTION and calls(run) == before
    assert faults.pending_count() == 1
    assert Task.objects.filter(status=Task.CANCELLED).count() == 1
    assert AuditRecord.objects.filter(run=run, action="tool_call_compensated").count() == 1


def test_an_undo_confirmed_already_is_not_confirmed_again_and_is_named(live_sandbox, doors,
                                                                       operator):
    run = paused_at_the_posting("confirm-again")
    posting = ToolCall.objects.get(step__run=run, tool="post-ledger")
    act("confirm_compensation", run.pk, user=operator, given=ActionInput(
        reason="reversal checked", step="triage", call=posting.ref))
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATING
    before = calls(run)
    said = answered(doors, run, "confirm_compensation", posting)
    assert said.words == as_told(run, (
        f"tool call {posting.ref} (post-ledger) of triage has no undo waiting to be "
        "confirmed: its undo is under way (compensating); no call of triage can have its "
        "undo confirmed now")), said
    assert said.status == RunStatus.COMPENSATING and calls(run) == before
    assert reversals() == 0
    (record,) = AuditRecord.objects.filter(run=run, action="compensation_confirmed")
    assert record.reason == "reversal checked"
