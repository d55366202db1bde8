"""A bulk job whose filters name a workflow the token does not have is refused 400 saying
that workflow is not one of the token's, naming it; it was told to "name the workflow
(filters.workflow)", which it had done. A job naming none, where the token has several,
is still asked to name one. Nothing is started."""

import json

import pytest

from api.tokens import token_create
from approvals.models import ApprovalRequest

pytestmark = pytest.mark.django_db


def _start(client, plaintext, filters):
    return client.post("/api/bulk", json.dumps({"action": "terminate", "reason": "tidy up",
                                                "filters": filters}),
                       content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {plaintext}")


def test_a_workflow_not_the_tokens_is_named_as_not_its(client):
    _, plaintext = token_create(name="erp", workflows=["test-orders", "test-approval"])
    answer = _start(client, plaintext, {"workflow": "test-saga"})
    assert answer.status_code == 400, answer.content
    detail = answer.json()["detail"]
    assert "'test-saga' is not one of this token's workflows" in detail, detail
    assert detail.endswith("test-approval, test-orders")
    unnamed = _start(client, plaintext, {})
    assert unnamed.status_code == 400
    assert unnamed.json()["detail"].startswith("name the workflow (filters.workflow)")
    assert not ApprovalRequest.objects.exists()
