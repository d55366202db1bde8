"""An approval step's request whose payload changed while it waited (an earlier step's result
corrected) reaches its due time before a reminder or a decision noticed the change. Its
timeout policy is not applied to it: escalated, its deputies would be mailed a payload that
is no longer the run's; rejected or cancelled, the system would decide on a payload nobody
was shown. It is superseded instead, as a reminder or a decision finding the change
supersedes it: a new request asks its approvers about the payload as it is now, due after
its own timeout. Whoever finds it due first, the sweep or a person's late decision, it goes
the same way."""

import uuid

import pytest

from approvals import notifications, schedule
from approvals.decisions import decide
from approvals.models import ApprovalRequest, Notification, RequestStatus
from audit.models import AuditRecord
from runs.models import Run, RunStatus, Step, StepStatus
from tests.approvals.conftest import later, open_request, waiting_run
from tests.factories import step

pytestmark = pytest.mark.django_db

# Each timeout policy (tests.workflows, tests.approvals.workflows) and who it asks.
ASKED = {
    "test-approval": ["ann@example.com", "bob@example.com"],  # reject after 3 days
    "test-approval-escalate": ["ann@example.com", "bob@example.com"],  # then the deputies
    "test-approval-cancel": ["ann@example.com"],  # cancel after a day
}


@pytest.fixture(params=list(ASKED))
def workflow(request):
    return request.param


def _asked_then_changed(workflow: str, t0, mailoutbox) -> ApprovalRequest:
    """The request made and mailed at t0; then an earlier step's result corrected, which
    changes what the approval step shows."""
    run = waiting_run(workflow)
    request = open_request(run, t0)
    assert notifications.publish_notifications(now=t0).sent == len(ASKED[workflow])
    mailoutbox.clear()
    Step.objects.filter(run=run, name="prepare").update(result={"order": "corrected-order"})
    return request


def _records(run, action):
    return AuditRecord.objects.filter(run=run, action=action)


def _superseded_not_timed_out(request: ApprovalRequest, new: ApprovalRequest, due,
                              mailoutbox) -> None:
    request.refresh_from_db()
    assert request.status == RequestStatus.SUPERSEDED and request.superseded_by_id == new.pk
    assert request.escalation_level == 0
    assert (request.decided_by, request.decided_by_label, request.decision_id) == \
        (None, "", None)
    new.refresh_from_db()
    assert new.status == RequestStatus.PENDING and new.escalation_level == 0
    assert new.snapshot["order"] == "corrected-order"
    assert new.snapshot_hash != request.snapshot_hash
    assert new.approvers == request.approvers
    assert new.requested_at == due and new.due_at == due + request.timeout
    run = Run.objects.get(pk=request.run_id)
    assert run.status == RunStatus.WAITING
    assert step(run, "approve").status == StepStatus.WAITING
    assert _records(run, "approval_superseded").count() == 1
    assert _records(run, "approval_opened").count() == 2
    for never in ("approval_escalated", "approval_decided", "approval_timed_out"):
        assert not _records(run, never).exists(), never
    # Its approvers are asked about the payload as it is now (mailed by the sweep's pass,
    # or here); no deputy is mailed.
    assert not Notification.objects.filter(kind="escalation").exists()
    notifications.publish_notifications(now=due)
    assert sorted(m.to[0] for m in mailoutbox) == ASKED[run.workflow_name]
    assert all(f"/approvals/{new.pk}/link/" in m.body for m in mailoutbox)


def test_the_sweep_supersedes_it_instead_of_applying_the_timeout(
        workflow, approvers, dora, ann, t0, mailoutbox):
    request = _asked_then_changed(workflow, t0, mailoutbox)
    due = later(request.due_at, seconds=1)

    report = schedule.sweep(now=due)

    assert (report.escalated, report.timed_out, report.withdrawn) == (0, 0, 0)
    assert report.superseded == 1
    new = ApprovalRequest.objects.get(status=RequestStatus.PENDING)
    _superseded_not_timed_out(request, new, due, mailoutbox)
    # The next pass finds nothing due; the new request is decided as any other.
    report = schedule.sweep(now=later(due, minutes=1))
    assert (report.escalated, report.timed_out, report.superseded) == (0, 0, 0)
    assert decide(new.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                  now=later(due, minutes=1)).recorded
    assert Run.objects.get(pk=request.run_id).status == RunStatus.QUEUED


def test_a_decision_after_the_due_time_supersedes_it_as_the_sweep_would(
        workflow, approvers, dora, ann, t0, mailoutbox):
    request = _asked_then_changed(workflow, t0, mailoutbox)
    due = later(request.due_at, seconds=1)

    said = decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(), now=due)

    assert said.outcome == "superseded", said.message
    assert f"replaced by request {said.new_request.pk}" in said.message
    assert "nothing was approved or rejected" in said.message
    _superseded_not_timed_out(request, said.new_request, due, mailoutbox)
    report = schedule.sweep(now=later(due, minutes=1))
    assert (report.escalated, report.timed_out, report.superseded) == (0, 0, 0)
