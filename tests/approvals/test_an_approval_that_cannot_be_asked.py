"""An approval whose request cannot be made (its snapshot function fails on the run's
results, the code changed under the run) is not left waiting with nobody asked, tried again
at every sweep: the run waits for a person in attention, saying why, with no request and no
email. Resumed once the code is fixed, it waits for the approval again and is asked."""

import pytest

from approvals import requests
from approvals.models import ApprovalRequest, Notification
from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from runs.operator.guidance import recommend
from tests.approvals.conftest import waiting_run
from tests.factories import SYSTEM, step

pytestmark = pytest.mark.django_db


def test_a_snapshot_that_fails_holds_the_run_for_a_person_and_resume_asks_again(
        approvers, t0, monkeypatch):
    run = waiting_run(amount=250)
    spec = registry.get("test-approval", 1).step("approve")

    def broken_snapshot(ctx):
        raise KeyError("prepare-v2")  # a release renamed the step it reads

    monkeypatch.setattr(spec, "fn", broken_snapshot)
    assert requests.open_pending_requests(now=t0) == 0

    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.APPROVAL_UNASKABLE
    assert run.status_message.startswith("approve: no approval request can be made: approve: "
                                         "the snapshot function failed: KeyError")
    assert step(run, "approve").status == StepStatus.WAITING
    assert not ApprovalRequest.objects.exists() and not Notification.objects.exists()
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1
    # The next sweep finds nothing to ask and holds nothing twice.
    assert requests.open_pending_requests(now=t0) == 0
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1
    advice = recommend(run, list(run.steps.all()))
    assert advice.meant == "resume" and "No approval request can be made" in advice.why

    monkeypatch.undo()
    transitions.resume(run.pk, actor=SYSTEM, reason="snapshot fixed")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert requests.open_pending_requests(now=t0) == 1
    request = ApprovalRequest.objects.get()
    assert request.run_id == run.pk and request.status == "pending"
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert step(run, "pay").attempt == 0

