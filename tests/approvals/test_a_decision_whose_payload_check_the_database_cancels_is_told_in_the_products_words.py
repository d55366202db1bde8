"""An approver's decision first checks the request's payload: the step's snapshot function,
run on the run's results before the decision's transaction. A statement of that check the
database cancels (pg_cancel_backend from another session, a statement or lock timeout) is
told in the product's words: the database would not wait, nothing was decided or recorded,
try again. The database's own words go to the log, for operators, never to the person. A
failure of the workflow's own snapshot function is still told as itself."""

import logging
import uuid

import pytest
from django.contrib.messages import WARNING, get_messages
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.models import Run, RunStatus
from tests.cancelled_statement import cancelled

pytestmark = pytest.mark.django_db(transaction=True)

# The snapshot function's context reads the run's steps: the first such read of a decision.
SNAPSHOTS_READ = 'SELECT "runs_step"'


def _decide(client, request):
    response = client.post(reverse("approvals:decide", kwargs={"pk": request.pk}), {
        "decision": "approve", "comment": "", "decision_id": str(uuid.uuid4())})
    assert response.status_code == 302, response.content
    return [(m.level, m.message) for m in get_messages(response.wsgi_request)][-1]


def _nothing_recorded(request, records: int):
    request.refresh_from_db()
    assert request.status == RequestStatus.PENDING and request.decision_id is None
    assert request.decided_by is None and request.settled_at is None
    assert AuditRecord.objects.count() == records
    assert Run.objects.get(pk=request.run_id).status == RunStatus.WAITING
    assert ApprovalRequest.objects.count() == 1  # not superseded either


def test_a_cancelled_payload_check_is_told_as_the_database_not_waiting(pending, ann, caplog):
    client = Client(raise_request_exception=False)
    client.force_login(ann)
    records = AuditRecord.objects.count()
    with caplog.at_level(logging.WARNING, logger="approvals.decisions"), \
            cancelled(lambda sql: sql.startswith(SNAPSHOTS_READ)) as hit:
        level, message = _decide(client, pending)
    assert hit
    assert level == WARNING
    assert message == (
        "What this request asks about cannot be checked now: the database would not wait "
        "for what checking it needed (a record held by another session, or the statement "
        "cancelled); nothing was decided or recorded. Try again in a little while.")
    for raw in ("canceling", "OperationalError", "snapshot function", "user request"):
        assert raw not in message
    _nothing_recorded(pending, records)
    # The detail is kept for operators.
    logged = [r.getMessage() for r in caplog.records if r.name == "approvals.decisions"]
    assert len(logged) == 1 and f"approval request {pending.pk}" in logged[0]
    assert "OperationalError: canceling statement due to user request" in logged[0]

    # Tried again, the decision is recorded and applied, once.
    level, message = _decide(client, pending)
    assert message == "Your decision (approved) is recorded."
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.QUEUED
    assert AuditRecord.objects.filter(run_id=pending.run_id,
                                      action="approval_decided").count() == 1
    call_command("verify_audit")


def test_a_snapshot_function_that_fails_is_still_told_as_itself(pending, ann, monkeypatch,
                                                                 caplog):
    spec = registry.get("test-approval", 1).step("approve")

    def broken_snapshot(ctx):
        raise KeyError("prepare-v2")  # a release renamed the step it reads

    monkeypatch.setattr(spec, "fn", broken_snapshot)
    client = Client(raise_request_exception=False)
    client.force_login(ann)
    records = AuditRecord.objects.count()
    with caplog.at_level(logging.WARNING, logger="approvals.decisions"):
        level, message = _decide(client, pending)
    assert level == WARNING
    assert message == ("What this request asks about cannot be checked now (approve: the "
                       "snapshot function failed: KeyError: 'prepare-v2'); nothing was "
                       "decided. Try again later.")
    assert "database" not in message
    assert not [r for r in caplog.records if r.name == "approvals.decisions"]
    _nothing_recorded(pending, records)
