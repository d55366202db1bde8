"""Classification before any retry, from real httpx exceptions raised against a real local
HTTP server."""

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from runs.errors import PermanentError, TransientError, UnknownOutcome, classify
from runs.models import ErrorClass


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        path = self.path.strip("/")
        if path == "hang":
            threading.Event().wait(2)
            return
        if path == "reset":
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        status = int(path)
        self.send_response(status)
        if status == 429:
            self.send_header("Retry-After", "12")
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"nope!")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _raised(url, timeout=0.3):
    try:
        httpx.post(url, content=b"x", timeout=timeout).raise_for_status()
    except Exception as exc:  # noqa: BLE001 - the point is to classify whatever it is
        return exc
    raise AssertionError("no error raised")


@pytest.mark.parametrize("status, expected", [
    (429, ErrorClass.TRANSIENT), (503, ErrorClass.TRANSIENT),
    (400, ErrorClass.PERMANENT), (401, ErrorClass.PERMANENT), (403, ErrorClass.PERMANENT),
    (404, ErrorClass.PERMANENT), (409, ErrorClass.PERMANENT), (422, ErrorClass.PERMANENT),
    (500, ErrorClass.UNKNOWN), (504, ErrorClass.UNKNOWN),
])
def test_http_statuses_are_classified(server, status, expected):
    assert classify(_raised(f"{server}/{status}")).error_class == expected


def test_429_honours_retry_after(server):
    assert classify(_raised(f"{server}/429")).retry_after == 12


def test_timeout_after_the_request_was_sent_is_unknown(server):
    assert classify(_raised(f"{server}/hang")).error_class == ErrorClass.UNKNOWN


def test_connection_dropped_mid_request_is_unknown(server):
    assert classify(_raised(f"{server}/reset")).error_class == ErrorClass.UNKNOWN


def test_connection_refused_before_sending_is_transient():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    assert classify(_raised(f"http://127.0.0.1:{port}/x")).error_class == ErrorClass.TRANSIENT


def test_the_runtimes_own_errors_keep_their_class():
    assert classify(TransientError("x", retry_after=3)).retry_after == 3
    assert classify(PermanentError("x")).error_class == ErrorClass.PERMANENT
    assert classify(UnknownOutcome("x")).error_class == ErrorClass.UNKNOWN


def test_declared_non_retryable_errors_are_permanent_and_others_unclassified():
    assert classify(KeyError("k"), non_retryable=(KeyError,)).error_class == ErrorClass.PERMANENT
    assert classify(KeyError("k")).error_class == ErrorClass.UNCLASSIFIED


def test_error_messages_are_redacted():
    message = classify(PermanentError("call with token=abc123 and Bearer xyz.789")).message
    assert "abc123" not in message and "xyz.789" not in message
