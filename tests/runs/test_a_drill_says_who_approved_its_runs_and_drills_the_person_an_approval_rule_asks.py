"""manage.py drill against a workflow whose approval step has a rule (approve_if) that lets
the example input through says what its runs came to: approved by the workflow's rule,
nobody asked, in every drill run, and not "through approval requests", which none of them
went through. The path where the rule asks a person is drilled (7b) with the workflow's
approval_example, an input the rule asks a person about: the request made, approved by the
drill through it, the run completed, its write made once. Without an approval_example, the
row and the approvals line say that path was not exercised: no failure, but no pass."""

import io
import re

import pytest
from django.core.management import call_command

from approvals.models import ApprovalRequest
from audit.actions import AuditAction
from demo.sandbox.models import LedgerEntry
from runs.models import Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _workflows_in_child_processes(settings, live_sandbox):
    import tests.drill_wait_workflows  # noqa: F401  (registers them here too)

    settings.RUNS_WORKFLOW_MODULES = [*settings.RUNS_WORKFLOW_MODULES,
                                      "tests.drill_wait_workflows"]


def _drilled(workflow: str) -> tuple[dict[str, list[str]], str]:
    """The drill table's rows (drill title up to its step: cells) and its approvals line."""
    out = io.StringIO()
    call_command("drill", workflow, stdout=out)
    text = out.getvalue()
    print(text)  # the drill table, for -s
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and re.match(r"\d", cells[0]):
            rows[cells[0].split(" (")[0]] = cells
    (approvals,) = [line for line in text.splitlines() if line.startswith("approvals: ")]
    return rows, approvals


def test_every_run_approved_by_the_rule_is_said_so_and_the_person_path_not_exercised():
    rows, approvals = _drilled("test-drill-approves-by-rule")

    assert approvals == (
        "approvals: approved by the workflow's rule, nobody asked, in 3 of 3 drill runs "
        "(approve-order); no drill run waited for a person: the path where the rule asks "
        "one was not exercised")
    _, _, observed, verdict = rows["7b the person an approval step's rule asks"]
    assert verdict == "not exercised"
    assert "declares no approval_example" in observed
    assert not ApprovalRequest.objects.exists()


def test_the_person_the_rule_asks_is_drilled_with_the_approval_example():
    rows, approvals = _drilled("test-drill-approves-by-rule-or-asks")

    _, _, observed, verdict = rows["7b the person an approval step's rule asks"]
    assert (observed, verdict) == (
        "approve-order asked of a person, approved by drill; run completed", "PASS")
    assert approvals == (
        "approvals: through approval requests (the approvals app), in 1 of 4 drill runs; "
        "approved by the workflow's rule, nobody asked, in 3 of 4 drill runs (approve-order)")
    (asked,) = Run.objects.filter(workflow_name="test-drill-approves-by-rule-or-asks",
                                  input__amount=1000)
    assert asked.drill and asked.status == RunStatus.COMPLETED
    (request,) = ApprovalRequest.objects.all()
    assert (request.run_id, request.status, request.decided_by_label) == \
        (asked.pk, "approved", "drill")
    assert not asked.audit_records.filter(action=AuditAction.APPROVED_BY_RULE).exists()
    key = asked.steps.get(name="post").idempotency_key
    assert LedgerEntry.objects.filter(transaction_ref=key).count() == 1
