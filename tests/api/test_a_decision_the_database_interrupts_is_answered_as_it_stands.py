"""A decision over the API, with one of its statements cancelled by the database
(pg_cancel_backend from another session), or its session ended after the commit: the
answer says what became of it.

- cancelled while it is applied to the run: 200 `recorded` with `application` "pending" (the
  schema documents it): recorded, not applied yet; the approvals sweep applies it once, as
  the approver, when its retry is due;
- cancelled on the decision's own savepoint: 503 `database_unavailable`, nothing recorded,
  and the same decision sent again is recorded;
- the session ended after the commit: 200 `recorded`, "applied", not a 503 saying nothing
  was done."""

import io
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import tests.approvals.workflows  # noqa: F401  (the approval workflows)
from api.tokens import token_create
from approvals import schedule
from approvals.models import RequestStatus
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.cancelled_statement import cancelled

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _approval_links(settings):
    settings.APPROVALS_BASE_URL = "http://testserver"
    settings.APPROVALS_SETTLE_RETRY_SECONDS = 60


@pytest.fixture
def ann(db):
    ann = User.objects.create_user("ann", email="ann@example.com")
    ann.groups.add(Group.objects.get_or_create(name="approvers")[0])
    return ann


@pytest.fixture
def api(client, ann):
    _, plaintext = token_create(name="erp", workflows=["test-approval"], acting_user=ann)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    client.raise_request_exception = False
    return client


def _decide(api, request, decision_id):
    return api.post(f"/api/approvals/{request.pk}/decision",
                    {"approve": True, "decision_id": str(decision_id)},
                    content_type="application/json")


def _applied(run_id):
    return AuditRecord.objects.filter(run_id=run_id, action="approval_decided")


def test_a_cancel_while_it_is_applied_answers_recorded_and_pending(api, ann):
    request = open_request(waiting_run())
    with cancelled(lambda sql: sql.startswith("INSERT INTO audit_auditrecord")) as hit:
        response = _decide(api, request, uuid.uuid4())
    assert hit
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["outcome"] == "recorded" and body["application"] == "pending"
    assert body["message"] == (
        "Your decision (approved) is recorded, but not applied to the run yet (the "
        "database interrupted it); it will be applied automatically shortly; there is "
        "nothing more to do.")
    assert body["approval_request"]["status"] == "approved"
    assert Run.objects.get(pk=request.run_id).status == RunStatus.WAITING
    assert not _applied(request.run_id).exists()

    assert schedule.sweep().settled == 0
    assert schedule.sweep(now=timezone.now() + timedelta(minutes=2)).settled == 1
    assert Run.objects.get(pk=request.run_id).status == RunStatus.QUEUED
    applied = _applied(request.run_id).get()
    assert applied.actor_user_id == ann.pk
    request.refresh_from_db()
    assert request.settled_at is not None and request.apply_error == ""
    call_command("verify_audit", stdout=io.StringIO())

    # Sent again: already recorded, and now applied.
    again = _decide(api, request, request.decision_id)
    assert again.status_code == 200
    assert (again.json()["outcome"], again.json()["application"]) == \
        ("already_recorded", "applied")
    assert _applied(request.run_id).count() == 1


def test_a_cancel_on_the_decisions_savepoint_answers_503_and_records_nothing(api):
    request = open_request(waiting_run())
    records = AuditRecord.objects.filter(run_id=request.run_id).count()
    decision_id = uuid.uuid4()
    with cancelled(lambda sql: sql.startswith("SAVEPOINT")) as hit:
        response = _decide(api, request, decision_id)
    assert hit
    assert response.status_code == 503, response.content
    assert response.json()["error"] == "database_unavailable"
    assert "nothing was done" in response.json()["detail"]
    request.refresh_from_db()
    assert request.status == RequestStatus.PENDING and request.decision_id is None
    assert AuditRecord.objects.filter(run_id=request.run_id).count() == records

    again = _decide(api, request, decision_id)
    assert again.status_code == 200
    assert (again.json()["outcome"], again.json()["application"]) == ("recorded", "applied")
    assert _applied(request.run_id).count() == 1


def test_a_session_ended_after_the_commit_answers_recorded_not_503(api):
    other = open_request(waiting_run(amount=7))
    with CaptureQueriesContext(connection) as ctx:
        assert _decide(api, other, uuid.uuid4()).status_code == 200
    sent = [q["sql"] for q in ctx.captured_queries if q["sql"] != "BEGIN"]
    # The decision's commit: the first after its savepoint.
    savepoint = next(n for n, sql in enumerate(sent) if sql.startswith("SAVEPOINT"))
    commit = sent.index("COMMIT", savepoint)
    # The wrapper does not see COMMITs: the statements before this one, less the others.
    before = commit - sent[:commit].count("COMMIT")

    request = open_request(waiting_run())
    decision_id = uuid.uuid4()
    try:
        with cancelled(lambda sql: True, nth=before + 1, terminate=True):
            response = _decide(api, request, decision_id)
    finally:
        connection.close()
    assert response.status_code == 200, response.content
    assert (response.json()["outcome"], response.json()["application"]) == \
        ("recorded", "applied")
    request.refresh_from_db()
    assert request.status == RequestStatus.APPROVED and request.decision_id == decision_id
    assert request.settled_at is not None
    assert _applied(request.run_id).count() == 1
