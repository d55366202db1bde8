"""A drill of a demo workflow calls the demo's sandbox and nothing else. Where a deployment
serves no sandbox (SANDBOX_ENABLED off, as in production) the drill still checks that the
sandbox answers before it starts a run, and the model it asks is the sandbox's, never the
MODEL_BASE_URL a deployment sets for its real work."""

import http.server
import io
import threading

import pytest
from django.core.management import CommandError, call_command

from runs.models import Run


class Recorder(http.server.BaseHTTPRequestHandler):
    """A remote system that is not the sandbox: it counts what reaches it."""

    paths: list[str] = []

    def _answer(self):
        Recorder.paths.append(f"{self.command} {self.path}")
        body = b'{"error": "not found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def real_system():
    Recorder.paths = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.django_db
def test_without_a_sandbox_served_here_the_drill_still_refuses_what_is_not_the_sandbox(
        settings, monkeypatch, real_system):
    settings.SANDBOX_ENABLED = False
    monkeypatch.delenv("SANDBOX_BASE_URL", raising=False)
    settings.SANDBOX_BASE_URL = f"{real_system}/sandbox"
    with pytest.raises(CommandError, match="no demo sandbox answers"):
        call_command("drill", "invoice-approval", stdout=io.StringIO())
    assert not Run.objects.exists()
    # The probe's read of the counters, and no business traffic.
    assert Recorder.paths == ["GET /sandbox/stats"]


@pytest.mark.django_db(transaction=True)
def test_the_drill_asks_the_sandbox_s_model_not_the_one_the_deployment_sets(
        settings, monkeypatch, live_sandbox, real_system):
    model = f"{real_system}/v1"
    monkeypatch.setenv("MODEL_BASE_URL", model)
    settings.MODEL_BASE_URL = model
    out = io.StringIO()
    call_command("drill", "invoice-approval", stdout=out)
    assert "all applicable drills passed" in out.getvalue()
    assert Recorder.paths == []
    assert Run.objects.filter(drill=True).count() == 5
