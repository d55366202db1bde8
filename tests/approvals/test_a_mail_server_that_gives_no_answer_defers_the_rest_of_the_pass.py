"""A mail server that gives no answer (it accepts and never speaks, or refuses the
connection) is tried once per pass: the rest of the pass's notifications are deferred, their
attempts not spent, and sent once the server answers again. A server that answers with a
refusal is about its message: every notification of the pass is still tried."""

import contextlib
import socket
import threading

import pytest

from approvals import notifications
from approvals.models import Notification
from tests.approvals.conftest import later
from tests.silent_listener import silent_listener

pytestmark = pytest.mark.django_db


def _smtp_at(settings, port):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_TIMEOUT = 0.5


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def _refusing_server():
    """A real SMTP server that greets every connection with a refusal and its code."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stopping = threading.Event()

    def serve():
        while not stopping.is_set():
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                with conn:
                    conn.sendall(b"554 5.3.2 not accepting mail\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stopping.set()
        thread.join(5)
        server.close()


def _notes():
    return list(Notification.objects.order_by("next_attempt_at", "pk"))


def _one_tried_the_other_deferred(report, t0):
    assert (report.sent, report.retrying, report.deferred) == (0, 1, 1)
    tried, deferred = _notes()
    assert tried.attempts == 1 and tried.next_attempt_at == later(t0, seconds=30)
    assert deferred.status == "pending" and deferred.attempts == 0
    assert deferred.last_error == ""
    # Tried again with the server, not on the next pass: a pass spends one wait at most.
    assert deferred.next_attempt_at == tried.next_attempt_at


def test_a_server_that_accepts_and_never_answers_is_waited_for_once(pending, settings, t0):
    with silent_listener() as port:
        _smtp_at(settings, port)
        report = notifications.publish_notifications(now=t0)
    _one_tried_the_other_deferred(report, t0)
    assert "timed out" in _notes()[0].last_error


def test_a_refused_connection_defers_the_rest_of_the_pass(pending, settings, t0):
    _smtp_at(settings, _closed_port())
    _one_tried_the_other_deferred(notifications.publish_notifications(now=t0), t0)
    assert "ConnectionRefusedError" in _notes()[0].last_error


def test_the_deferred_are_sent_once_the_server_answers_again(pending, settings, mailoutbox,
                                                             t0):
    _smtp_at(settings, _closed_port())
    notifications.publish_notifications(now=t0)
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert notifications.publish_notifications(now=later(t0, seconds=29)).sent == 0
    assert notifications.publish_notifications(now=later(t0, seconds=30)).sent == 2
    assert sorted(n.attempts for n in _notes()) == [1, 2]
    assert len(mailoutbox) == 2


def test_a_server_that_refuses_with_a_code_is_asked_about_every_notification(pending,
                                                                             settings, t0):
    with _refusing_server() as port:
        _smtp_at(settings, port)
        report = notifications.publish_notifications(now=t0)
    assert (report.retrying, report.deferred) == (2, 0)
    assert all(n.attempts == 1 and "SMTPConnectError" in n.last_error for n in _notes())
