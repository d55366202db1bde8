"""Receivers that misbehave for ever do not hold up the publisher: one delivery takes at most
WEBHOOK_TIMEOUT_SECONDS however its receiver dribbles, a receiver's body is never read, and
an endpoint that gives no answer is tried once per pass while the other subscribers' deliveries
go out. A delivery to a URL no delivery can be sent to fails at once, sending nothing. Every
receiver here is a real HTTP server on localhost."""

import socket
import threading
import time
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from api import webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from tests.factories import new_run
from tests.receiver import ScriptedReceiver
from tests.slow_receiver import SlowReceiver

pytestmark = pytest.mark.django_db
DEADLINE = 1.0
# Generous for a slow host; a receiver holds a connection for `HOLD` seconds when nothing cuts
# it off, so a pass that waits for the receiver takes longer than this.
BOUND = 6 * DEADLINE
HOLD = 12.0


@pytest.fixture(autouse=True)
def _short_deadline(settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = DEADLINE


@pytest.fixture
def slow():
    with SlowReceiver(drip=DEADLINE - 0.5, hold=HOLD) as receiver:
        yield receiver


@pytest.fixture
def good():
    with ScriptedReceiver() as receiver:
        yield receiver


def _subscribe(name, url):
    return WebhookSubscriber.objects.create(name=name, url=url, secret="k")


def _timed_publish(now):
    started = time.monotonic()
    report = webhooks.publish(now=now)
    return report, time.monotonic() - started


def _pass_beside_a_receiver_that_answers(good, url: str, *, runs: int = 1):
    """One publish pass for a subscriber at `url` beside "crm", whose receiver answers, with
    `runs` runs to tell of: the pass's report, how long it took, and the subscriber's
    deliveries in order, once crm was sent each run's (the subscriber held up no other)."""
    tested = _subscribe("tested", url)
    _subscribe("crm", f"{good.url}/hooks")
    for _ in range(runs):
        new_run()
    report, elapsed = _timed_publish(timezone.now())
    assert len(good.sent("POST", "/hooks")) == runs
    return report, elapsed, list(WebhookDelivery.objects.filter(subscriber=tested)
                                 .order_by("pk"))


def _exchange_ended(slow, mode: str):
    """The receiver's one exchange of `mode`, once it ended: the receiver learns of a hang-up
    at its next write, a drip or two after it, later on a loaded machine; by `hold` it ends
    the exchange itself, and client_hung_up then says it was not the client that did."""
    deadline = time.monotonic() + slow.hold + 1
    [exchange] = slow.requests(mode)
    while exchange.ended is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return exchange


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_receiver_that_sends_its_headers_a_byte_at_a_time_is_cut_off_at_the_deadline(
        slow, good):
    report, elapsed, [delivery] = _pass_beside_a_receiver_that_answers(
        good, f"{slow.url}/slow-headers")
    # Each byte comes within httpx's read timeout: only a deadline over the whole exchange
    # ends it.
    assert elapsed < BOUND, elapsed
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == \
        ("pending", 1, None)
    assert delivery.last_error
    assert (report.delivered, report.failed) == (1, 0)
    # The connection was closed, not left to the receiver.
    exchange = _exchange_ended(slow, "slow-headers")
    assert exchange.client_hung_up and exchange.ended - exchange.started < BOUND


def test_a_receiver_that_dribbles_its_body_is_delivered_by_its_status_alone(slow, good):
    report, elapsed, [delivery] = _pass_beside_a_receiver_that_answers(
        good, f"{slow.url}/slow-body")
    assert elapsed < BOUND, elapsed
    # Delivered, not cut off at the deadline: the body, which would take minutes, is not
    # waited for.
    assert delivery.status == "delivered"
    assert report.delivered == 2
    exchange = _exchange_ended(slow, "slow-body")
    assert exchange.client_hung_up


def test_an_endless_body_is_never_read(slow, good):
    endless = _subscribe("endless", f"{slow.url}/endless-body")
    new_run()
    report, elapsed = _timed_publish(timezone.now())
    assert elapsed < BOUND, elapsed
    assert WebhookDelivery.objects.get(subscriber=endless).status == "delivered"
    # The client hung up at once: what the receiver got out is what the sockets' buffers
    # took, not a body read into memory.
    exchange = _exchange_ended(slow, "endless-body")
    assert exchange.client_hung_up and exchange.ended - exchange.started < BOUND
    assert exchange.bytes_sent < 8 * 2**20, exchange.bytes_sent


def test_an_endpoint_that_never_answers_is_tried_once_a_pass_and_starves_no_one(slow, good):
    dead = _subscribe("dead", f"{slow.url}/silent")
    _subscribe("crm", f"{good.url}/hooks")
    _subscribe("flaky", f"{good.url}/flaky")
    good.answer("POST", "/flaky", 500)
    runs = 6
    for _ in range(runs):
        new_run()
    now = timezone.now()
    report, elapsed = _timed_publish(now)
    assert elapsed < BOUND, elapsed  # one timeout, not one per delivery
    assert len(slow.requests("silent")) == 1
    assert len(good.sent("POST", "/hooks")) == runs
    # An answer, even an error, is about its delivery: each one of those is tried.
    assert len(good.sent("POST", "/flaky")) == runs
    assert (report.delivered, report.deferred) == (runs, runs - 1)
    first, *rest = WebhookDelivery.objects.filter(subscriber=dead).order_by("pk")
    assert (first.attempts, first.last_status_code) == (1, None) and first.last_error
    assert first.next_attempt_at == now + timedelta(seconds=2)
    # Not tried, so no attempt counted; they wait out the backoff of the endpoint with the
    # delivery that was tried instead of probing it again on every pass.
    assert [(d.status, d.attempts, d.last_error, d.next_attempt_at) for d in rest] == \
        [("pending", 0, "", now + timedelta(seconds=2))] * (runs - 1)

    webhooks.send_due(now=now + timedelta(seconds=1))  # its backoff is not over yet
    assert len(slow.requests("silent")) == 1
    later = now + timedelta(seconds=2)
    webhooks.send_due(now=later)
    # The oldest delivery probes the endpoint again, and its backoff grows.
    assert len(slow.requests("silent")) == 2
    first, *rest = WebhookDelivery.objects.filter(subscriber=dead).order_by("pk")
    assert (first.attempts, first.next_attempt_at) == (2, later + timedelta(seconds=4))
    assert {(d.attempts, d.next_attempt_at) for d in rest} == {(0, later + timedelta(seconds=4))}


def test_a_refused_connection_keeps_the_rest_of_its_deliveries_for_later(good):
    report, _, deliveries = _pass_beside_a_receiver_that_answers(
        good, f"http://127.0.0.1:{_closed_port()}/hooks", runs=3)
    assert [d.attempts for d in deliveries] == [1, 0, 0]
    assert deliveries[0].last_error.startswith("ConnectError")
    assert (report.delivered, report.deferred) == (3, 2)


@pytest.mark.parametrize(("url", "said"), [
    # The connect raised OverflowError inside the HTTP client's task group: the pass ended,
    # at every beat, before any other subscriber's delivery.
    ("http://127.0.0.1:65536/hooks", "its port 65536 is no port (1 to 65535)"),
    # Django's URL field takes this punycode; IDNA refuses the emoji it decodes to.
    ("http://xn--ls8h.example/hooks", "InvalidCodepoint"),
    # The admin's URL field takes this host; the HTTP client refuses it before connecting.
    ("http://\u2603.example/hooks", "Invalid IDNA hostname"),
])
def test_a_stored_url_no_delivery_can_be_sent_to_fails_its_deliveries_at_once(good, url, said):
    report, _, deliveries = _pass_beside_a_receiver_that_answers(good, url, runs=2)
    # No attempt could ever send it: each delivery is failed at its first, saying why, not
    # tried again with backoff until its attempts are spent, nor left behind the first.
    assert [(d.status, d.attempts, d.last_status_code) for d in deliveries] == \
        [(WebhookDelivery.Status.FAILED, 1, None)] * 2
    assert all(d.last_error.startswith("not sent: ") and said in d.last_error
               for d in deliveries)
    assert (report.delivered, report.failed, report.deferred) == (2, 2, 0)
    # Nothing is tried again, however late the next pass.
    later = webhooks.send_due(now=timezone.now() + timedelta(days=1))
    assert (later.delivered, later.failed) == (0, 0)
    assert [d.attempts for d in WebhookDelivery.objects.filter(pk__in=[
        d.pk for d in deliveries])] == [1, 1]


def test_error_text_is_storable_and_bounded():
    try:
        raise httpx.RemoteProtocolError("bad\x00line " + "z" * 600)
    except httpx.HTTPError as exc:
        text = webhooks.error_text(exc)
    assert "\x00" not in text and len(text) <= 500
    assert text.startswith("RemoteProtocolError: bad\\x00line zzz")


def test_a_receiver_answering_with_nul_bytes_leaves_an_error_the_database_stores(good):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def answer():
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 O\x00K\r\nX-\x00: \x00\r\n\r\n")

        threading.Thread(target=answer, daemon=True).start()
        _, _, [delivery] = _pass_beside_a_receiver_that_answers(
            good, f"http://127.0.0.1:{server.getsockname()[1]}/hooks")
    assert delivery.attempts == 1 and delivery.last_status_code is None
    assert delivery.last_error and "\x00" not in delivery.last_error
