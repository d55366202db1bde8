"""A token that acts for nobody has no person's permission to keep from it, so a bulk start
(POST /api/bulk) and a pause or resume of a workflow's dispatch name what is wrong with the
body first (a bulk job's reason too long once the job's mark is added included), as they do
for a token that acts for a person (422 naming the field, 400 for a workflow that is not the
token's), and only a body with no fault gets 403 `no_acting_user`. Nothing is made either
way: no bulk job, no pause added or lifted, no record."""

import json

import pytest
from django.contrib.auth.models import User

from api.tokens import token_create
from approvals.models import ApprovalRequest, BulkJob
from audit.models import AuditRecord
from runs.machine import dispatch
from runs.machine.storable import PERSON_TEXT_MAX
from runs.models import ControlRecord, DispatchPause, RunStatus, StepStatus
from tests.factories import SYSTEM, new_run, place

pytestmark = pytest.mark.django_db

BIDI = "INC-7 \u202egnirrets"


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.fixture
def nobodys(db):
    """The headers of a token for test-orders that acts for nobody."""
    boss = User.objects.create_superuser("boss")
    _, plaintext = token_create(name="no-person", workflows=["test-orders"], created_by=boss)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


@pytest.fixture
def failed_run(db):
    return place(new_run("test-orders"), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


def _post(client, headers, path, body):
    return client.post(path, json.dumps(body), content_type="application/json", **headers)


def _written():
    return (BulkJob.objects.count(), ApprovalRequest.objects.count(),
            list(DispatchPause.objects.values_list("workflow_name", "system", "reason")),
            ControlRecord.objects.count(), AuditRecord.objects.count())


@pytest.mark.parametrize(("body", "field"), [
    ({"action": "resume", "reason": BIDI}, "reason"),
    ({"action": "retry_step", "reason": "INC-7", "step": "no-such-step"}, "step"),
    ({"action": "terminate", "reason": "INC-7", "step": "create-task"}, "step"),
    ({"action": "resume", "reason": "INC-7", "stpe": "create-task"}, "stpe"),
    # Too long only once each run's record adds the job's mark: a fault of the reason too.
    ({"action": "resume", "reason": "x" * (PERSON_TEXT_MAX - 5)}, "reason"),
])
def test_a_bulk_start_names_the_field_at_fault_before_saying_it_acts_for_nobody(
        client, nobodys, failed_run, body, field):
    before = _written()
    response = _post(client, nobodys, "/api/bulk", body)
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [[field]]
    assert _written() == before


def test_a_bulk_start_on_a_workflow_not_the_tokens_is_400_before_saying_it_acts_for_nobody(
        client, nobodys, failed_run):
    before = _written()
    response = _post(client, nobodys, "/api/bulk", {
        "action": "resume", "reason": "INC-7", "filters": {"workflow": "test-saga"}})
    assert (response.status_code, response.json()["error"]) == (400, "invalid_bulk_job"), \
        response.content
    assert "filters.workflow" in response.json()["detail"]
    assert _written() == before


def test_a_well_formed_bulk_start_is_refused_as_acting_for_nobody(client, nobodys,
                                                                  failed_run):
    before = _written()
    response = _post(client, nobodys, "/api/bulk", {
        "action": "retry_step", "reason": "INC-7 tracker back", "step": "create-task"})
    assert (response.status_code, response.json()["error"]) == (403, "no_acting_user"), \
        response.content
    assert _written() == before


@pytest.mark.parametrize("change", ["pause", "resume"])
@pytest.mark.parametrize(("body", "field"), [
    ({"reason": BIDI}, "reason"),
    ({"reason": "INC-7", "system": "no-such-system"}, "system"),
    ({"reason": "INC-7", "sytem": "ledger"}, "sytem"),
])
def test_a_pause_or_resume_names_the_field_at_fault_before_saying_it_acts_for_nobody(
        client, nobodys, change, body, field):
    dispatch.pause_dispatch(workflow="test-orders", actor=SYSTEM, reason="INC-1")
    before = _written()
    response = _post(client, nobodys, f"/api/workflows/test-orders/dispatch/{change}", body)
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [[field]]
    assert _written() == before


def test_a_well_formed_pause_or_resume_is_refused_as_acting_for_nobody(client, nobodys):
    response = _post(client, nobodys, "/api/workflows/test-orders/dispatch/pause",
                     {"reason": "INC-7 ledger down"})
    assert (response.status_code, response.json()["error"]) == (403, "no_acting_user"), \
        response.content
    assert not DispatchPause.objects.exists() and not ControlRecord.objects.exists()

    dispatch.pause_dispatch(workflow="test-orders", actor=SYSTEM, reason="INC-1")
    before = _written()
    response = _post(client, nobodys, "/api/workflows/test-orders/dispatch/resume",
                     {"reason": "INC-7 ledger back"})
    assert (response.status_code, response.json()["error"]) == (403, "no_acting_user"), \
        response.content
    assert _written() == before
