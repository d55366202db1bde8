"""With the database not answering, a page and an API call did nothing: they are answered
503 with Retry-After (a person, a browser, a load balancer and a client all know to try
again later), never a 500 that reads as a fault of the request, nor a traceback, on the page
or in the log (a real process whose database is a port where nothing listens)."""

import json
import socket

from tests.processes import manage

ASK = """
from django.test import Client
from api.tokens import SCHEME
client = Client(raise_request_exception=False, HTTP_HOST="127.0.0.1")
client.cookies["sessionid"] = "a-session-someone-logged-in-with"  # read from the database
page = client.get("/runs/")
api = client.get("/api/runs/1", HTTP_AUTHORIZATION="Bearer " + SCHEME + "_abcdef_secretsecret")
print(json.dumps({"page": [page.status_code, page.get("Retry-After"), page.content.decode()],
                  "api": [api.status_code, api.get("Retry-After"), api.content.decode()]}))
"""


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_page_and_an_api_call_are_answered_503_with_retry_after():
    asking = manage("shell", "-c", "import json\n" + ASK,
                    DATABASE_URL=f"postgres://postgres@127.0.0.1:{_closed_port()}/gone")
    out, err = asking.communicate(timeout=60)
    assert asking.returncode == 0, err
    answers = json.loads(out.strip().splitlines()[-1])
    status, retry_after, page = answers["page"]
    assert (status, retry_after) == (503, "30")
    assert "The database is not answering" in page and "Traceback" not in page
    # The log says so in a line for each, without a traceback (console.request_log).
    assert "Traceback" not in err and "Internal Server Error" not in err, err
    said = next(line for line in err.splitlines() if "Service Unavailable: /runs/:" in line)
    assert "ERROR django.request Service Unavailable: /runs/: database connection lost (" \
        in said, said
    said = next(line for line in err.splitlines() if "api.routes" in line)
    assert "WARNING api.routes GET /api/runs/1: the database did not answer" in said, said
    assert all(line[:4].isdigit() for line in err.strip().splitlines()), err  # lines only
    status, retry_after, body = answers["api"]
    assert (status, retry_after) == (503, "30")
    assert json.loads(body)["error"] == "database_unavailable"
