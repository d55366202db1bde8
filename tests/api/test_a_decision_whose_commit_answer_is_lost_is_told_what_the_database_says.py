"""An approver's decision over the API whose connection is cut as its COMMIT is under way is
answered as PostgreSQL says afterwards (runs.execution.lost_commit): the COMMIT answered by
the server and its answer lost, "it was done" (`done_answer_lost`), and sent again with its
decision id it is "already_recorded", recorded once; the COMMIT never reaching the server,
"it was not done; try again", nothing recorded, and sent again it is recorded, once."""

import uuid

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connection

import tests.approvals.workflows  # noqa: F401  (the approval workflows)
from api.tokens import token_create
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from tests import cuttable_proxy
from tests.approvals.conftest import open_request, waiting_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _approval_links(settings):
    settings.APPROVALS_BASE_URL = "http://testserver"


@pytest.fixture
def api(client):
    ann = User.objects.create_user("ann", email="ann@example.com")
    ann.groups.add(Group.objects.get_or_create(name="approvers")[0])
    _, plaintext = token_create(name="erp", workflows=["test-approval"], acting_user=ann)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    client.raise_request_exception = False
    return client


def _decide(api, request, decision_id):
    return api.post(f"/api/approvals/{request.pk}/decision",
                    {"approve": True, "decision_id": str(decision_id)},
                    content_type="application/json")


def _decided(request) -> int:
    return AuditRecord.objects.filter(run_id=request.run_id, action="approval_decided").count()


@pytest.mark.parametrize("reaches_server", [True, False], ids=["answer lost", "commit lost"])
def test_a_decision_whose_commit_lost_its_link_is_told_as_the_database_answers(
        api, reaches_server):
    request = open_request(waiting_run())
    decision_id = uuid.uuid4()
    with cuttable_proxy.database_behind_a_cuttable_link() as proxy:
        proxy.lose_next_commit(reaches_server=reaches_server)
        response = _decide(api, request, decision_id)
        assert proxy.commits_lost == ["answered" if reaches_server else "sent"]
    connection.close()
    assert response.status_code == 503, response.content
    body = response.json()
    stored = ApprovalRequest.objects.get(pk=request.pk)
    if reaches_server:
        assert body["error"] == "done_answer_lost" and "Retry-After" not in response
        assert "the database says it committed it: it was done" in body["detail"]
        assert stored.status == RequestStatus.APPROVED and \
            str(stored.decision_id) == str(decision_id)
    else:
        assert body["error"] == "database_unavailable" and response["Retry-After"] == "30"
        assert "the database says it did not commit it: it was not done; try again" in \
            body["detail"]
        assert stored.status == RequestStatus.PENDING and stored.decision_id is None
        assert _decided(request) == 0
    assert "may have been done" not in body["detail"]

    again = _decide(api, request, decision_id)
    assert again.status_code == 200, again.content
    assert again.json()["outcome"] == ("already_recorded" if reaches_server else "recorded")
    assert ApprovalRequest.objects.get(pk=request.pk).status == RequestStatus.APPROVED
    assert _decided(request) == 1, again.json()
    call_command("verify_audit")
