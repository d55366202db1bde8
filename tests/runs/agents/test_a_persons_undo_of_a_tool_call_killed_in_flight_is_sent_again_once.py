"""A person's undo of one tool call (run_action ... compensate_tool_call, a real process)
SIGKILLed while the undo is in flight, after its intent was committed and before its outcome
was: the call stays "being undone", the run does not go forward while the undo is in doubt,
and asking again sends the undo with the same compensation key, so the task the call opened
is cancelled once and the call ends compensated, each attempt in the audit chain."""

import os
import signal

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import Task
from runs.agents.tool_call_undo import undo_tool_call
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import AttentionReason, RunStatus, ToolCall, ToolCallStatus
from tests.agent_runs import advance, start_triage
from tests.factories import SYSTEM
from tests.processes import manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_the_undo_cut_short_is_sent_again_with_its_key(settings):
    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = advance(start_triage(key="tenant-42:undo-killed"))
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR, run.status_message
    call = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    task = Task.objects.get()
    # Hashed as the command's own process (production settings) checks it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    User.objects.create_superuser("ops", "ops@example.com", "pw")
    # The tracker holds the cancel SANDBOX_HOLD_SECONDS before it acts and answers: the
    # person's process is killed while it waits.
    faults.add("tracker.cancel", faults.SLOW)
    undoing = manage("run_action", str(run.pk), "compensate_tool_call", "--user", "ops",
                     "--call", f"triage:{call.ref}", "--reason", "invoice withdrawn",
                     CLI_PASSWORD="pw", EXTERNAL_TIMEOUT_SECONDS=30)

    def sent():
        assert undoing.poll() is None, undoing.communicate()
        # The tracker took the request (its fault spent) and holds it.
        return faults.pending_count() == 0

    try:
        wait_for(sent, timeout=30, interval=0.05, what="the undo to reach the tracker")
        call.refresh_from_db()
        assert call.status == ToolCallStatus.COMPENSATING  # its intent committed first
    finally:
        # Not kill_hard: the command runs in this test's process group (manage()).
        os.kill(undoing.pid, signal.SIGKILL)
        undoing.wait(timeout=10)
    assert undoing.returncode == -9
    # The tracker acts once its hold is over, though nobody is there for its answer.
    wait_for(lambda: Task.objects.get().status == Task.CANCELLED,
             timeout=settings.SANDBOX_HOLD_SECONDS + 10, what="the tracker to cancel")
    call.refresh_from_db()
    assert (call.status, call.compensation_attempt) == (ToolCallStatus.COMPENSATING, 1)

    # Nothing goes forward with the undo in doubt; the person is told what to do, the action
    # named as its button labels it.
    with pytest.raises(TransitionNotAllowed, match=r"outcome is not recorded: send it again "
                                                   r"with its key \(Undo tool call\) first"):
        transitions.resume(run.pk, actor=SYSTEM, reason="carry on")

    again = undo_tool_call(run.pk, step_name="triage", call_ref=call.ref, actor=SYSTEM,
                           reason="sent again after the crash")
    assert (again.status, again.compensation_attempt) == (ToolCallStatus.COMPENSATED, 2)
    assert again.compensation_ref == task.ref
    task.refresh_from_db()
    assert Task.objects.count() == 1 and task.status == Task.CANCELLED
    assert task.cancel_key == again.compensation_key
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION  # the person's undo moves no run state
    intents = AuditRecord.objects.filter(run=run, action="tool_call_compensation_intent",
                                         data__tool_call=call.ref)
    assert intents.count() == 2
    assert AuditRecord.objects.filter(run=run, action="tool_call_compensated",
                                      data__tool_call=call.ref).count() == 1
    call_command("verify_audit")
