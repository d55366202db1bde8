"""A worker SIGKILLed while it undoes an agent's tool calls, after an undo was sent and
before its outcome was recorded, leaves each effect undone once: a rescuing worker (after
the lease) does not undo anything twice, the undo already made is settled by its key, and
the run ends compensated with its audit chain whole."""

import pytest
from django.core.management import call_command

from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry, Message, ModelCall, Task
from runs.machine import transitions
from runs.models import AgentTurn, AttentionReason, RunStatus, ToolCall
from tests.agent_runs import SMALL
from tests.processes import kill_hard, until_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("sandbox_and_broker")]

PERSON = Actor.system("drill-operator")


@pytest.mark.parametrize("tool", ["open-approval-task", "post-ledger"])
def test_an_undo_cut_short_after_it_was_sent_is_made_once(worker, tmp_path, tool):
    faults.add("messenger.send", faults.FORBIDDEN)
    run, _ = transitions.start_run(
        workflow="invoice-triage", business_key=f"tenant-42:{SMALL}",
        input={"tenant": "tenant-42", "invoice_number": SMALL,
               "requester_email": "requester@example.com", "notes": ""},
        actor=Actor.system("drill"))
    marker = tmp_path / "crash-undo"
    doomed = worker("doomed", RUNS_CRASH_AT=f"after_call:triage/{tool}:compensate",
                    RUNS_CRASH_MARKER=marker)
    run = until_status(run, RunStatus.ATTENTION, timeout=90)
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    entry = LedgerEntry.objects.get()
    transitions.compensate(run.pk, actor=PERSON, reason="requester unreachable",
                           approved_by=Actor.system("drill-second-person"))
    run = until_status(run, RunStatus.ATTENTION, timeout=90)
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED
    transitions.confirm_compensation(run.pk, step_name="triage", actor=PERSON,
                                     reason="reversal checked")
    try:
        wait_for(marker.exists, timeout=90, what=f"the worker to undo {tool}")
    finally:
        kill_hard(doomed)
    assert doomed.returncode == -9

    worker("rescuer")
    run = until_status(run, RunStatus.COMPENSATED, RunStatus.ATTENTION,
                       RunStatus.COMPENSATION_FAILED, timeout=120)
    cut_short = ToolCall.objects.get(step__run=run, tool=tool)
    assert run.status == RunStatus.COMPENSATED, run.status_message
    # The undo cut short was sent again with its own key (its second attempt), and asked
    # nobody again: the one confirmation stands.
    assert cut_short.compensation_attempt == 2
    assert AuditRecord.objects.filter(run=run, action="compensation_paused").count() == 1
    undone = list(AuditRecord.objects.filter(run=run, action="tool_call_compensated")
                  .order_by("seq").values_list("data__tool", flat=True))
    assert undone == ["post-ledger", "open-approval-task"]
    # Each effect undone once: one reversal of the one entry, the one task cancelled.
    assert LedgerEntry.objects.filter(reverses=entry).count() == 1
    assert LedgerEntry.objects.count() == 2
    assert Task.objects.count() == 1 and Task.objects.get().status == Task.CANCELLED
    assert Message.objects.count() == 0
    assert ModelCall.objects.count() == AgentTurn.objects.filter(step__run=run).count()
    assert not ToolCall.objects.filter(step__run=run,
                                       status__in=["running", "compensating"]).exists()
    call_command("verify_audit")
