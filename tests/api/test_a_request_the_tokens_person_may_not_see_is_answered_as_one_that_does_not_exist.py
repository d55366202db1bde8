"""An approval request the token's person may not see (neither its approver nor the one who
asked for it, approvals.permissions.can_view: the console's rule) is answered by every
approval operation of the API exactly as a request that does not exist: the same status,
the same body, the same words, whatever body is sent with it. Told apart (403 "it can be
decided only by its approvers" for one, 404 for the other), the answer would let anyone
holding a token try ids to learn which requests exist, as the console's page answers them
alike for that reason (tests/approvals/test_a_request_one_may_not_see_is_answered_as_one_
that_does_not_exist.py). Nothing is decided or recorded, and the refusal is logged for the
operators. Who sees it and may not decide it, its requester under four eyes, is still told
why with 403 (tests/api/test_who_may_not_decide_is_refused_before_the_body_is_looked_at.py).
"""

import json
import re
import uuid

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

import tests.approvals.workflows  # noqa: F401  (the approval workflows)
from api.tokens import token_create
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from runs.reads.cursors import encode_keyset
from tests.approvals.conftest import open_request, waiting_run

pytestmark = pytest.mark.django_db

# A decision_id the caller sends: the same for both ids, so both answers may echo it.
DECISION_ID = "7e0f3a4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b"

# Each way a decision may be sent, by the path of the operation it takes: a body the
# decision would record, a rejection without a comment (decide's own check of the body), a
# body that fails the schema (refused before the operation runs), a query parameter the
# operation does not declare, a body that is not JSON, and one not sent as JSON.
JSON = "application/json"
DECISIONS = {
    "an approval": ("", json.dumps({"approve": True, "comment": "looks right",
                                    "decision_id": DECISION_ID}), JSON),
    "a rejection without a comment": ("", json.dumps({"approve": False,
                                                      "decision_id": DECISION_ID}), JSON),
    "a body that fails its schema": ("", json.dumps({"approve": "perhaps",
                                                     "decision_id": "no"}), JSON),
    "a query parameter it does not take": ("?dry_run=1", json.dumps(
        {"approve": True, "decision_id": DECISION_ID}), JSON),
    "a body that is not JSON": ("", '{"approve": tru', JSON),
    "a body not sent as JSON": ("", "approve=true", "application/x-www-form-urlencoded"),
}


@pytest.fixture(autouse=True)
def _approval_links(settings):
    settings.APPROVALS_BASE_URL = "http://testserver"


@pytest.fixture
def hidden(db):
    """A waiting test-approval run's pending request (ann, of the group it names, its
    approver), and the headers of a token for its workflow acting for carol, who is no
    approver of anything and asked for nothing."""
    ann = User.objects.create_user("ann")
    ann.groups.add(Group.objects.get_or_create(name="approvers")[0])
    carol = User.objects.create_user("carol")
    approval = open_request(waiting_run(), timezone.now())
    _, plaintext = token_create(name="carols", workflows=["test-approval"],
                                acting_user=carol)
    return approval, {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _missing_id() -> int:
    return ApprovalRequest.objects.order_by("-pk").values_list("pk", flat=True)[0] + 1000


def _decision(client, headers, pk: int, how: str) -> tuple[int, str]:
    """The status and the body of a decision on request `pk`, sent `how` (DECISIONS), with
    the id asked for written as ID."""
    query, body, content_type = DECISIONS[how]
    response = client.post(f"/api/approvals/{pk}/decision{query}", body,
                           content_type=content_type, **headers)
    return response.status_code, re.sub(rf"\b{pk}\b", "ID", response.content.decode())


@pytest.mark.parametrize("how", DECISIONS)
def test_a_decision_on_a_hidden_request_and_on_a_missing_one_get_the_same_answer(
        client, hidden, caplog, how):
    approval, carols = hidden
    records = AuditRecord.objects.filter(run_id=approval.run_id).count()

    on_hidden = _decision(client, carols, approval.pk, how)
    on_missing = _decision(client, carols, _missing_id(), how)

    assert on_hidden == on_missing
    assert on_hidden[0] in (400, 404, 415, 422)
    assert "approvers" not in on_hidden[1] and "You may not decide" not in on_hidden[1]
    # Nothing was decided or recorded, and the run still waits for its approver.
    approval.refresh_from_db()
    assert approval.status == RequestStatus.PENDING and approval.decision_id is None
    assert approval.decided_by_id is None and approval.settled_at is None
    assert AuditRecord.objects.filter(run_id=approval.run_id).count() == records
    assert Run.objects.get(pk=approval.run_id).status == RunStatus.WAITING
    if on_hidden[0] == 404:
        # The operators are told whom it was kept from.
        assert f"approval request {approval.pk}: carol" in caplog.text


def test_the_decision_answers_not_found_as_the_document_says(client, hidden):
    approval, carols = hidden
    status, body = _decision(client, carols, approval.pk, "an approval")
    assert status == 404
    assert body == '{"error": "request_not_found", "detail": "no approval request ID for ' \
                   'this token"}'


def test_the_inbox_shows_nothing_of_a_hidden_request_from_any_place(client, hidden):
    approval, carols = hidden

    def inbox(after: str = "") -> tuple[int, dict]:
        response = client.get("/api/approvals" + (f"?after={after}" if after else ""),
                              **carols)
        return response.status_code, response.json()

    assert inbox() == (200, {"requests": [], "next_cursor": None})
    # A cursor naming the hidden request's place, and one naming a request that is none.
    place = (approval.due_at, approval.requested_at)
    assert inbox(encode_keyset((*place, approval.pk))) \
        == inbox(encode_keyset((*place, _missing_id()))) \
        == (200, {"requests": [], "next_cursor": None})


def test_its_approver_still_decides_it(client, hidden):
    approval, _ = hidden
    _, plaintext = token_create(name="anns", workflows=["test-approval"],
                                acting_user=User.objects.get(username="ann"))
    response = client.post(f"/api/approvals/{approval.pk}/decision",
                           {"approve": True, "comment": "looks right",
                            "decision_id": str(uuid.uuid4())},
                           content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200 and response.json()["outcome"] == "recorded"
    assert ApprovalRequest.objects.get(pk=approval.pk).status == RequestStatus.APPROVED
