"""A token that acts for nobody cannot decide an approval request: it is told so (403
`no_acting_user`), in the same words whatever request it names and whatever body it sends.
It was answered 404 for a request of another workflow or one that does not exist, but 422
(a rejection without a comment, a body that fails its schema) or 403 for a request of its
own workflows: trying ids, it learnt which requests exist, though it may list none. Nothing
is recorded in any case."""

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


def _bearer(person=None, workflows=("test-orders",)):
    _, plaintext = token_create(name=f"t-{uuid.uuid4().hex[:12]}", workflows=list(workflows),
                                acting_user=person)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


@pytest.fixture
def asked(client):
    """A four-eyes request of test-orders that olga asked for (compensating a run whose
    effects stand), pending."""
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    response = client.post(f"/api/runs/{run.pk}/actions/compensate", {"reason": "INC-7"},
                           content_type="application/json", **_bearer(olga))
    assert response.status_code == 202, response.content
    return response.json()["approval_request"]["id"]


BODIES = {
    "approve": {"approve": True},
    "reject without a comment": {"approve": False},
    "fails its schema": {"approve": "perhaps", "decision_id": "not-a-uuid"},
}


def test_every_request_and_every_body_gets_the_same_answer(client, asked):
    records = AuditRecord.objects.count()
    own = _bearer(workflows=("test-orders",))
    other = _bearer(workflows=("test-payment-wait",))
    missing = ApprovalRequest.objects.order_by("-pk").values_list("pk", flat=True)[0] + 1000
    answers = {}
    for named, (request_id, headers) in {
            "one of its workflows": (asked, own),
            "another workflow's": (asked, other),
            "none": (missing, own)}.items():
        for said, body in BODIES.items():
            response = client.post(f"/api/approvals/{request_id}/decision",
                                   {"decision_id": str(uuid.uuid4()), **body},
                                   content_type="application/json", **headers)
            answers[named, said] = (response.status_code, response.json())
    assert {(status, body["error"]) for status, body in answers.values()} == \
        {(403, "no_acting_user")}, answers
    # Word for word, for a request of its workflows and one that does not exist.
    assert len({str(body) for (named, _), (_, body) in answers.items()
                if named != "another workflow's"}) == 1
    assert "acts for nobody" in answers["none", "approve"][1]["detail"]
    # Nothing decided, nothing recorded.
    request = ApprovalRequest.objects.get(pk=asked)
    assert request.status == RequestStatus.PENDING and request.decided_by is None
    assert AuditRecord.objects.count() == records


def test_a_token_acting_for_a_person_is_still_told_what_it_may_not_see_as_missing(client,
                                                                                 asked):
    """The person's token keeps the 404 for a request beyond its workflows."""
    carl = User.objects.create_user("carl")
    carl.groups.add(Group.objects.get(name="approvers"))
    response = client.post(f"/api/approvals/{asked}/decision",
                           {"decision_id": str(uuid.uuid4()), "approve": True},
                           content_type="application/json",
                           **_bearer(carl, workflows=("test-payment-wait",)))
    assert (response.status_code, response.json()["error"]) == (404, "request_not_found")
