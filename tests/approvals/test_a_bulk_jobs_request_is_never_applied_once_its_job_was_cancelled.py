"""A bulk job's four-eyes request is withdrawn once nothing is left for it to do.

A bulk job names its four-eyes request in the request's own commit, and is marked done
only after it: a person who cancels the job in between leaves a cancelled job whose request
waits for a second person. Approved, that request used to take the action on every run the
job had left waiting, after the person who started the job had asked that nothing more be
done. A cancelled job's request is withdrawn, by the sweep or by the decision that meets it
first, and its approval acts on no run. So is one whose runs have all ended where its
action cannot be taken: it waited for a second person until its timeout, whose approval
then did nothing."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import decisions, schedule
from approvals.models import ApprovalRequest, BulkJob, BulkJobStatus, RequestStatus
from approvals.operator_actions import act
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import Run, RunStatus
from runs.operator.actions import ActionInput
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """carl started the job and cancelled it; olga is the second person."""
    ensure_roles(Group, Permission)
    olga, carl = (User.objects.create_user(name) for name in ("olga", "carl"))
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    return olga, carl


def cancelled_as_its_request_was_made(carl) -> tuple[BulkJob, list[Run]]:
    runs = [run_with_an_effect() for _ in range(3)]
    job = bulk_terminate(user=carl)
    # What the cancel in that moment leaves: cancel_bulk_job's own update, on a job that
    # was still running when it came (done, it refuses; the window is the job's end).
    BulkJob.objects.filter(pk=job.pk).update(status=BulkJobStatus.CANCELLED, cancelled_by=carl)
    return BulkJob.objects.get(pk=job.pk), runs


@pytest.mark.parametrize("first", ["the sweep", "the decision"])
def test_a_cancelled_jobs_request_is_withdrawn_and_its_approval_ends_no_run(people, first):
    olga, carl = people
    job, runs = cancelled_as_its_request_was_made(carl)
    if first == "the sweep":
        schedule.sweep()
        request = ApprovalRequest.objects.get(pk=job.approval_id)
        assert request.status == RequestStatus.WITHDRAWN
        assert f"bulk job {job.pk} was cancelled by carl" in request.comment

    decision = decisions.decide(job.approval_id, user=olga, approved=True,
                                comment="agreed", decision_id=uuid.uuid4())

    assert not decision.recorded
    assert decision.outcome == "closed", decision.message
    assert ApprovalRequest.objects.get(pk=job.approval_id).status == RequestStatus.WITHDRAWN
    assert {Run.objects.get(pk=run.pk).status for run in runs} == {RunStatus.ATTENTION}
    assert not AuditRecord.objects.filter(action="terminated").exists()


def test_a_request_whose_runs_have_all_ended_is_withdrawn_saying_so(people):
    olga, carl = people
    runs = [run_with_an_effect() for _ in range(2)]
    job = bulk_terminate(user=carl)
    first, second = runs
    act("resume", first.pk, user=olga, given=ActionInput(reason="fixed upstream"))
    executor.advance_run(first.pk, worker="w1")
    # The sweep's full look, which withdraws what no due time shows (approvals.sweep_scope).
    schedule.withdraw_stale_requests()
    # One run may still be ended: the request waits for its second person.
    assert ApprovalRequest.objects.get(pk=job.approval_id).status == RequestStatus.PENDING

    act("resume", second.pk, user=olga, given=ActionInput(reason="fixed upstream"))
    executor.advance_run(second.pk, worker="w1")
    assert {Run.objects.get(pk=run.pk).status for run in runs} == {RunStatus.COMPLETED}
    assert schedule.withdraw_stale_requests() == 1

    request = ApprovalRequest.objects.get(pk=job.approval_id)
    assert request.status == RequestStatus.WITHDRAWN
    assert request.comment == (f"every run of bulk job {job.pk} that waited for this "
                               "decision has ended where terminate cannot be taken")
