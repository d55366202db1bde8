"""A person who may not decide an approval request (the one who asked for it, under four
eyes) is refused with 403 whatever body they send: a body that fails its schema, and a
rejection without a comment, were answered 422 naming the field, as if the person might
decide once the body was right. Nothing is recorded. A request of another workflow stays
404, whatever the body."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _bearer(person, workflows=("test-orders",)):
    _, plaintext = token_create(name=f"t-{uuid.uuid4().hex[:12]}", workflows=list(workflows),
                                acting_user=person)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


@pytest.fixture
def asked(client):
    """A four-eyes request olga asked for (compensating a run whose effects stand)."""
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    response = client.post(f"/api/runs/{run.pk}/actions/compensate", {"reason": "INC-7"},
                           content_type="application/json", **_bearer(olga))
    assert response.status_code == 202, response.content
    return olga, run, response.json()["approval_request"]["id"]


@pytest.mark.parametrize("body", [
    {"approve": "perhaps", "decision_id": "not-a-uuid"},  # fails the schema
    {"approve": False},  # a rejection without a comment (decide's own check)
])
def test_the_requester_is_refused_403_before_the_body_is_looked_at(client, asked, body):
    olga, run, approval = asked
    records = AuditRecord.objects.filter(run=run).count()
    response = client.post(f"/api/approvals/{approval}/decision",
                           {"decision_id": str(uuid.uuid4()), **body},
                           content_type="application/json", **_bearer(olga))
    assert response.status_code == 403, response.content
    assert "four eyes" in response.json()["detail"]
    assert ApprovalRequest.objects.get(pk=approval).status == RequestStatus.PENDING
    assert AuditRecord.objects.filter(run=run).count() == records


def test_a_request_of_another_workflow_is_404_whatever_the_body(client, asked):
    olga, _, approval = asked
    response = client.post(f"/api/approvals/{approval}/decision", {"approve": "perhaps"},
                           content_type="application/json",
                           **_bearer(olga, workflows=("test-payment-wait",)))
    assert response.status_code == 404, response.content
