"""bin/demo makes the demo's scenario runs at every start, and beat archives the finished
ones once they are older than their retention. A scenario whose run was archived is in
place: demo_scenarios neither starts it again (its key refuses a new start) nor stops there,
so the scenarios after it are still made."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from archive.archiving import archive_runs
from archive.models import ArchivedRun
from audit.chain import Actor
from demo.management.commands.demo_scenarios import Command
from demo.sandbox.models import Fault
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus

pytestmark = pytest.mark.django_db

INPUTS = {
    "customer-onboarding": {"email": "linus@example.com", "name": "Linus",
                            "plan": "enterprise"},
    "invoice-approval": {"tenant": "tenant-9", "invoice_number": "INV-1",
                         "approver_email": "approver@example.com"},
}


def test_scenario_runs_archived_since_are_in_place(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}
    scenarios = [(workflow, key) for workflow, key, _ in Command()._scenarios()]
    for workflow, key in scenarios:
        start_run(workflow=workflow, business_key=key, input=INPUTS[workflow],
                  actor=Actor.system("an earlier demo"), wake=False)
    finished = timezone.now() - timedelta(days=400)
    Run.objects.update(status=RunStatus.TERMINATED, updated_at=finished, finished_at=finished)
    assert archive_runs(actor="test", older_than_days=30).runs_removed == len(scenarios)
    # Nothing answers here: a scenario taken for missing would need the sandbox.
    settings.SANDBOX_BASE_URL = "http://127.0.0.1:1/sandbox"

    out = io.StringIO()
    call_command("demo_scenarios", stdout=out)
    assert "the demo's scenario runs are already in place" in out.getvalue()
    assert not Run.objects.exists() and not Fault.objects.exists()
    assert ArchivedRun.objects.count() == len(scenarios)
