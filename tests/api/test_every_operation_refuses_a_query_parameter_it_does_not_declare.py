"""Every operation of the API refuses a query parameter it does not declare with 422 naming
it, and does nothing. A start, an action, a decision, a bulk job and a dispatch pause took
one silently: `POST /api/runs/7/actions/terminate?dry_run=1` terminated the run, and an
integrator who believed in the option learnt otherwise from the run. The same request
without the parameter is answered as usual, so the refusal is the parameter's."""

import json
import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.models import WebhookSubscriber
from api.routes import api
from api.subscribers import subscriber_create
from api.tokens import token_create
from approvals.models import ApprovalRequest, BulkJob, RequestStatus
from audit.models import AccessRecord, AuditRecord
from console.roles import ensure_roles
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, Run, RunStatus, Step, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

UNKNOWN = "dry_run"
# Their own file: tests/api/test_an_event_sent_with_a_query_parameter_is_refused_naming_it.py
EVENT_OPERATIONS = {"receive_event", "receive_signed_event"}


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.fixture
def headers(db):
    ensure_roles(Group, Permission)
    made = {}
    for name in ("olga", "carl"):
        person = User.objects.create_user(name)
        person.groups.add(Group.objects.get(name="operators"))
        _, plaintext = token_create(name=name, workflows=["test-orders"], acting_user=person)
        made[name] = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    # olga also keeps webhook subscribers, with the permissions admin asks for.
    User.objects.get(username="olga").user_permissions.add(*Permission.objects.filter(
        content_type__app_label="api", codename__endswith="_webhooksubscriber"))
    return made


def _effected_run():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.SUCCEEDED,
                                "post-ledger": StepStatus.SUCCEEDED})


def _written():
    return (Run.objects.count(), Step.objects.count(), AuditRecord.objects.count(),
            ControlRecord.objects.count(), DispatchPause.objects.count(),
            BulkJob.objects.count(), ApprovalRequest.objects.count(),
            ApprovalRequest.objects.filter(status=RequestStatus.PENDING).count(),
            sorted(Run.objects.values_list("pk", "status")),
            sorted(BulkJob.objects.values_list("pk", "status")),
            sorted(WebhookSubscriber.objects.values_list("name", "url", "secret", "active",
                                                         "workflows")),
            AccessRecord.objects.count())


def _bulk_job(client, headers) -> int:
    started = client.post("/api/bulk", {"action": "resume", "reason": "tracker fixed",
                                        "filters": {"workflow": "test-orders",
                                                    "status": "attention"}},
                          content_type="application/json", **headers["olga"])
    assert started.status_code == 202, started.content
    return started.json()["id"]


def _approval_request(client, headers) -> int:
    pending = client.post(f"/api/runs/{_effected_run().pk}/actions/terminate",
                          {"reason": "customer fraud"}, content_type="application/json",
                          **headers["olga"])
    assert pending.status_code == 202, pending.content
    return pending.json()["approval_request"]["id"]


# By operation id: the request (method, path, body, whose token) each would answer 2xx.
def _requests(client, headers) -> dict:
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED})
    # Still in attention when the second bulk start asks (the actions below move `run` on):
    # a filter that matches no run starts no job.
    place(new_run(), status=RunStatus.ATTENTION)
    job = _bulk_job(client, headers)
    subscriber = WebhookSubscriber(name="erp", url="https://erp.example.com/hook", secret="s",
                                   workflows=["test-orders"])
    subscriber_create(subscriber, by=User.objects.get(username="olga"))
    subscriber_path = f"/api/subscribers/{subscriber.pk}"
    return {
        "start_run": ("post", "/api/runs", {
            "workflow": "test-orders", "business_key": "tenant-1:order-9",
            "input": {"order": "o-9", "amount": 5}}, "olga"),
        "list_runs": ("get", "/api/runs", None, "olga"),
        "get_run_investigation": ("get", f"/api/runs/{run.pk}/investigation", None, "olga"),
        "get_run": ("get", f"/api/runs/{run.pk}", None, "olga"),
        "run_action": ("post", f"/api/runs/{run.pk}/actions/retry_step",
                       {"step": "create-task", "reason": "tracker fixed"}, "olga"),
        "get_run_history": ("get", f"/api/runs/{run.pk}/history", None, "olga"),
        "list_workers": ("get", "/api/workers", None, "olga"),
        "list_approval_requests": ("get", "/api/approvals", None, "carl"),
        "decide_approval_request": (
            "post", f"/api/approvals/{_approval_request(client, headers)}/decision",
            {"approve": True, "decision_id": str(uuid.uuid4()), "comment": "checked"},
            "carl"),
        "start_bulk_job": ("post", "/api/bulk", {
            "action": "resume", "reason": "second wave",
            "filters": {"workflow": "test-orders", "status": "attention"}}, "olga"),
        "get_bulk_job": ("get", f"/api/bulk/{job}", None, "olga"),
        "cancel_bulk_job": ("post", f"/api/bulk/{job}/cancel", None, "olga"),
        "get_dispatch": ("get", "/api/workflows/test-orders/dispatch", None, "olga"),
        "pause_dispatch": ("post", "/api/workflows/test-orders/dispatch/pause",
                           {"reason": "INC-7"}, "olga"),
        "resume_dispatch": ("post", "/api/workflows/test-orders/dispatch/resume",
                            {"reason": "INC-7"}, "olga"),
        "list_subscribers": ("get", "/api/subscribers", None, "olga"),
        "create_subscriber": ("post", "/api/subscribers", {
            "name": "crm", "url": "https://crm.example.com/hook", "secret": "s3cret-4711-only-crm",
            "workflows": ["test-orders"]}, "olga"),
        "get_subscriber": ("get", subscriber_path, None, "olga"),
        "change_subscriber": ("patch", subscriber_path, {"active": False}, "olga"),
        "delete_subscriber": ("delete", subscriber_path, None, "olga"),
    }


def _send(client, headers, request, query=""):
    method, path, body, who = request
    if method == "get":
        return client.get(path + query, **headers[who])
    if method == "delete":
        return client.delete(path + query, **headers[who])
    return client.generic(method.upper(), path + query, json.dumps(body or {}),
                          content_type="application/json", **headers[who])


def _operation_ids() -> set[str]:
    return {operation["operationId"]
            for methods in api.get_openapi_schema()["paths"].values()
            for operation in methods.values()}


def test_every_operation_of_the_document_is_tried_here_or_in_the_events_own_test(client,
                                                                               headers):
    assert set(_requests(client, headers)) | EVENT_OPERATIONS == _operation_ids()


def test_each_operation_refuses_an_unknown_parameter_naming_it_and_does_nothing(client,
                                                                             headers):
    requests = _requests(client, headers)
    for operation, request in requests.items():
        before = _written()
        refused = _send(client, headers, request, f"?{UNKNOWN}=1")
        assert refused.status_code == 422, (operation, refused.content)
        answer = refused.json()
        assert answer["error"] == "invalid_request", operation
        assert [e["loc"] for e in answer["errors"]] == [["query", UNKNOWN]], operation
        assert repr(UNKNOWN) in answer["detail"], operation
        assert _written() == before, operation
        # The same request without it is taken: the body and the token were right.
        taken = _send(client, headers, request)
        assert 200 <= taken.status_code < 300, (operation, taken.content)


def test_a_refused_start_leaves_its_business_key_free(client, headers):
    body = {"workflow": "test-orders", "business_key": "tenant-1:order-1",
            "input": {"order": "o-1", "amount": 5}}
    refused = client.post("/api/runs?dry_run=true", body, content_type="application/json",
                          **headers["olga"])
    assert refused.status_code == 422
    assert not Run.objects.filter(business_key="tenant-1:order-1").exists()
    started = client.post("/api/runs", body, content_type="application/json",
                          **headers["olga"])
    assert started.status_code == 201
    assert Run.objects.filter(business_key="tenant-1:order-1").count() == 1


def test_the_document_declares_the_503_every_operation_may_give(client):
    for path, methods in client.get("/api/openapi.json").json()["paths"].items():
        for method, operation in methods.items():
            answer = operation["responses"].get("503")
            assert answer is not None, (method, path)
            assert "database_unavailable" in answer["description"]
            assert "Retry-After" in answer["headers"]
