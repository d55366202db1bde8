"""manage.py drill runs the agent drills too: the invoice-triage agent passes every drill,
its tool calls each sent once and its stored turns reused; what its runs wait for is
approved through approval requests (the approvals app's registered approver), and without
that approver through the transitions."""

import pytest
from django.core.management import call_command

from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry, ModelCall
from runs.models import AgentTurn, Run
from runs.operator import drills

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_the_triage_agent_passes_every_drill(capsys):
    call_command("drill", "invoice-triage")
    out = capsys.readouterr().out
    print(out)  # the drill table, for -s
    assert "approvals: through approval requests" in out
    assert "all applicable drills passed" in out and "FAIL" not in out
    for drill in ("1 crash before", "2 crash after", "2a crash after a tool call committed",
                  "5a restart after a model turn", "7a an approval bound to the call's",
                  "8 same start event", "6 late failure"):
        assert drill in out
    assert "other arguments refused, 0 sent; post-ledger succeeded, sent 1x" in out
    assert "paused at triage" in out
    drilled = Run.objects.filter(business_key__startswith="drill:",
                                 workflow_name="invoice-triage")
    # Never two ledger postings for one run: one per run that got that far, plus reversals.
    postings = LedgerEntry.objects.filter(reverses__isnull=True)
    assert postings.count() == drilled.count()
    assert len(set(postings.values_list("transaction_ref", flat=True))) == postings.count()
    # No model turn asked twice across all the drills.
    assert ModelCall.objects.count() == AgentTurn.objects.count()


def _large_run(tag):
    """An invoice above the ledger's approval threshold: its posting waits for a person
    (the workflow's example stays below it, so the drills above never wait)."""
    from audit.chain import Actor
    from runs.machine import transitions

    return transitions.start_run(
        workflow="invoice-triage", business_key=f"drill:{tag}",
        input={"tenant": "tenant-42", "invoice_number": "INV-1847",
               "requester_email": "requester@example.com"},
        actor=Actor.system("drill"), wake=False, drill=True)[0]


def test_the_drill_approves_a_waiting_tool_call_through_its_approval_request():
    run = drills.recover(_large_run("approved-by-request"), fresh=True)
    assert run.status == "completed", run.status_message
    (request,) = ApprovalRequest.objects.filter(run=run)
    assert (request.kind, request.status, request.decided_by_label) == \
        ("tool_call", "approved", "drill")
    assert request.settled_at and not request.apply_error
    (decided,) = AuditRecord.objects.filter(run=run, action="tool_call_approval_decided")
    assert decided.data["approval_request"] == request.pk
    assert (decided.actor_label, decided.actor_kind) == ("drill", "user")
    assert LedgerEntry.objects.filter(reverses__isnull=True).count() == 1


def test_without_the_approvals_app_the_drill_approves_through_the_transitions(monkeypatch):
    monkeypatch.setattr(drills, "_approver", None)
    assert drills.approval_path().startswith("straight through the transitions")
    run = drills.recover(_large_run("fallback"), fresh=True)
    assert run.status == "completed", run.status_message
    assert not ApprovalRequest.objects.filter(run=run).exists()
    decided = AuditRecord.objects.filter(run=run, action="tool_call_approval_decided")
    assert [(r.actor_label, r.actor_kind) for r in decided] == [("drill", "system")]
