"""manage.py drill runs the agent drills too: the invoice-triage agent passes every drill,
its tool calls each sent once and its stored turns reused."""

import pytest
from django.core.management import call_command

from demo.sandbox.models import LedgerEntry, ModelCall
from runs.models import AgentTurn, Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_the_triage_agent_passes_every_drill(capsys):
    call_command("drill", "invoice-triage")
    out = capsys.readouterr().out
    assert "all applicable drills passed" in out and "FAIL" not in out
    for drill in ("1 crash before", "2 crash after", "2a crash after a tool call committed",
                  "5a restart after a model turn", "8 same start event", "6 late failure"):
        assert drill in out
    assert "paused at triage" in out
    drilled = Run.objects.filter(business_key__startswith="drill:",
                                 workflow_name="invoice-triage")
    # Never two ledger postings for one run: one per run that got that far, plus reversals.
    postings = LedgerEntry.objects.filter(reverses__isnull=True)
    assert postings.count() == drilled.count()
    assert len(set(postings.values_list("transaction_ref", flat=True))) == postings.count()
    # No model turn asked twice across all the drills.
    assert ModelCall.objects.count() == AgentTurn.objects.count()
