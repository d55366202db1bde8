"""A bulk job's four-eyes request hangs on one of its runs (the lowest id), yet approving it
acts on every run that waits in it. A token scoped to that run's workflow alone must
neither find it in its inbox nor decide it when the job also reaches a workflow the token
was never given: the request reaches every workflow of the job's runs
(approvals.permissions.reaching_only). A token holding all of them sees and decides it."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals.bulk import run_bulk_job
from approvals.models import ApprovalRequest, BulkOutcome, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """olga decides, carl asked: both operators, who may act on every workflow."""
    ensure_roles(Group, Permission)
    olga, carl = User.objects.create_user("olga"), User.objects.create_user("carl")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    return olga, carl


def bearer(user, *workflows) -> dict:
    _, plaintext = token_create(name=f"ops-{len(workflows)}", workflows=list(workflows),
                                acting_user=user)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def approve(client, request_id: int, auth: dict):
    return client.post(f"/api/approvals/{request_id}/decision",
                       {"approve": True, "decision_id": str(uuid.uuid4()), "comment": "ok"},
                       content_type="application/json", **auth)


def inbox_ids(client, auth: dict) -> list[int]:
    response = client.get("/api/approvals", **auth)
    assert response.status_code == 200, response.content
    return [r["id"] for r in response.json()["requests"]]


def test_a_token_for_the_anchor_runs_workflow_alone_neither_lists_nor_decides_it(
        client, people):
    olga, carl = people
    mine = run_with_an_effect("test-orders")
    not_mine = run_with_an_effect("test-charge-then-wait")
    job = bulk_terminate(user=carl)
    assert job.approval.run_id == mine.pk  # hangs on the token's own workflow's run
    orders_only = bearer(olga, "test-orders")

    assert job.approval_id not in inbox_ids(client, orders_only)
    response = approve(client, job.approval_id, orders_only)

    assert response.status_code == 404, response.content
    assert response.json()["error"] == "request_not_found"
    assert ApprovalRequest.objects.get(pk=job.approval_id).status == RequestStatus.PENDING
    assert set(Run.objects.filter(pk__in=[mine.pk, not_mine.pk])
               .values_list("status", flat=True)) == {RunStatus.ATTENTION}
    assert not AuditRecord.objects.filter(action="terminated").exists()
    assert set(BulkOutcome.objects.filter(job=job).values_list("outcome", flat=True)) == {
        BulkOutcome.Outcome.SECOND_PERSON}


def test_a_token_holding_every_workflow_the_job_reaches_lists_and_decides_it(client, people):
    olga, carl = people
    runs = [run_with_an_effect("test-orders"), run_with_an_effect("test-charge-then-wait")]
    job = bulk_terminate(user=carl)
    both = bearer(olga, "test-orders", "test-charge-then-wait")

    assert inbox_ids(client, both) == [job.approval_id]
    response = approve(client, job.approval_id, both)

    assert response.status_code == 200, response.content
    run_bulk_job(job.pk)  # the job's worker applies the approval
    assert set(Run.objects.filter(pk__in=[r.pk for r in runs])
               .values_list("status", flat=True)) == {RunStatus.TERMINATED}


def test_a_job_within_the_tokens_one_workflow_is_listed_and_decided_by_it(client, people):
    olga, carl = people
    run_with_an_effect("test-charge-then-wait")  # in attention, outside the job's filter
    runs = [run_with_an_effect("test-orders"), run_with_an_effect("test-orders")]
    job = bulk_terminate(user=carl, workflow="test-orders")
    orders_only = bearer(olga, "test-orders")

    assert inbox_ids(client, orders_only) == [job.approval_id]
    assert approve(client, job.approval_id, orders_only).status_code == 200
    run_bulk_job(job.pk)  # the job's worker applies the approval
    assert set(Run.objects.filter(pk__in=[r.pk for r in runs])
               .values_list("status", flat=True)) == {RunStatus.TERMINATED}
