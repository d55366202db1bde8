"""A person's undo of one tool call is sent by the person's own process. Asked for twice at
the same instant (a double click, two people), while the first is still being sent: the
second is refused, naming why, and sends nothing; the first's answer is recorded as the
call's outcome. Before, both sent the undo (with one key), the earlier answer was filed as a
late result, and its person was told that an undo which worked had failed. Two threads,
each with its own database session, against the sandbox's tracker over real HTTP."""

import threading

import pytest
from django.db import connection

from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import Task
from runs.machine.errors import TransitionNotAllowed
from runs.models import AttentionReason, RunStatus, ToolCall, ToolCallStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.agent_runs import advance, start_triage
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_the_second_request_is_refused_and_the_undo_sent_once(settings):
    settings.SANDBOX_HOLD_SECONDS, settings.EXTERNAL_TIMEOUT_SECONDS = 2, 30
    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key="tenant-42:undo-twice"))
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR, run.status_message
    call = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    # The tracker holds the first cancel SANDBOX_HOLD_SECONDS: the two requests overlap.
    faults.add("tracker.cancel", faults.SLOW, times=1)
    barrier, answers = threading.Barrier(2), []

    def undo():
        try:
            barrier.wait()
            ACTIONS["compensate_tool_call"].perform(run.pk, actor=SYSTEM, given=ActionInput(
                reason="invoice withdrawn", step="triage", call=call.ref))
            answers.append("undone")
        except TransitionNotAllowed as refused:
            answers.append(str(refused))
        finally:
            connection.close()

    threads = [threading.Thread(target=undo) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(answers, key=len) == ["undone", (
        f"the undo of tool call {call.ref} of triage is being sent by another request now; "
        "nothing changed: its answer is recorded when it comes, then the run's page shows "
        "it")], answers
    call.refresh_from_db()
    # One attempt, one intent, one outcome: no late result, no failure told.
    assert (call.status, call.compensation_attempt) == (ToolCallStatus.COMPENSATED, 1)
    actions = list(AuditRecord.objects.filter(run=run, data__tool_call=call.ref)
                   .values_list("action", flat=True))
    assert actions.count("tool_call_compensation_intent") == 1
    assert actions.count("tool_call_compensated") == 1
    assert "late_result" not in actions and "compensation_failed" not in actions
    task = Task.objects.get()
    assert task.status == Task.CANCELLED and task.cancel_key == call.compensation_key
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION


def test_once_the_first_has_answered_the_lock_is_free_for_the_next_request():
    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key="tenant-42:undo-after"))
    call = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    ACTIONS["compensate_tool_call"].perform(run.pk, actor=SYSTEM, given=ActionInput(
        reason="invoice withdrawn", step="triage", call=call.ref))
    answers = []

    def again():
        # Another session: the one that held the lock would take it again whatever.
        try:
            ACTIONS["compensate_tool_call"].perform(run.pk, actor=SYSTEM, given=ActionInput(
                reason="again", step="triage", call=call.ref))
        except TransitionNotAllowed as refused:
            answers.append(str(refused))
        finally:
            connection.close()

    thread = threading.Thread(target=again)
    thread.start()
    thread.join(60)
    # Refused by the call's state (undone), not as being sent: the lock went with its
    # request.
    assert answers == [f"tool call {call.ref} (open-approval-task) of triage has no effect "
                       "that stands to undo: it was undone (compensated); no call of triage "
                       "can be undone now"], answers
