"""manage.py drill runs the crash drills against a registered workflow: the demo's invoice
workflow passes them all; a workflow whose write step nothing can settle fails drill 2 with
a message that says what to add."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from demo.sandbox.models import LedgerEntry, Task
from runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def test_workflows_in_child_processes(settings, live_sandbox):
    settings.RUNS_WORKFLOW_MODULES = [*settings.RUNS_WORKFLOW_MODULES, "tests.workflows"]


def test_the_invoice_workflow_passes_every_drill(capsys):
    call_command("drill", "invoice-approval")
    out = capsys.readouterr().out
    assert "all applicable drills passed" in out
    for number in ("1 crash before", "2 crash after", "5 restart", "8 same start event",
                   "6 late failure"):
        assert number in out
    assert "FAIL" not in out
    # Drill 6 expects the pause at the correction to the approver (a high-impact undo).
    assert "paused at notify-approver" in out and "sent before confirmation" not in out
    # Drills ran real runs against the sandbox: one task per run that got that far, never two.
    drilled = Run.objects.filter(business_key__startswith="drill:",
                                 workflow_name="invoice-approval")
    assert drilled.count() == 5
    assert Task.objects.count() == drilled.count()
    assert LedgerEntry.objects.filter(reverses__isnull=True).count() == 4


def test_a_write_nothing_can_settle_fails_drill_2_naming_the_fix(capsys):
    with pytest.raises(CommandError, match="drill.* failed"):
        call_command("drill", "test-unsafe")
    out = capsys.readouterr().out
    assert "post-unkeyed has neither a key-honouring receiver nor a reconcile function" in out
    assert "add a reconcile function" in out
