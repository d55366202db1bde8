"""A bulk job's request is made by its worker as it finishes acting on the runs its filter
matched (approvals.bulk), and the worker marks the job done after that. An approval that
lands in between, while the worker still holds the job, turns the job to applying it
(approvals.bulk_approved.approve_job); the worker finishing must not then mark it done over
the approval, nor act again. Here the second person approves at that very moment, once the
request is committed and before the worker's last write: the job goes on applying, each
run is acted on exactly once, the waiting runs after the approval with both people named,
and no record is written twice."""

import uuid
from collections import Counter

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import bulk, bulk_approved
from approvals.bulk import bulk_progress, run_bulk_job, start_bulk_job
from approvals.decisions import decide
from approvals.models import ApprovalRequest, BulkJob, BulkOutcome
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.approvals.bulk_requests import run_with_an_effect
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """olga decides, carl asks."""
    ensure_roles(Group, Permission)
    users = [User.objects.create_user(name) for name in ("olga", "carl")]
    for user in users:
        user.groups.add(Group.objects.get(name="operators"))
    return users


def nothing_happened_yet() -> Run:
    """A run in attention with no effect that stands: terminated at once, by one person."""
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


def test_an_approval_between_the_request_and_the_end_of_the_acting_pass_is_applied_once(
        people, monkeypatch):
    olga, carl = people
    waiting = [run_with_an_effect(), run_with_an_effect(), run_with_an_effect()]
    at_once = [nothing_happened_yet(), nothing_happened_yet()]
    runs = waiting + at_once
    monkeypatch.setattr(bulk, "BATCH", 2)
    job, _ = start_bulk_job("terminate", RunFilters(workflow="test-orders", workflow_exact=True,
                                                   status=RunStatus.ATTENTION),
                            user=carl, reason="incident 42")
    seen = {}
    make_request = bulk_approved.request_bulk_operator_action

    def approved_as_it_is_made(job, run_ids, **kwargs):
        approval = make_request(job, run_ids, **kwargs)
        seen["before"] = BulkJob.objects.filter(pk=job.pk).values_list(
            "status", "phase").get()
        decision = decide(approval.pk, user=olga, approved=True, decision_id=uuid.uuid4())
        assert decision.recorded, decision.message
        seen["after"] = BulkJob.objects.filter(pk=job.pk).values_list(
            "status", "phase", "lease_until").get()
        seen["last_record"] = AuditRecord.objects.order_by("-pk").values_list(
            "pk", flat=True).first()
        return approval

    monkeypatch.setattr(bulk_approved, "request_bulk_operator_action", approved_as_it_is_made)

    # A worker a batch at a time, as workers hand the job on: the third reaches the end of
    # the runs, makes the request, and the approval lands before it marks the job.
    for _ in range(3):
        job = run_bulk_job(job.pk, batches=1)
        assert (job.status, job.phase) != ("done", "acting")

    assert seen["before"] == ("running", "acting")  # the worker had not finished
    assert seen["after"] == ("running", "applying", None)  # the approval took the job
    assert (job.status, job.phase) == ("running", "applying")
    assert bulk_progress(job.pk).counts == {"done": 2, "second_person": 3}
    assert {Run.objects.get(pk=r.pk).status for r in waiting} == {RunStatus.ATTENTION}

    while job.status == "running":  # the next workers apply it, a batch each
        job = run_bulk_job(job.pk, batches=1)
    run_bulk_job(job.pk)  # a worker sent again finds nothing to do

    job = BulkJob.objects.get(pk=job.pk)
    assert (job.status, job.phase) == ("done", "applying")
    assert set(BulkOutcome.objects.filter(job=job).values_list("outcome", flat=True)) == {
        "done"}
    approval = ApprovalRequest.objects.get(pk=job.approval_id)
    assert sorted(approval.bulk_runs) == sorted(r.pk for r in waiting)
    for run in runs:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        (record,) = AuditRecord.objects.filter(run=run, action="terminated")
        assert record.actor_label == "carl"
        if run in waiting:
            assert record.pk > seen["last_record"]  # after the approval
            assert record.data["approved_by"] == "olga"
            assert record.data["decision_id"] == str(approval.decision_id)
        else:
            assert record.pk < seen["last_record"]
            assert "approved_by" not in record.data
        twice = [key for key, n in Counter(AuditRecord.objects.filter(run=run).values_list(
            "action", "reason")).items() if n > 1]
        assert twice == [], run.pk
    assert AuditRecord.objects.filter(action="terminated").count() == len(runs)
