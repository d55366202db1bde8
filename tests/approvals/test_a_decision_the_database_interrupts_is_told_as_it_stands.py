"""An approver's decision from the console, with one of its statements cancelled by the
database (pg_cancel_backend from another session), or its session ended after the commit:
the person is told what became of it, in words that are true.

- cancelled while it is applied to the run: the decision is recorded, not applied yet; a
  warning says so and that it will be applied shortly, and the approvals sweep applies it
  (once, as the approver) when its retry is due;
- cancelled on the decision's own savepoint, or on the rollback to it: the transaction is
  not written in after the error; nothing is recorded, the person is told so (503), and
  may decide again;
- the session ended right after the commit: the decision is recorded and applied, and the
  person is told so, not that nothing was done;
- whichever statement of the decision is cancelled, the answer matches what was written."""

import html
import io
import uuid
from datetime import timedelta

import pytest
from django.contrib.messages import INFO, SUCCESS, WARNING, get_messages
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from approvals import schedule
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.cancelled_statement import cancelled

pytestmark = pytest.mark.django_db(transaction=True)

NOT_YET = "is recorded, but not applied to the run yet"
SHORTLY = "it will be applied automatically shortly; there is nothing more to do"
APPLIED = "Your decision (approved) is recorded."


def _post(client, request, decision_id):
    return client.post(reverse("approvals:decide", kwargs={"pk": request.pk}), {
        "decision": "approve", "comment": "", "decision_id": str(decision_id)})


def _told(response) -> tuple[int, str]:
    assert response.status_code == 302, response.content
    return [(m.level, m.message) for m in get_messages(response.wsgi_request)][-1]


def _stepped_on(run_id):
    # The transition's own record of the decision reaching the run.
    return AuditRecord.objects.filter(run_id=run_id, action="approval_decided")


def _verified():
    call_command("verify_audit", stdout=io.StringIO())


def _sweep_when_due():
    """The approvals sweep now (nothing due yet) and once its retry is due."""
    assert schedule.sweep().settled == 0
    return schedule.sweep(now=timezone.now() + timedelta(minutes=2)).settled


def test_a_cancel_while_the_decision_is_applied_warns_it_is_recorded_and_applied_shortly(
        pending, ann, client):
    client.force_login(ann)
    decision_id = uuid.uuid4()
    with cancelled(lambda sql: sql.startswith("INSERT INTO audit_auditrecord")) as hit:
        level, message = _told(_post(client, pending, decision_id))
    assert hit
    assert level == WARNING, message
    assert message == f"Your decision (approved) {NOT_YET} (the database interrupted it); " \
                      f"{SHORTLY}."
    # Not the database's words, nor a claim that it failed.
    assert "canceling" not in message and "Error" not in message
    pending.refresh_from_db()
    assert pending.status == RequestStatus.APPROVED and pending.decided_by == ann
    assert pending.settled_at is None
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.WAITING
    assert not _stepped_on(pending.run_id).exists()
    # The form sent again before the sweep: nothing changes, and it is still said.
    level, message = _told(_post(client, pending, decision_id))
    assert level == INFO and message.endswith(
        "nothing changed. It is not applied to the run yet; the sweep applies it.")

    assert _sweep_when_due() == 1
    pending.refresh_from_db()
    assert pending.settled_at is not None and pending.apply_error == ""
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.QUEUED
    applied = _stepped_on(pending.run_id).get()
    assert applied.actor_label == "ann" and applied.actor_user_id == ann.pk
    assert applied.data["decision_id"] == str(pending.decision_id)
    assert _sweep_when_due() == 0
    assert _stepped_on(pending.run_id).count() == 1
    _verified()


def test_a_cancel_on_the_decisions_savepoint_records_nothing_and_says_so(pending, ann):
    client = Client(raise_request_exception=False)
    client.force_login(ann)
    records = AuditRecord.objects.count()
    with cancelled(lambda sql: sql.startswith("SAVEPOINT")) as hit:
        response = _post(client, pending, uuid.uuid4())
    assert hit
    assert response.status_code == 503, response.content
    assert "Nothing was done" in html.unescape(response.content.decode())
    pending.refresh_from_db()
    assert pending.status == RequestStatus.PENDING and pending.decision_id is None
    assert pending.settled_at is None and pending.apply_error == ""
    assert AuditRecord.objects.count() == records
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.WAITING

    # Told nothing was done, the person decides again, and that is applied once.
    level, message = _told(_post(client, pending, uuid.uuid4()))
    assert level == SUCCESS and message == APPLIED
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.QUEUED
    assert _stepped_on(pending.run_id).count() == 1
    _verified()


def test_a_cancel_on_the_rollback_to_the_decisions_savepoint_records_nothing_and_says_so(
        pending, ann):
    client = Client(raise_request_exception=False)
    client.force_login(ann)
    records = AuditRecord.objects.count()
    # The application cancelled, then the rollback to the decision's savepoint (the second:
    # the transition's own savepoint is rolled back to first).
    with cancelled(lambda sql: sql.startswith("INSERT INTO audit_auditrecord")) as first, \
            cancelled(lambda sql: sql.startswith("ROLLBACK TO SAVEPOINT"), nth=2) as second:
        response = _post(client, pending, uuid.uuid4())
    assert first and second
    assert response.status_code == 503, response.content
    assert "Nothing was done" in html.unescape(response.content.decode())
    pending.refresh_from_db()
    assert pending.status == RequestStatus.PENDING and pending.decision_id is None
    assert pending.settled_at is None and pending.apply_error == ""
    assert AuditRecord.objects.count() == records
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.WAITING


def test_a_session_ended_after_the_commit_is_told_recorded_not_that_nothing_was_done(
        pending, ann, client):
    client.force_login(ann)
    decision_id = uuid.uuid4()
    # The first statement after the decision's commit (the request read again, before).
    try:
        with cancelled(lambda sql: True, nth=_statements_to_commit(ann, client) + 1,
                       terminate=True):
            response = _post(client, pending, decision_id)
    finally:
        connection.close()  # the next statement connects anew
    level, message = _told(response)
    assert level == SUCCESS and message == APPLIED
    pending.refresh_from_db()
    assert pending.status == RequestStatus.APPROVED and pending.decision_id == decision_id
    assert pending.settled_at is not None
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.QUEUED
    assert _stepped_on(pending.run_id).count() == 1
    _verified()


def _statements_to_commit(ann, client) -> int:
    """How many statements a decision from the console sends up to its commit, counted on
    another request of the same kind."""
    other = open_request(waiting_run(amount=7))
    with CaptureQueriesContext(connection) as ctx:
        _told(_post(client, other, uuid.uuid4()))
    sent = [q["sql"] for q in ctx.captured_queries if q["sql"] not in ("BEGIN",)]
    return sent.index("COMMIT")


def test_whichever_statement_of_a_decision_is_cancelled_the_person_is_told_what_became_of_it(
        approvers, ann):
    client = Client(raise_request_exception=False)
    client.force_login(ann)
    other = open_request(waiting_run(amount=7))
    with CaptureQueriesContext(connection) as ctx:
        _post(client, other, uuid.uuid4())
    sent = [q["sql"] for q in ctx.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]
    # From the view's read of the request on: the session's and the user's reads before it
    # are the middleware's, not the decision's.
    first = next(n for n, sql in enumerate(sent, 1) if "approvals_approvalrequest" in sql)
    assert len(sent) - first > 15
    for nth in range(first, len(sent) + 1):
        request = open_request(waiting_run(amount=100 + nth))
        records = AuditRecord.objects.filter(run_id=request.run_id).count()
        with cancelled(lambda sql: True, nth=nth) as hit:
            response = _post(client, request, uuid.uuid4())
        assert hit, nth
        request.refresh_from_db()
        run = Run.objects.get(pk=request.run_id)
        told = (html.unescape(response.content.decode()) if response.status_code != 302
                else " ".join(_told(response)[1:]))
        if "Nothing was done" in told or "nothing was decided" in told:
            # Said nothing was done (a 503, or the request's payload could not be checked):
            # nothing was.
            assert response.status_code in (302, 503), (nth, hit)
            assert request.status == RequestStatus.PENDING, (nth, hit)
            assert request.decision_id is None and request.settled_at is None, (nth, hit)
            assert AuditRecord.objects.filter(run_id=request.run_id).count() == records
            assert run.status == RunStatus.WAITING
            continue
        level, message = _told(response)
        assert request.status == RequestStatus.APPROVED, (nth, hit, message)
        if request.settled_at is not None:
            assert (level, message) == (SUCCESS, APPLIED), \
                (nth, hit)
            assert run.status == RunStatus.QUEUED
        else:
            assert level == WARNING and NOT_YET in message and SHORTLY in message, \
                (nth, hit, message)
            assert run.status == RunStatus.WAITING
            assert not _stepped_on(request.run_id).exists()
    # Every decision left to the sweep is applied by it, once.
    schedule.sweep(now=timezone.now() + timedelta(minutes=2))
    for request in ApprovalRequest.objects.exclude(status=RequestStatus.PENDING):
        assert request.settled_at is not None and request.apply_error == "", request.pk
        assert _stepped_on(request.run_id).count() == 1
    _verified()
