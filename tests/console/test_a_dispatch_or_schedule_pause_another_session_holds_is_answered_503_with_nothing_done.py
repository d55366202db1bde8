"""A workflow's pause row or a schedule's row held by another session left idle in its
transaction: a person's resume of the dispatch (on the workflow's page or over the API) or
pause of the schedule (on the schedules page) through the web server waits DB_LOCK_TIMEOUT
at most (console.wsgi) and is answered 503 with Retry-After, nothing changed or recorded;
once the other session lets go, the same request is done once."""

import json

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from api.tokens import token_create
from audit.chain import Actor
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, ScheduleState
from runs.waiting import schedules
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
resume = page.post("/workflows/test-orders/dispatch/", {{"paused": "0", "reason": "over"}})
pause = page.post("/schedules/test-scheduled/every-minute/pause/",
                  {{"paused": "1", "reason": "INC-4"}})
api = Client(raise_request_exception=False, HTTP_HOST="127.0.0.1").post(
    "/api/workflows/test-orders/dispatch/resume", json.dumps({{"reason": "over"}}),
    content_type="application/json", HTTP_AUTHORIZATION="Bearer {token}")
print(json.dumps({{name: [answer.status_code, answer.get("Retry-After"),
                          answer.content.decode()]
                   for name, answer in (("resume", resume), ("pause", pause), ("api", api))}}))
"""


def test_a_resume_and_a_pause_of_held_rows_are_answered_503_and_done_once_after(
        operator, client_for):
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    dispatch.pause_dispatch(workflow="test-orders", actor=Actor.for_user(operator),
                            reason="INC-1")
    state = schedules.state_of(schedules.registry.get("test-scheduled", "every-minute"),
                               now=timezone.now())
    records = ControlRecord.objects.count()
    params = connection.settings_dict
    holder = psycopg.connect(dbname=params["NAME"], user=params["USER"] or None,
                             host=params["HOST"] or None, port=params["PORT"] or None)
    try:
        holder.execute(f"SELECT id FROM {DispatchPause._meta.db_table} FOR UPDATE")
        holder.execute(f"SELECT id FROM {ScheduleState._meta.db_table} WHERE id = %s "
                       "FOR UPDATE", [state.pk])
        asking = manage("shell", "-c", ASK.format(token=plaintext), DB_LOCK_TIMEOUT="1")
        # Without the bound the process waits on the lock as long as it is held.
        out, err = asking.communicate(timeout=120)
        assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    finally:
        holder.rollback()
        holder.close()
    assert asking.returncode == 0, err
    answers = json.loads(out.strip().splitlines()[-1])
    for name in ("resume", "pause"):
        status, retry_after, page = answers[name]
        assert (status, retry_after) == (503, "30"), name
        assert "Nothing was done" in page and "Traceback" not in page
    status, retry_after, body = answers["api"]
    assert (status, retry_after) == (503, "30")
    body = json.loads(body)
    assert body["error"] == "database_unavailable"
    assert "held by another session" in body["detail"] and "nothing was done" in body["detail"]

    # Nothing was changed or recorded by any of them.
    assert dispatch.pause_in_force("test-orders")
    assert not ScheduleState.objects.get(pk=state.pk).paused
    assert ControlRecord.objects.count() == records

    # Asked again once the rows are free: done, once.
    client = client_for(operator)
    assert client.post("/workflows/test-orders/dispatch/",
                       {"paused": "0", "reason": "over"}).status_code == 302
    assert client.post("/schedules/test-scheduled/every-minute/pause/",
                       {"paused": "1", "reason": "INC-4"}).status_code == 302
    assert not DispatchPause.objects.exists()
    assert ScheduleState.objects.get(pk=state.pk).paused
    assert ControlRecord.objects.filter(action="dispatch_resumed").count() == 1
    assert ControlRecord.objects.filter(action="schedule_paused").count() == 1
