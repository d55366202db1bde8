"""A tool call whose tool has the stop verdict waits for a person before each attempt, as a
step with the stop verdict does: the run says so in the step's words (which attempt, and
why a person approves it) on every surface (the run's message that show_run, the API and
the run page read, and the audit record of the wait), not that the person approves its
arguments, which is what a tool's own approval asks. A call waiting for its tool's own
approval of its arguments is still said to wait for that."""

import io

import pytest
from django.core.management import call_command

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.definitions.contracts import STOP, effect_verdict
from runs.machine import transitions
from runs.machine.transitions import stop_gate
from runs.models import RunStatus
from tests.agent_runs import ACTOR, LARGE, SMALL, advance, start_triage
from tests.workflows import triage_stop_verdict

pytestmark = pytest.mark.django_db(transaction=True)


def _show_run(run) -> str:
    out = io.StringIO()
    call_command("show_run", str(run.pk), stdout=out)
    return out.getvalue()


def test_a_call_held_by_the_stop_verdict_names_its_attempt_and_why(live_sandbox):
    data = {"tenant": "tenant-42", "invoice_number": SMALL,
            "requester_email": "requester@example.com", "notes": ""}
    run, _ = transitions.start_run(workflow="test-triage-stop-verdict",
                                   business_key=f"stop:{SMALL}", input=data, actor=ACTOR,
                                   wake=False)
    run = advance(run)
    assert run.status == RunStatus.WAITING
    (call,) = transitions.waiting_tool_calls(run)
    assert call.tool == "post-ledger" and call.attempt == 0
    why = effect_verdict(triage_stop_verdict.step("triage").tools["post-ledger"]).reason

    said = stop_gate.WAIT_MESSAGE.format(step="triage: tool post-ledger (call 3.0)",
                                         attempt=1, reason=why)
    assert run.status_message == said
    assert said in _show_run(run)
    assert "approval of its arguments" not in _show_run(run)
    (record,) = AuditRecord.objects.filter(run=run,
                                           action=AuditAction.TOOL_CALL_APPROVAL_REQUESTED)
    assert (record.data["verdict"], record.data["why"], record.data["attempt"]) == (
        STOP, why, 1)


def test_a_call_waiting_for_its_tools_own_approval_is_said_to_wait_for_its_arguments(
        live_sandbox):
    run = advance(start_triage(LARGE))
    assert run.status == RunStatus.WAITING
    assert run.status_message == ("triage: tool post-ledger (call 3.0) waits for a person's "
                                  "approval of its arguments")
    (record,) = AuditRecord.objects.filter(run=run,
                                           action=AuditAction.TOOL_CALL_APPROVAL_REQUESTED)
    assert "verdict" not in record.data and "attempt" not in record.data
