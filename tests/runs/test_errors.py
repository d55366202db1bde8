"""Classification before any retry, from real httpx exceptions raised against a real local
HTTP server."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from runs.machine.errors import (
    IdempotencyKeyReused,
    PermanentError,
    TransientError,
    UnknownOutcome,
    classify,
    key_reused,
)
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
        if path == "reused":
            body = json.dumps({"error": "the key k-1 was used before with other arguments",
                               "code": "idempotency_key_reused", "idempotency_key": "k-1",
                               "first_request_sha256": "a" * 64,
                               "request_sha256": "b" * 64}).encode()
            self.send_response(422)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
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
    (500, ErrorClass.UNKNOWN), (502, ErrorClass.UNKNOWN), (504, ErrorClass.UNKNOWN),
    # Not Implemented: a definite "not done", never an unknown outcome.
    (501, ErrorClass.PERMANENT),
])
def test_http_statuses_are_classified(server, status, expected):
    assert classify(_raised(f"{server}/{status}")).error_class == expected


def test_501_says_the_receiver_did_nothing(server):
    classified = classify(_raised(f"{server}/501"))
    assert classified.error_class == ErrorClass.PERMANENT
    assert "HTTP 501" in classified.message and "did nothing" in classified.message


def test_a_key_reused_with_other_arguments_is_a_permanent_error_of_its_own_class_naming_both(
        server):
    # Its own class: a lookup by that key finds the other request's effect (errors.
    # KEY_HOLDS_ANOTHER_REQUEST); the machine fails it as a permanent error.
    exc = _raised(f"{server}/reused")
    assert isinstance(exc, httpx.HTTPStatusError)
    classified = classify(exc)
    assert classified.error_class == ErrorClass.KEY_REUSED and classified.retry_after is None
    assert "idempotency key k-1 was used before with other arguments" in classified.message
    assert f"sha256 {'a' * 64}" in classified.message
    assert f"sha256 {'b' * 64}" in classified.message
    assert "not sent again" in classified.message
    # The same refusal raised as the runtime's own error (as the demo clients raise it).
    reused = key_reused(exc.response)
    assert isinstance(reused, IdempotencyKeyReused) and isinstance(reused, PermanentError)
    assert (reused.key, reused.first_hash, reused.request_hash) == ("k-1", "a" * 64, "b" * 64)
    assert classify(reused).error_class == ErrorClass.KEY_REUSED
    # Any other 422 is a plain permanent refusal, not a reused key.
    assert key_reused(_raised(f"{server}/422").response) is None


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
