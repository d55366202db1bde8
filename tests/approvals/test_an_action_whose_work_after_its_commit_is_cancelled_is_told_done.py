"""What an operator's action does after its own commit (approvals.operator_actions.act)
failing does not tell the person that nothing was done: the action is done.

- An action that ends a wait for a person withdraws that wait's request right after its
  commit. With that withdrawal cancelled by the database (pg_cancel_backend from another
  session), or the session ended there, the person is told the action is done; the run is
  changed once, and the request is withdrawn by the sweep's next full look, once.
- A resume reads the step its run (asleep) waits at again to word its answer; that read cancelled,
  the answer says the resume is done and that what it left is on the run's page."""

import io
import logging
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from api.tokens import token_create
from approvals import schedule
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.approvals.conftest import open_request, waiting_run
from tests.cancelled_statement import cancelled
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api(client, approvers):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", email="olga@example.com")
    olga.groups.add(Group.objects.get(name="operators"))
    _, plaintext = token_create(name="ops", workflows=["test-approval", "test-sleepy"],
                                acting_user=olga)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    client.raise_request_exception = False
    return client


def _terminate(api, run):
    return api.post(f"/api/runs/{run.pk}/actions/terminate", {"reason": "INC-7"},
                    content_type="application/json")


def _statements_to_the_actions_commit(api) -> int:
    """How many statements a terminate over the API sends before its commit (the wrapper
    that aims the cancel does not see COMMITs), counted on another run of the same kind."""
    other = open_request(waiting_run(amount=7))
    with CaptureQueriesContext(connection) as ctx:
        response = _terminate(api, other.run)
    assert response.status_code == 200, response.content
    assert ApprovalRequest.objects.get(pk=other.pk).status == RequestStatus.WITHDRAWN
    sent = [q["sql"] for q in ctx.captured_queries if q["sql"] != "BEGIN"]
    # The action's commit: the first after the run is locked for it.
    locked = next(n for n, sql in enumerate(sent)
                  if sql.startswith('SELECT "runs_run"') and "FOR UPDATE" in sql)
    commit = sent.index("COMMIT", locked)
    return commit - sent[:commit].count("COMMIT")


@pytest.mark.parametrize("terminate", [False, True], ids=["cancelled", "session ended"])
def test_a_withdrawal_that_fails_after_the_actions_commit_is_told_done(api, terminate,
                                                                        caplog):
    before = _statements_to_the_actions_commit(api)
    request = open_request(waiting_run())
    run = request.run
    caplog.set_level(logging.WARNING, logger="approvals")
    try:
        with cancelled(lambda sql: True, nth=before + 1, terminate=terminate) as hit:
            response = _terminate(api, run)
    finally:
        connection.close()
    assert hit
    assert response.status_code == 200, response.content
    assert response.json()["message"].startswith("Terminate: done")
    assert response.json()["state"] == "terminated"
    # The statement aimed at was the withdrawal's: it says so in the log, for the operators.
    assert [r.getMessage() for r in caplog.records if "withdrawing the requests it ended "
            "failed" in r.getMessage()], [r.getMessage() for r in caplog.records]
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1
    # Left for the sweep, which withdraws it at its next full look, once.
    assert ApprovalRequest.objects.get(pk=request.pk).status == RequestStatus.PENDING
    assert schedule.sweep(now=timezone.now() + timedelta(hours=1)).withdrawn == 1
    request.refresh_from_db()
    assert request.status == RequestStatus.WITHDRAWN and request.decision_id is None
    assert AuditRecord.objects.filter(run=run, action="approval_withdrawn").count() == 1
    assert schedule.sweep(now=timezone.now() + timedelta(hours=2)).withdrawn == 0
    call_command("verify_audit", stdout=io.StringIO())


def test_a_read_of_what_a_resume_left_that_fails_after_its_commit_is_told_done(api, caplog,
                                                                               script):
    run = new_run("test-sleepy")
    executor.advance_run(run.pk, worker="w1")
    records = AuditRecord.objects.filter(run=run, action="resumed").count()
    caplog.set_level(logging.WARNING, logger="approvals")
    # The read of the step the resumed run waits at again, which words the answer.
    with cancelled(lambda sql: sql.startswith('SELECT "runs_step"."name" AS "name", '
                                              '"runs_step"."kind"')) as hit:
        response = api.post(f"/api/runs/{run.pk}/actions/resume", {"reason": "INC-8"},
                            content_type="application/json")
    assert hit
    assert response.status_code == 200, response.content
    assert response.json()["message"] == (
        "Resume: done. What it left could not be read just now (the database interrupted "
        "the read): the run's page shows it.")
    assert AuditRecord.objects.filter(run=run, action="resumed").count() == records + 1
    assert [r for r in caplog.records if "reading what it left failed" in r.getMessage()]
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    call_command("verify_audit", stdout=io.StringIO())
