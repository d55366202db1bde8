"""The drill kit against a workflow whose approval step declares a rule (approve_if) that
needs no approver for the example input. The drill runs pass the step by that rule, as
production runs would: the crashing worker goes straight on to the write behind it, every
drill reaches its crash point and passes, the write is made once a run, and nothing is
approved by the drill, no request made, nobody written to."""

import pytest

from approvals.models import ApprovalRequest, Notification
from audit.actions import AuditAction
from demo.sandbox.models import LedgerEntry
from runs.definitions.definition import registry
from runs.models import Run, RunStatus
from runs.operator.drills import run_drills

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _workflows_in_child_processes(settings, live_sandbox):
    import tests.drill_wait_workflows  # noqa: F401  (registers them here too)

    settings.RUNS_WORKFLOW_MODULES = [*settings.RUNS_WORKFLOW_MODULES,
                                      "tests.drill_wait_workflows"]


def test_the_drills_pass_the_step_by_its_rule_and_post_once():
    rows = {row.drill.split(" (")[0]: row
            for row in run_drills(registry.latest("test-drill-approves-by-rule"))}

    for title in ("1 crash before the request", "2 crash after the call, before the outcome",
                  "8 same start event delivered 20x at once"):
        assert rows[title].passed, rows[title].observed
        assert "never reached" not in rows[title].observed
    drilled = list(Run.objects.filter(workflow_name="test-drill-approves-by-rule", drill=True))
    assert len(drilled) == 3
    assert {r.status for r in drilled} == {RunStatus.COMPLETED}
    for run in drilled:
        key = run.steps.get(name="post").idempotency_key
        assert LedgerEntry.objects.filter(transaction_ref=key).count() == 1, run.business_key
        assert run.audit_records.filter(action=AuditAction.APPROVED_BY_RULE).count() == 1
        assert not run.audit_records.filter(action__in=(
            AuditAction.APPROVAL_REQUESTED, AuditAction.APPROVAL_DECIDED)).exists()
        assert run.steps.get(name="approve-order").result["person_asked"] is False
    assert not ApprovalRequest.objects.exists() and not Notification.objects.exists()
