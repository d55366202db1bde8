"""A person's change whose session the server ends as it is committed (a failover, an
operator's pg_terminate_backend), before its COMMIT is sent, was not done: asked afterwards
(runs.execution.lost_commit), the database says so, and the page, the API and the command
say it was not done and to try again, 503, not that it "may have been done"; done again, it
is done once. A connection lost before the commit still says nothing was done. (A COMMIT
whose answer is lost, and one that cannot be asked about:
test_a_change_whose_commit_answer_is_lost_is_told_what_the_database_says.)"""

import json
from contextlib import contextmanager

import pytest
from django.core.management import call_command
from django.db import connection, connections

from api.tokens import token_create
from audit.models import AuditRecord
from console.entry import execute_or_exit
from runs.models import Run, RunStatus
from tests.cancelled_statement import cancelled, other_session

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def session_ended_at_the_commit_of_a_change():
    """The first commit of a transaction that wrote an audit record (the change) finds its
    session ended by another session just before it is sent: what reaches the person is what
    a connection lost during COMMIT gives, a real lost session."""
    wrote: list[bool] = [False]
    ended: list[int] = []
    wrapper = type(connections["default"])
    commit = wrapper._commit

    def watch(execute, sql, params, many, context):
        if "INSERT INTO" in sql and "audit_auditrecord" in sql:
            wrote[0] = True
        return execute(sql, params, many, context)

    def commit_after_the_end(self):
        if wrote[0] and not ended:
            pid = self.connection.info.backend_pid
            with other_session() as other:
                assert other.execute("SELECT pg_terminate_backend(%s, 5000)",
                                     [pid]).fetchone()[0]
            ended.append(pid)
        return commit(self)

    wrapper._commit = commit_after_the_end
    try:
        with connection.execute_wrapper(watch):
            yield ended
    finally:
        wrapper._commit = commit
        connection.close()


def test_a_terminate_over_the_api_whose_session_ends_as_it_commits_was_not_done(
        operator, stuck_run, client):
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    client.raise_request_exception = False
    with session_ended_at_the_commit_of_a_change() as ended:
        response = client.post(f"/api/runs/{stuck_run.pk}/actions/terminate",
                               json.dumps({"reason": "stop it"}),
                               content_type="application/json",
                               HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert ended
    assert (response.status_code, response["Retry-After"]) == (503, "30")
    body = response.json()
    assert body["error"] == "database_unavailable"
    assert "the database says it did not commit it: it was not done; try again" in \
        body["detail"]
    assert "may have been done" not in body["detail"]
    # The server ended the session before the COMMIT reached it: this time nothing stands.
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    assert not AuditRecord.objects.filter(run=stuck_run, action="terminated").exists()
    # Done again: done once.
    again = client.post(f"/api/runs/{stuck_run.pk}/actions/terminate",
                        json.dumps({"reason": "stop it"}), content_type="application/json",
                        HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert again.status_code == 200, again.content
    assert AuditRecord.objects.filter(run=stuck_run, action="terminated").count() == 1
    call_command("verify_audit")


def test_a_terminate_on_the_page_whose_session_ends_as_it_commits_was_not_done(
        operator, stuck_run, client_for):
    client = client_for(operator)
    client.raise_request_exception = False
    seen = Run.objects.get(pk=stuck_run.pk).audit_seq
    with session_ended_at_the_commit_of_a_change() as ended:
        response = client.post(f"/runs/{stuck_run.pk}/terminate/",
                               {"reason": "stop it", "seen": str(seen)})
    assert ended
    assert (response.status_code, response["Retry-After"]) == (503, "30")
    page = response.content.decode()
    assert "the database says it did not commit it: nothing you asked for was done" in page
    assert "may have been done" not in page
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION


def test_a_session_ended_before_the_commit_still_says_nothing_was_done(operator, stuck_run,
                                                                       client):
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    client.raise_request_exception = False
    # The run's lock for the action: the session ends there, before anything is written.
    with cancelled(lambda sql: sql.startswith('SELECT "runs_run"') and "FOR UPDATE" in sql,
                   terminate=True) as hit:
        try:
            response = client.post(f"/api/runs/{stuck_run.pk}/actions/terminate",
                                   json.dumps({"reason": "stop it"}),
                                   content_type="application/json",
                                   HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        finally:
            connection.close()
    assert hit
    assert response.status_code == 503
    assert "nothing was done" in response.json()["detail"]
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION


def test_a_command_whose_session_ends_as_it_commits_says_it_was_not_done(
        operator, stuck_run, capsys):
    with session_ended_at_the_commit_of_a_change() as ended, \
            pytest.raises(SystemExit) as exit_status:
        execute_or_exit("manage.py", ["manage.py", "run_action", str(stuck_run.pk),
                                      "terminate", "--user", "olga", "--reason", "stop it"])
    assert ended
    assert exit_status.value.code == 1
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1, said
    assert "the database says it did not commit it: it was not done; run the command " \
        "again" in said[0]
    assert "may have been done" not in said[0]
    assert "cannot be reached" not in said[0]
