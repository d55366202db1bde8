"""run_action --call names a tool call as the run page shows it, TURN.INDEX in digits 0-9,
as every id a command is given is read (console.cli.id_given): "١.٠" is refused before
anything is asked or written, not read as call 1.0 and acted on."""

import io

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditRecord
from tests.console.test_agent_tool_call_actions import ledger_call, unknown_posting

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_a_call_written_in_other_digits_is_refused_and_the_call_is_unchanged(operator):
    run = unknown_posting("cli-digits")
    call = ledger_call(run)
    turn, index = call.ref.split(".")
    other = "".join(chr(0x0660 + int(d)) for d in turn) + "." + "".join(
        chr(0x0660 + int(d)) for d in index)
    records = AuditRecord.objects.filter(run=run).count()
    with pytest.raises(CommandError, match=r"^--call .*: the call is TURN\.INDEX, as the run "
                                           r"page shows it \(e\.g\. 2\.0\)$"):
        call_command("run_action", str(run.pk), "reconcile_tool_call", "--user", "olga",
                     "--step", "triage", "--call", other, "--mode", "found",
                     "--remote-ref", "LEDGER-9", "--evidence", "seen in the ledger",
                     "--reason", "the posting is there", stdout=io.StringIO())
    status = call.status
    call.refresh_from_db()
    assert call.status == status and call.remote_ref != "LEDGER-9"
    assert AuditRecord.objects.filter(run=run).count() == records
