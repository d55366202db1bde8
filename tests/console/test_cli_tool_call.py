"""A tool-call action from the command line: the same one function as the console's, the
receiver asked nothing twice."""

import io
import json

import pytest
from django.core.management import call_command

from audit.models import AuditRecord
from tests.console.test_agent_tool_call_actions import ledger_call, unknown_posting

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_a_tool_call_is_reconciled_by_hand_from_the_cli(operator):
    run = unknown_posting("cli")
    call = ledger_call(run)
    out = io.StringIO()
    call_command("run_action", str(run.pk), "reconcile_tool_call", "--user", "olga",
                 "--step", "triage", "--call", call.ref, "--mode", "found",
                 "--remote-ref", "LEDGER-9", "--evidence", "seen in the ledger",
                 "--reason", "the posting is there", "--json", stdout=out)
    assert json.loads(out.getvalue())["done"] is True
    call.refresh_from_db()
    assert call.status == "succeeded" and call.remote_ref == "LEDGER-9"
    record = AuditRecord.objects.filter(run=run, actor_label="olga").get()
    assert record.reason == "the posting is there"
