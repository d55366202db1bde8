"""A database that answers but refuses every change (read-only: a standby reached after a
failover, a DBA's default_transaction_read_only). The console's pages and the API's reads
still answer; an action is refused at each door in words that say what happened (a 503 page,
a 503 `database_read_only` with Retry-After, one line from manage.py with exit status 1), never
"Something went wrong", "internal error" or a traceback, and nothing of it is written. Before,
every call of the API with a token was a 500 too, reads included: the token's last-used stamp
is a write (real processes, their sessions read-only by their DATABASE_URL)."""

import json

import pytest
from django.test import Client

from api.tokens import token_create
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.processes import child_env, manage

pytestmark = pytest.mark.django_db(transaction=True)

ASK = """
import json
from django.test import Client
client = Client(raise_request_exception=False, HTTP_HOST="127.0.0.1")
client.cookies["sessionid"] = {session!r}
api = {{"HTTP_AUTHORIZATION": "Bearer " + {token!r}}}
answers = {{
    "list": client.get("/runs/"),
    "page": client.get("/runs/{run}/"),
    "act": client.post("/runs/{run}/terminate/", {{"reason": "stop it"}}),
    "api_read": client.get("/api/runs/{run}", **api),
    "api_act": client.post("/api/runs/{run}/actions/terminate", {{"reason": "stop it"}},
                           content_type="application/json", **api),
}}
print(json.dumps({{name: [a.status_code, a.get("Retry-After"), a.content.decode()]
                  for name, a in answers.items()}}))
"""


def read_only_url() -> str:
    return child_env()["DATABASE_URL"] + "?options=-c%20default_transaction_read_only%3Don"


def test_pages_and_reads_answer_and_an_action_is_refused_in_words_at_every_door(
        operator, stuck_run, settings):
    # Hashed as the command's own process (production's hashers) checks it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    operator.set_password("pw")
    operator.save()
    _, token = token_create(name="crm", workflows=[stuck_run.workflow_name],
                            created_by=operator, acting_user=operator)
    browser = Client()
    browser.force_login(operator)
    records = AuditRecord.objects.filter(run=stuck_run).count()

    asking = manage("shell", "-c", ASK.format(session=browser.cookies["sessionid"].value,
                                              token=token, run=stuck_run.pk),
                    DATABASE_URL=read_only_url())
    out, err = asking.communicate(timeout=90)
    assert asking.returncode == 0, err
    answers = json.loads(out.strip().splitlines()[-1])
    # The log says it in one line, as what it is: not "Internal Server Error" and a
    # traceback for each request while the database refuses changes.
    assert "Traceback" not in err and "Internal Server Error" not in err, err
    [said] = [line for line in err.splitlines() if "/terminate/" in line]
    assert f"Service Unavailable: /runs/{stuck_run.pk}/terminate/: the database refuses " \
        "writes (" in said, said

    # What only reads still answers.
    assert answers["list"][0] == 200 and answers["page"][0] == 200
    status, _, body = answers["api_read"]
    assert status == 200, body
    assert json.loads(body)["id"] == stuck_run.pk

    status, retry_after, page = answers["act"]
    assert (status, retry_after) == (503, "30")
    page = " ".join(page.split())
    assert "The database accepts no changes just now" in page
    assert "Nothing you asked for was done" in page
    assert "Traceback" not in page and "Something went wrong" not in page

    status, retry_after, body = answers["api_act"]
    assert (status, retry_after) == (503, "30")
    answer = json.loads(body)
    assert answer["error"] == "database_read_only"
    assert "read-only" in answer["detail"] and "nothing was done" in answer["detail"]

    command = manage("run_action", "--user", "olga", "--reason", "stop it", str(stuck_run.pk),
                     "terminate", DATABASE_URL=read_only_url(), CLI_PASSWORD="pw")
    _, err = command.communicate(timeout=90)
    assert command.returncode == 1, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("manage.py run_action: the database refuses changes just now (")
    assert "nothing was done" in lines[0]

    # Nothing of any of them was written.
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    assert AuditRecord.objects.filter(run=stuck_run).count() == records
