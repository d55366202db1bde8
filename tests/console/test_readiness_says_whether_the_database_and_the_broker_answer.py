"""/ready is what a load balancer or an orchestrator asks: 200 while the database answers
(the broker's state said beside it: without a broker the work waits for the sweeper's
re-send, so the process still serves, degraded), 503 with Retry-After when the database does
not answer. It names what failed by kind only, never a host or a user (real processes whose
database or broker is a port where nothing listens)."""

import json
import socket

import pytest

from tests.processes import manage

ASK = """
import json
from django.test import Client
answer = Client(HTTP_HOST="127.0.0.1").get("/ready")
print(json.dumps([answer.status_code, answer.get("Retry-After"), answer.json()]))
"""


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _ready(**env):
    asking = manage("shell", "-c", ASK, **env)
    out, err = asking.communicate(timeout=60)
    assert asking.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.django_db
def test_ready_when_the_database_and_the_broker_answer(client):
    answer = client.get("/ready")
    assert answer.status_code == 200 and answer["Cache-Control"].startswith("max-age=0")
    assert answer.json() == {"ready": True, "database": "ok", "broker": "ok",
                             "degraded": False}


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_is_down_leaves_it_ready_and_degraded():
    status, retry_after, body = _ready(
        CELERY_BROKER_URL=f"redis://127.0.0.1:{_closed_port()}/0")
    assert (status, retry_after) == (200, None)
    assert body["ready"] is True and body["degraded"] is True
    assert body["database"] == "ok" and body["broker"].startswith("unavailable (")


def test_a_database_that_is_down_is_not_ready():
    port = _closed_port()
    status, retry_after, body = _ready(
        DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/gone")
    assert (status, retry_after) == (503, "30")
    assert body["ready"] is False and body["database"].startswith("unavailable (")
    assert str(port) not in json.dumps(body) and "postgres" not in json.dumps(body)
