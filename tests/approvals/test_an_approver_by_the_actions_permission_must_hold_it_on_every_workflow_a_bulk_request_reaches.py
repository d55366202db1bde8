"""An operator action's approver whose right rests on the action's own permission decides
only while they hold it (approvals.permissions.still_an_approver). A bulk job's request
hangs on one run but acts on every run waiting in it: holding the permission on that one
run's workflow is not enough where the job reaches another, in the console's pages and
inbox as over the API (one rule, approvals.permissions.reaching_only). Here vera was
named in APPROVALS_FOUR_EYES_APPROVERS when the request was made; the setting names her no
longer, and she holds terminate_run on test-orders alone."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from guardian.shortcuts import assign_perm

from approvals.bulk import run_bulk_job
from approvals.models import ApprovalRequest, RequestStatus
from approvals.permissions import can_decide
from approvals.selectors import inbox
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, Workflow
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def carl(db):
    """The operator who asks."""
    ensure_roles(Group, Permission)
    user = User.objects.create_user("carl", email="carl@example.com")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def asked_of_vera(settings, carl, *, workflow: str = ""):
    """carl's bulk terminate, asked of vera by name; then vera as the setting leaves her:
    an approver by terminate_run on test-orders alone."""
    vera = User.objects.create_user("vera", email="vera@example.com", password="pw")
    orders = Workflow.objects.get(name="test-orders")
    for codename in ("runs.view_runs", "runs.terminate_run"):
        assign_perm(codename, vera, orders)
    settings.APPROVALS_FOUR_EYES_APPROVERS = ["group:operators", "user:vera"]
    job = bulk_terminate(user=carl, workflow=workflow)
    settings.APPROVALS_FOUR_EYES_APPROVERS = ["group:operators"]
    return job, User.objects.get(pk=vera.pk)


def test_holding_it_on_the_anchor_runs_workflow_alone_sees_and_decides_nothing(
        client, settings, carl):
    mine = run_with_an_effect("test-orders")
    not_hers = run_with_an_effect("test-charge-then-wait")
    job, vera = asked_of_vera(settings, carl)
    assert job.approval.run_id == mine.pk  # hangs on the run of her workflow

    assert not can_decide(vera, job.approval)
    assert list(inbox(vera)) == []
    client.force_login(vera)
    # What she may not see is answered as a request that does not exist.
    assert client.get(f"/approvals/{job.approval_id}/").status_code == 404
    response = client.post(f"/approvals/{job.approval_id}/decide/",
                           {"decision": "approve", "decision_id": uuid.uuid4()})

    assert response.status_code == 404
    assert ApprovalRequest.objects.get(pk=job.approval_id).status == RequestStatus.PENDING
    assert set(Run.objects.filter(pk__in=[mine.pk, not_hers.pk])
               .values_list("status", flat=True)) == {RunStatus.ATTENTION}
    assert not AuditRecord.objects.filter(action="terminated").exists()


def test_a_job_within_her_workflow_is_hers_to_decide(client, settings, carl):
    run_with_an_effect("test-charge-then-wait")  # in attention, outside the job's filter
    runs = [run_with_an_effect("test-orders"), run_with_an_effect("test-orders")]
    job, vera = asked_of_vera(settings, carl, workflow="test-orders")

    assert can_decide(vera, job.approval)
    assert list(inbox(vera)) == [job.approval]
    client.force_login(vera)
    response = client.post(f"/approvals/{job.approval_id}/decide/",
                           {"decision": "approve", "decision_id": uuid.uuid4()})

    assert response.status_code == 302
    run_bulk_job(job.pk)  # the job's worker applies the approval
    assert set(Run.objects.filter(pk__in=[r.pk for r in runs])
               .values_list("status", flat=True)) == {RunStatus.TERMINATED}
