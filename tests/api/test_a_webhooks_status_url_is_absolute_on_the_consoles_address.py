"""A webhook delivery's `status_url` is a link its subscriber can follow: absolute, on the
address the console is reached at (APPROVALS_BASE_URL, as approval emails' links are), and
naming the run's state in the API, as every API answer's `status_url` does. The receiver is
a real HTTP server."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from django.urls import resolve

from api import webhook_cursors, webhooks
from api.models import WebhookSubscriber
from tests.factories import new_run

pytestmark = pytest.mark.django_db

BASE = "https://console.example.com/"


class Bodies(list):
    """The JSON bodies a receiver was sent, and its URL."""

    url = ""


@pytest.fixture
def bodies():
    received = Bodies()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    received.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    yield received
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _console_address(settings):
    settings.APPROVALS_BASE_URL = BASE


def test_the_status_url_a_subscriber_is_sent_leads_to_the_runs_state(bodies):
    WebhookSubscriber.objects.create(name="crm", url=bodies.url, secret="k",
                                     **webhook_cursors.cursors_at_head())
    run = new_run()

    report = webhooks.publish()

    assert report.delivered >= 1 and report.failed == 0
    assert bodies, "nothing was delivered"
    for body in bodies:
        url = body["run"]["status_url"]
        assert url.startswith("https://console.example.com/api/"), url
        assert "//api" not in url  # the base's trailing slash is not doubled
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc) == ("https", "console.example.com")
        match = resolve(parts.path)
        assert match.view_name == "api:run_state"
        assert int(match.kwargs["run_id"]) == run.pk
