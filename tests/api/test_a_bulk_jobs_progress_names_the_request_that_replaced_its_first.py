"""GET /api/bulk/{id} answers `approval_request_id` with the request that decides the job's
waiting runs: once a decision finds what may have happened in them changed, the request it
replaced is closed and the job names its successor, the one its approver must open."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals.models import ApprovalRequest, RequestStatus
from console.roles import ensure_roles
from runs.models import Step, StepStatus
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


def test_the_progress_names_the_pending_request_never_the_replaced_one(client):
    ensure_roles(Group, Permission)
    olga, carl = User.objects.create_user("olga"), User.objects.create_user("carl")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    runs = [run_with_an_effect(), run_with_an_effect()]
    job = bulk_terminate(user=carl, workflow="test-orders")
    first = job.approval_id
    Step.objects.filter(run=runs[1], name="post-ledger").update(status=StepStatus.UNKNOWN)
    _, olgas = token_create(name="olga-ops", workflows=["test-orders"], acting_user=olga)
    answer = client.post(f"/api/approvals/{first}/decision",
                         {"approve": True, "decision_id": str(uuid.uuid4()), "comment": "ok"},
                         content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {olgas}")
    assert answer.json()["error"] == "superseded", answer.content
    live = ApprovalRequest.objects.get(pk=first).superseded_by_id

    _, carls = token_create(name="carl-ops", workflows=["test-orders"], acting_user=carl)
    progress = client.get(f"/api/bulk/{job.pk}", HTTP_AUTHORIZATION=f"Bearer {carls}")

    assert progress.status_code == 200, progress.content
    assert progress.json()["approval_request_id"] == live != first
    assert ApprovalRequest.objects.get(pk=live).status == RequestStatus.PENDING
