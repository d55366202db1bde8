"""A decision over the API is checked by the one rule approvals.decisions.decide applies
(deny_who_may_not_decide), before the body is read and again under the request's lock, and
the person's grants are read once for all of it: their object permissions once (their own
and their groups': two queries), and for an operator action the check that they still hold
its role once, not once per check. Who may not decide, nor see, the request is answered as
for a request that does not exist, whatever the body, and nothing is written; an approver's
decision is applied once."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import tests.approvals.workflows  # noqa: F401  (the approval workflows)
from api.tokens import token_create
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _approval_links(settings):
    settings.APPROVALS_BASE_URL = "http://testserver"


# Where the decide permission is granted on a request, to a person or to a group.
GRANT_TABLES = ("approvals_approvalrequestuserobjectpermission",
                "approvals_approvalrequestgroupobjectpermission")


def _bearer(person, workflow: str) -> dict:
    _, plaintext = token_create(name=f"t-{uuid.uuid4().hex[:12]}", workflows=[workflow],
                                acting_user=person)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _decide(client, headers, request_id, **body):
    with CaptureQueriesContext(connection) as ctx:
        response = client.post(f"/api/approvals/{request_id}/decision", body,
                               content_type="application/json", **headers)
    return response, sum(any(table in q["sql"] for table in GRANT_TABLES)
                         for q in ctx.captured_queries)


@pytest.fixture
def step_request(db):
    """A waiting test-approval run's pending request, ann an approver (group "approvers")
    and carol no approver of anything."""
    ann = User.objects.create_user("ann", email="ann@example.com")
    ann.groups.add(Group.objects.get_or_create(name="approvers")[0])
    carol = User.objects.create_user("carol", email="carol@example.com")
    return open_request(waiting_run(), timezone.now()), ann, carol


@pytest.mark.parametrize("body", [
    {"approve": True, "comment": "looks right"},
    {"approve": "perhaps"},  # fails the schema: refused before it is looked at
])
def test_a_person_without_the_grant_is_answered_not_found_and_nothing_is_written(
        client, step_request, body):
    approval, _, carol = step_request
    records = AuditRecord.objects.filter(run_id=approval.run_id).count()

    response, grant_reads = _decide(client, _bearer(carol, "test-approval"), approval.pk,
                                    decision_id=str(uuid.uuid4()), **body)

    # Nor may she see it: as a request that does not exist (tests/api/test_a_request_the_
    # tokens_person_may_not_see_is_answered_as_one_that_does_not_exist.py).
    assert response.status_code == 404, response.content
    assert response.json() == {
        "error": "request_not_found",
        "detail": f"no approval request {approval.pk} for this token"}
    assert grant_reads == 2
    approval.refresh_from_db()
    assert approval.status == RequestStatus.PENDING and approval.decision_id is None
    assert approval.decided_by_id is None and approval.settled_at is None
    assert AuditRecord.objects.filter(run_id=approval.run_id).count() == records
    assert Run.objects.get(pk=approval.run_id).status == RunStatus.WAITING


def test_an_approvers_decision_is_applied_once_and_their_grants_read_once(client,
                                                                           step_request):
    approval, ann, _ = step_request
    headers = _bearer(ann, "test-approval")
    decision = {"approve": True, "comment": "looks right", "decision_id": str(uuid.uuid4())}

    response, grant_reads = _decide(client, headers, approval.pk, **decision)
    assert response.status_code == 200 and response.json()["outcome"] == "recorded"
    assert grant_reads == 2
    again, _ = _decide(client, headers, approval.pk, **decision)
    assert again.status_code == 200 and again.json()["outcome"] == "already_recorded"

    approval.refresh_from_db()
    assert approval.status == RequestStatus.APPROVED and approval.decided_by == ann
    assert AuditRecord.objects.filter(run_id=approval.run_id,
                                      action="approval_decided").count() == 1
    assert Run.objects.get(pk=approval.run_id).status == RunStatus.QUEUED


def test_an_operator_actions_approver_has_their_role_read_once_for_every_check(client):
    ensure_roles(Group, Permission)
    olga, carl = (User.objects.create_user(name) for name in ("olga", "carl"))
    for person in (olga, carl):
        person.groups.add(Group.objects.get(name="operators"))
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    asked = client.post(f"/api/runs/{run.pk}/actions/terminate", {"reason": "INC-7"},
                        content_type="application/json", **_bearer(olga, "test-orders"))
    assert asked.status_code == 202, asked.content
    request_id = asked.json()["approval_request"]["id"]

    response, grant_reads = _decide(client, _bearer(carl, "test-orders"), request_id,
                                    approve=True, comment="agreed",
                                    decision_id=str(uuid.uuid4()))

    assert response.status_code == 200 and response.json()["outcome"] == "recorded"
    # Their object permissions (two queries) and that they still hold the role (one),
    # though decide checks before the request's lock and again under it.
    assert grant_reads == 3
    assert ApprovalRequest.objects.get(pk=request_id).status == RequestStatus.APPROVED
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1
