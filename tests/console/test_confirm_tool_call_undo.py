"""The confirmation of a paused high-impact tool call's undo from the run page and from
manage.py run_action: the one action (confirm_compensation, runs.operator.actions) offered
on the paused call, permission-checked as every action, and the undo sent once afterwards.
The invoice-triage agent runs against the sandbox over real HTTP; each test counts the
ledger's reversals."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry
from runs.models import RunStatus, ToolCall
from tests.agent_runs import advance
from tests.runs.agents.test_high_impact_tool_call_undo import paused_at_the_posting, reversals

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def posting(run) -> ToolCall:
    return ToolCall.objects.get(step__run=run, tool="post-ledger")


def run_action(*args) -> str:
    out = io.StringIO()
    call_command("run_action", *map(str, args), stdout=out)
    return out.getvalue()


def test_the_run_page_offers_the_confirmation_on_the_paused_call(client_for, operator,
                                                                 auditor):
    run = paused_at_the_posting("page-confirm")
    call = posting(run)
    slug = f"triage-{call.turn}-{call.index}"
    client = client_for(operator)
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    # On the paused call only, in a dialog that names it and the undo's key.
    assert page.count('id="call-confirm_compensation-') == 1
    assert f'id="call-confirm_compensation-{slug}"' in page
    assert f'id="dialog-confirm_compensation-{slug}"' in page
    assert call.compensation_key in page
    # An auditor sees the run but may not confirm: no button, and a POST is refused.
    other = client_for(auditor)
    assert 'call-confirm_compensation-' not in other.get(
        reverse("console:run", args=[run.pk])).content.decode()
    run.refresh_from_db()
    refused = other.post(reverse("console:action", args=[run.pk, "confirm_compensation"]),
                         {"seen": str(run.audit_seq), "step": "triage", "call": call.ref,
                          "reason": "looks fine"})
    assert refused.status_code == 403 and reversals() == 0
    client.force_login(operator)
    run.refresh_from_db()
    client.post(reverse("console:action", args=[run.pk, "confirm_compensation"]),
                {"seen": str(run.audit_seq), "step": "triage", "call": call.ref,
                 "reason": "reversal checked"}, follow=True)
    call.refresh_from_db()
    assert call.status == "compensating" and reversals() == 0
    confirmed = AuditRecord.objects.get(run=run, action="compensation_confirmed")
    assert (confirmed.actor_label, confirmed.data["tool_call"]) == ("olga", call.ref)
    assert advance(run).status == RunStatus.COMPENSATED
    assert LedgerEntry.objects.get(reverses__isnull=False).transaction_ref == \
        call.compensation_key


def test_run_action_confirms_the_paused_call_named_with_call(operator):
    run = paused_at_the_posting("cli-confirm")
    call = posting(run)
    listed = dict(line.split(None, 1) for line in
                  run_action(run.pk, "--user", "olga").strip().splitlines())
    assert listed["confirm_compensation"] == "offered"
    task_call = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    with pytest.raises(CommandError, match=rf"paused at the undo of triage: tool "
                                           rf"post-ledger \(call {call.ref}\)"):
        run_action(run.pk, "confirm_compensation", "--user", "olga", "--reason", "checked",
                   "--call", f"triage:{task_call.ref}")
    out = run_action(run.pk, "confirm_compensation", "--user", "olga", "--reason",
                     "reversal checked", "--call", f"triage:{call.ref}")
    assert "Confirm the undo: done" in out and reversals() == 0
    assert advance(run).status == RunStatus.COMPENSATED
    assert reversals() == 1
