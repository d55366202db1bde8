"""A bulk job's four-eyes request hangs on the first of its runs, and approving it acts on
every run of the job that waits in it. It was withdrawn as soon as that one run ended some
other way (resumed and completed, say): "the run ended: it was completed", while the job's
other runs still waited for the second person, and nothing asked for them again. Their
action was lost without a word to the person who asked. The request stands while its runs
may still take the action; approved, each run that can no longer take it is refused and
said on the job, and the others are acted on."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import decisions, schedule
from approvals.bulk import run_bulk_job
from approvals.models import ApprovalRequest, BulkOutcome, RequestStatus
from approvals.operator_actions import act
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import Run, RunStatus
from runs.operator.actions import ActionInput
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """olga decides, carl asked, omar resumes a run meanwhile."""
    ensure_roles(Group, Permission)
    olga, carl, omar = (User.objects.create_user(name) for name in ("olga", "carl", "omar"))
    for user in (olga, carl, omar):
        user.groups.add(Group.objects.get(name="operators"))
    return olga, carl, omar


def test_the_request_stands_when_its_run_completes_and_its_approval_ends_the_others(people):
    olga, carl, omar = people
    anchor, *others = [run_with_an_effect(), run_with_an_effect(), run_with_an_effect()]
    job = bulk_terminate(user=carl)
    assert job.approval.run_id == anchor.pk

    # The run the request hangs on is resumed and completes: it no longer needs ending.
    act("resume", anchor.pk, user=omar, given=ActionInput(reason="fixed upstream"))
    executor.advance_run(anchor.pk, worker="w1")
    assert Run.objects.get(pk=anchor.pk).status == RunStatus.COMPLETED
    schedule.sweep()

    request = ApprovalRequest.objects.get(pk=job.approval_id)
    assert request.status == RequestStatus.PENDING, request.comment

    decision = decisions.decide(request.pk, user=olga, approved=True, comment="incident 42",
                                decision_id=uuid.uuid4())

    assert decision.recorded, decision.message
    run_bulk_job(job.pk)  # the job's worker applies the approval
    assert Run.objects.get(pk=anchor.pk).status == RunStatus.COMPLETED
    assert {Run.objects.get(pk=run.pk).status for run in others} == {RunStatus.TERMINATED}
    outcomes = dict(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome"))
    assert outcomes == {anchor.pk: BulkOutcome.Outcome.REFUSED,
                        **{run.pk: BulkOutcome.Outcome.DONE for run in others}}
