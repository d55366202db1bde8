"""A run row held by another session left idle in its transaction (a psql prompt, a stuck
script): a person's action on that run through the web server, on a page or over the API,
waited without end, until the web server killed its worker with no answer. Now the web
server's connections wait DB_LOCK_TIMEOUT at most (console.wsgi): the person is told, 503 with
Retry-After, that nothing was done and to try again; nothing was written, and once the
other session lets go the same action is done once and every chain verifies."""

import json

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from api.tokens import token_create
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

# A real web server's application (console.wsgi), asked as a browser and a client would.
ASK = """
import json
import console.wsgi
from django.contrib.auth.models import User
from django.test import Client
page = Client(raise_request_exception=False, HTTP_HOST="127.0.0.1")
page.force_login(User.objects.get(username="olga"))
answer = page.post("/runs/{run}/terminate/", {{"reason": "stop it", "seen": "{seen}"}})
api = Client(raise_request_exception=False, HTTP_HOST="127.0.0.1").post(
    "/api/runs/{run}/actions/terminate", json.dumps({{"reason": "stop it"}}),
    content_type="application/json", HTTP_AUTHORIZATION="Bearer {token}")
print(json.dumps({{"page": [answer.status_code, answer.get("Retry-After"),
                            answer.content.decode()],
                   "api": [api.status_code, api.get("Retry-After"), api.content.decode()]}}))
"""


def hold_the_row(run_id: int) -> psycopg.Connection:
    """Another session that locks the run's row and stays idle in its transaction."""
    params = connection.settings_dict
    holder = psycopg.connect(dbname=params["NAME"], user=params["USER"] or None,
                             host=params["HOST"] or None, port=params["PORT"] or None)
    holder.execute("SELECT id FROM runs_run WHERE id = %s FOR UPDATE", [run_id])
    return holder


def test_an_action_on_a_held_run_is_answered_503_nothing_done_and_done_once_after(
        operator, stuck_run, client_for):
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    seen = Run.objects.get(pk=stuck_run.pk).audit_seq
    records = AuditRecord.objects.filter(run=stuck_run).count()
    holder = hold_the_row(stuck_run.pk)
    try:
        asking = manage("shell", "-c", ASK.format(run=stuck_run.pk, seen=seen, token=plaintext),
                        DB_LOCK_TIMEOUT="1")
        # Without the bound the process waits on the lock as long as it is held.
        out, err = asking.communicate(timeout=120)
        # Still held: the answers came while the other session kept the row.
        assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    finally:
        holder.rollback()
        holder.close()
    assert asking.returncode == 0, err
    answers = json.loads(out.strip().splitlines()[-1])
    status, retry_after, page = answers["page"]
    assert (status, retry_after) == (503, "30")
    assert "Nothing was done" in page and "Traceback" not in page
    status, retry_after, body = answers["api"]
    assert (status, retry_after) == (503, "30")
    body = json.loads(body)
    assert body["error"] == "database_unavailable"
    assert "held by another session" in body["detail"] and "nothing was done" in body["detail"]

    # Nothing was written by either.
    run = Run.objects.get(pk=stuck_run.pk)
    assert (run.status, run.audit_seq) == (RunStatus.ATTENTION, seen)
    assert AuditRecord.objects.filter(run=stuck_run).count() == records

    # Asked again once the row is free: done, once.
    client = client_for(operator)
    response = client.post(f"/runs/{stuck_run.pk}/terminate/",
                           {"reason": "stop it", "seen": str(seen)})
    assert response.status_code == 302
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.TERMINATED
    assert AuditRecord.objects.filter(run=stuck_run, action="terminated").count() == 1
    call_command("verify_audit")
