"""A database whose every allowed connection is in use (max_connections reached by other
clients, or a limit on the role or the database: FATAL "too many clients already", "too many
connections for role") is running and answering: a command, a page and an API call say that,
with what to do, instead of "cannot be reached; check DATABASE_URL and that PostgreSQL is
running", which sent the person to the wrong place (real processes; the limit is a role's
CONNECTION LIMIT 0, so that no other session of the shared server is refused)."""

import json
import uuid

import pytest
from django.db import connection

from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

ASK = """
import json
from django.test import Client
from api.tokens import SCHEME
client = Client(raise_request_exception=False, HTTP_HOST="127.0.0.1")
client.cookies["sessionid"] = "a-session-someone-logged-in-with"  # read from the database
page = client.get("/runs/")
api = client.get("/api/runs/1", HTTP_AUTHORIZATION="Bearer " + SCHEME + "_abcdef_secretsecret")
print(json.dumps({"page": [page.status_code, page.get("Retry-After"), page.content.decode()],
                  "api": [api.status_code, api.get("Retry-After"), api.content.decode()]}))
"""


@pytest.fixture
def role_at_its_limit():
    """A role allowed no connection at all: each session it asks for is refused as one over
    max_connections is (SQLSTATE 53300)."""
    name = f"full_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{name}" LOGIN CONNECTION LIMIT 0')
    db = connection.settings_dict
    yield f"postgres://{name}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    with connection.cursor() as cursor:
        cursor.execute(f'DROP ROLE "{name}"')


def test_a_command_says_the_database_has_no_connection_free(role_at_its_limit):
    command = manage("list_runs", DATABASE_URL=role_at_its_limit)
    _, err = command.communicate(timeout=90)
    assert command.returncode == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("manage.py list_runs: the database refuses new connections (")
    assert "too many connections" in lines[0] and "every connection it allows is in use" in \
        lines[0]
    assert "cannot be reached" not in lines[0] and "DATABASE_URL" not in lines[0]


def test_a_page_and_an_api_call_say_the_database_has_no_connection_free(role_at_its_limit):
    asking = manage("shell", "-c", ASK, DATABASE_URL=role_at_its_limit)
    out, err = asking.communicate(timeout=90)
    assert asking.returncode == 0, err
    answers = json.loads(out.strip().splitlines()[-1])
    status, retry_after, page = answers["page"]
    assert (status, retry_after) == (503, "30")
    page = " ".join(page.split())
    assert "The database has no connection free: nothing was done" in page
    assert "The database is not answering" not in page and "Traceback" not in page
    status, retry_after, body = answers["api"]
    assert (status, retry_after) == (503, "30")
    detail = json.loads(body)["detail"]
    assert detail.startswith("the database refuses new connections (")
    assert "did not answer" not in detail

