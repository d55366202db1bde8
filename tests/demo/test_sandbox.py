"""The simulated external systems over real HTTP: pytest-django's live server (and once
`manage.py runserver`) answering real httpx and openai calls, on PostgreSQL, with faults
injected the way an operator would. Every test checks what the systems' tables hold after."""

import io
import json
import socket
import subprocess
import sys
import threading
import time
from decimal import Decimal
from typing import Literal

import httpx
import openai
import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import Client
from pydantic import BaseModel, Field, ValidationError

from demo.clients import ModelClient, build_services
from demo.sandbox import faults
from demo.sandbox.models import (
    Customer,
    Fault,
    LedgerEntry,
    Message,
    ModelCall,
    PaymentUpdate,
    Task,
)
from runs.machine.errors import IdempotencyKeyReused, PermanentError, TransientError, classify
from runs.models import ErrorClass
from tests.processes import ROOT, child_env, stop, wait_for
from tests.test_settings import PRODUCTION_ENV

pytestmark = pytest.mark.django_db(transaction=True)

HOLD = 2.0          # SANDBOX_HOLD_SECONDS in these tests
SHORT_TIMEOUT = 0.5  # a client timeout shorter than the hold


class Classification(BaseModel):
    """The schema a workflow holds the model's answer to (as the invoice workflow does)."""

    category: Literal["office-supplies", "software", "travel", "services"]
    confidence: float = Field(ge=0, le=1)
    reasons: list[str]
    approver_group: str


@pytest.fixture
def sandbox(live_server, settings):
    """An httpx client of the sandbox served by the live server; the settings point the
    demo clients at it too."""
    settings.SANDBOX_BASE_URL = f"{live_server.url}/sandbox"
    settings.MODEL_BASE_URL = f"{live_server.url}/sandbox/model/v1"
    settings.SANDBOX_HOLD_SECONDS = HOLD
    settings.EXTERNAL_TIMEOUT_SECONDS = 5
    with httpx.Client(base_url=settings.SANDBOX_BASE_URL, timeout=10) as client:
        yield client


@pytest.fixture
def services(sandbox):
    built = build_services()
    yield built
    built.close()


@pytest.fixture
def impatient(sandbox, settings):
    """Clients whose timeout is shorter than the sandbox's hold."""
    settings.EXTERNAL_TIMEOUT_SECONDS = SHORT_TIMEOUT
    built = build_services()
    yield built
    built.close()


def create_task(sandbox, key="key-1", title="Approve invoice INV-1", assignee="ada"):
    headers = {"Idempotency-Key": key} if key is not None else {}
    return sandbox.post("/tracker/tasks", headers=headers,
                        json={"title": title, "assignee": assignee, "details": {"n": 1}})


def raised(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the point is to look at whatever was raised
        return exc
    raise AssertionError("nothing was raised")


# Task tracker -----------------------------------------------------------------------------


def test_tracker_creates_one_task_per_idempotency_key(sandbox):
    first = create_task(sandbox)
    again = create_task(sandbox)
    other = create_task(sandbox, key="key-2")

    assert first.status_code == 201
    assert first.json()["id"].startswith("TASK-") and first.json()["status"] == "open"
    assert again.status_code == 200 and again.json() == first.json()
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    assert sandbox.get("/tracker/tasks", params={"key": "key-1"}).json() == first.json()
    assert sandbox.get("/tracker/tasks", params={"key": "nope"}).status_code == 404
    assert Task.objects.count() == 2


def test_tracker_requires_an_idempotency_key(sandbox):
    response = create_task(sandbox, key=None)

    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["error"]
    assert Task.objects.count() == 0


def test_concurrent_creates_with_one_key_make_one_task(sandbox, live_server):
    ids, errors = [], []

    def post():
        try:
            with httpx.Client(base_url=f"{live_server.url}/sandbox", timeout=10) as client:
                ids.append(create_task(client, key="raced").json()["id"])
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == [] and len(ids) == 8
    assert len(set(ids)) == 1
    assert Task.objects.count() == 1


def test_cancel_needs_a_reason_and_cancelling_twice_changes_nothing(sandbox):
    task_id = create_task(sandbox).json()["id"]
    url = f"/tracker/tasks/{task_id}/cancel"

    no_reason = sandbox.post(url, headers={"Idempotency-Key": "c-1"}, json={})
    first = sandbox.post(url, headers={"Idempotency-Key": "c-1"}, json={"reason": "paid twice"})
    second = sandbox.post(url, headers={"Idempotency-Key": "c-2"}, json={"reason": "other"})
    unknown = sandbox.post("/tracker/tasks/TASK-999999/cancel",
                           headers={"Idempotency-Key": "c-3"}, json={"reason": "x"})

    assert no_reason.status_code == 400 and "reason" in no_reason.json()["error"]
    assert first.status_code == 200
    assert first.json()["status"] == "cancelled" and first.json()["cancel_reason"] == "paid twice"
    assert second.status_code == 200 and second.json() == first.json()
    assert unknown.status_code == 404
    assert Task.objects.count() == 1
    assert Task.objects.get().cancel_reason == "paid twice"


# Messenger --------------------------------------------------------------------------------


def test_messenger_does_not_deduplicate_but_finds_by_client_reference(sandbox):
    message = {"to": "ada@example.com", "subject": "Approve", "body": "Please approve",
               "client_reference": "ref-1"}
    first = sandbox.post("/messenger/messages", json=message)
    second = sandbox.post("/messenger/messages", json=message)
    found = sandbox.get("/messenger/messages", params={"client_reference": "ref-1"}).json()
    none = sandbox.get("/messenger/messages", params={"client_reference": "other"}).json()

    assert first.status_code == second.status_code == 201
    assert first.json()["id"] != second.json()["id"]
    assert [m["id"] for m in found["messages"]] == [first.json()["id"], second.json()["id"]]
    assert none == {"messages": []}
    assert Message.objects.filter(client_reference="ref-1").count() == 2


# Ledger -----------------------------------------------------------------------------------


def post_entry(sandbox, ref, amount="125.00", reverses=None):
    return sandbox.post("/ledger/entries", json={
        "transaction_ref": ref, "account": "6000-office", "amount": amount, "currency": "EUR",
        "memo": "invoice INV-1", "reverses": reverses})


def test_ledger_posts_once_per_transaction_ref(sandbox):
    first = post_entry(sandbox, "tx-1")
    again = post_entry(sandbox, "tx-1")
    found = sandbox.get("/ledger/entries", params={"transaction_ref": "tx-1"})
    missing = sandbox.get("/ledger/entries", params={"transaction_ref": "tx-2"})
    bad_amount = post_entry(sandbox, "tx-3", amount="12.345")

    assert first.status_code == 201 and first.json()["amount"] == "125.00"
    assert again.status_code == 200 and again.json() == first.json()
    assert found.json() == first.json()
    assert missing.status_code == 404
    assert bad_amount.status_code == 400
    assert LedgerEntry.objects.count() == 1


def test_ledger_reverses_an_entry_once(sandbox):
    entry = post_entry(sandbox, "tx-1").json()

    wrong_amount = post_entry(sandbox, "tx-1-rev", amount="125.00", reverses=entry["id"])
    reversal = post_entry(sandbox, "tx-1-rev", amount="-125.00", reverses=entry["id"])
    repeated = post_entry(sandbox, "tx-1-rev", amount="-125.00", reverses=entry["id"])
    second = post_entry(sandbox, "tx-1-rev-b", amount="-125.00", reverses=entry["id"])
    unknown = post_entry(sandbox, "tx-x", amount="-1.00", reverses="LE-999999")

    assert wrong_amount.status_code == 422
    assert reversal.status_code == 201
    assert reversal.json()["reverses"] == entry["id"] and reversal.json()["amount"] == "-125.00"
    assert repeated.status_code == 200 and repeated.json() == reversal.json()
    assert second.status_code == 422 and "already been reversed" in second.json()["error"]
    assert unknown.status_code == 422 and "no such entry" in unknown.json()["error"]
    assert LedgerEntry.objects.count() == 2
    assert LedgerEntry.objects.filter(reverses__isnull=False).count() == 1
    assert sum(e.amount for e in LedgerEntry.objects.all()) == Decimal("0.00")


# A key sent again with other arguments ----------------------------------------------------


def test_every_keyed_write_refuses_its_key_with_other_arguments_and_keeps_the_first(sandbox):
    task = create_task(sandbox, key="k-task").json()
    entry = post_entry(sandbox, "k-ledger").json()
    customer = sandbox.post("/customers", headers={"Idempotency-Key": "k-cus"},
                            json={"email": "ada@example.com", "name": "Ada", "plan": "pro"})
    payment = sandbox.post("/payments/status", headers={"Idempotency-Key": "k-pay"},
                           json={"customer_id": "CUS-1", "status": "trial"})
    cancel = sandbox.post(f"/tracker/tasks/{task['id']}/cancel",
                          headers={"Idempotency-Key": "k-cancel"}, json={"reason": "paid"})
    assert customer.status_code == payment.status_code == 201 and cancel.status_code == 200

    refused = {
        "k-task": create_task(sandbox, key="k-task", title="Approve invoice INV-2"),
        "k-ledger": post_entry(sandbox, "k-ledger", amount="999.00"),
        "k-cus": sandbox.post("/customers", headers={"Idempotency-Key": "k-cus"},
                              json={"email": "ada@example.com", "name": "Ada", "plan": "max"}),
        "k-pay": sandbox.post("/payments/status", headers={"Idempotency-Key": "k-pay"},
                              json={"customer_id": "CUS-1", "status": "active"}),
        "k-cancel": sandbox.post(f"/tracker/tasks/{task['id']}/cancel",
                                 headers={"Idempotency-Key": "k-cancel"},
                                 json={"reason": "another reason"}),
    }
    for key, response in refused.items():
        body = response.json()
        assert response.status_code == 422, (key, body)
        assert body["code"] == "idempotency_key_reused" and body["idempotency_key"] == key
        assert len(body["first_request_sha256"]) == len(body["request_sha256"]) == 64
        assert body["first_request_sha256"] != body["request_sha256"]
        assert key in body["error"]
    # The first request's hash is the same however often the key comes back.
    again = create_task(sandbox, key="k-task", title="Approve invoice INV-3").json()
    assert again["first_request_sha256"] == \
        refused["k-task"].json()["first_request_sha256"]
    assert again["request_sha256"] != refused["k-task"].json()["request_sha256"]

    # Nothing changed: one object each, as first sent.
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1
    assert Customer.objects.count() == 1 and PaymentUpdate.objects.count() == 1
    assert Task.objects.get().title == "Approve invoice INV-1"
    assert Task.objects.get().cancel_reason == "paid"
    assert LedgerEntry.objects.get().amount == Decimal(entry["amount"])
    assert Customer.objects.get().plan == "pro" and PaymentUpdate.objects.get().status == "trial"
    # The same arguments again still return the first result.
    assert create_task(sandbox, key="k-task").json() == sandbox.get(
        "/tracker/tasks", params={"key": "k-task"}).json()


def test_the_clients_raise_a_reused_key_as_its_own_permanent_error_naming_key_and_hashes(
        services):
    services.tracker.create_task("k-1", "Approve invoice INV-1", "ada")
    services.ledger.post("tx-1", "6000-office", "125.00", "EUR", "invoice INV-1")

    task_exc = raised(lambda: services.tracker.create_task("k-1", "Approve INV-9", "ada"))
    ledger_exc = raised(lambda: services.ledger.post("tx-1", "6000-office", "126.00", "EUR",
                                                     "invoice INV-1"))

    for exc, key in ((task_exc, "k-1"), (ledger_exc, "tx-1")):
        assert isinstance(exc, IdempotencyKeyReused) and exc.key == key
        assert len(exc.first_hash) == len(exc.request_hash) == 64
        classified = classify(exc)
        assert classified.error_class == ErrorClass.KEY_REUSED
        assert f"idempotency key {key} was used before with other arguments" in \
            classified.message
        assert exc.first_hash in classified.message and exc.request_hash in classified.message
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1


def test_not_implemented_is_a_definite_not_done(services):
    faults.add("payments.update", faults.NOT_IMPLEMENTED)
    faults.add("model.chat", faults.NOT_IMPLEMENTED)

    exc = raised(lambda: services.payments.update("pay-key", "CUS-1", "trial"))
    model_exc = raised(lambda: services.model.classify_invoice({"number": "INV-1"}))

    assert isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code == 501
    assert classify(exc).error_class == ErrorClass.PERMANENT
    assert type(model_exc) is PermanentError and "HTTP 501" in str(model_exc)
    assert PaymentUpdate.objects.count() == 0 and ModelCall.objects.count() == 0


# Customers, payments, invoices, stats -----------------------------------------------------


def test_customers_and_payments_deduplicate_on_the_key(services):
    customer = services.customers.create("cus-key", "ada@example.com", "Ada", "pro")
    again = services.customers.create("cus-key", "ada@example.com", "Ada", "pro")
    update = services.payments.update("pay-key", customer["id"], "trial")
    update_again = services.payments.update("pay-key", customer["id"], "trial")

    assert customer["id"].startswith("CUS-") and again == customer
    assert update["id"].startswith("PAY-") and update_again == update
    assert services.customers.find("cus-key") == customer
    assert services.customers.find("other") is None
    assert services.payments.find("pay-key") == update
    assert services.payments.find("other") is None
    assert Customer.objects.count() == 1 and PaymentUpdate.objects.count() == 1


def test_invoices_are_derived_from_their_number(services):
    invoice = services.invoices.get("INV-1847")

    assert invoice == services.invoices.get("INV-1847")
    assert invoice["number"] == "INV-1847" and invoice["currency"] == "EUR"
    assert sum(Decimal(line["amount"]) for line in invoice["lines"]) == Decimal(invoice["amount"])
    assert services.invoices.get("INV-1848") != invoice


def test_stats_count_every_table(sandbox, services):
    task = services.tracker.create_task("k", "t", "ada", {})
    services.tracker.cancel_task(task["id"], "not needed", "k-cancel")
    services.messenger.send("ada@example.com", "s", "b", "ref")
    entry = services.ledger.post("tx", "6000", "10.00", "EUR", "m")
    services.ledger.post("tx-rev", "6000", "-10.00", "EUR", "m", reverses=entry["id"])
    services.model.classify_invoice(services.invoices.get("INV-1"))
    faults.add("tracker.create", faults.UNAVAILABLE, times=3)

    assert sandbox.get("/stats").json() == {
        "tasks": 1, "cancelled_tasks": 1, "messages": 1, "ledger_entries": 2, "reversals": 1,
        "customers": 0, "payment_updates": 0, "model_calls": 1, "faults_pending": 3}


# Faults: what each kind does --------------------------------------------------------------


@pytest.mark.parametrize("kind, status", [
    (faults.UNAVAILABLE, 503), (faults.RATE_LIMIT, 429), (faults.FORBIDDEN, 403)])
def test_refusing_faults_change_nothing(sandbox, kind, status):
    faults.add("tracker.create", kind)

    refused = create_task(sandbox)
    assert refused.status_code == status
    assert Task.objects.count() == 0
    if kind == faults.RATE_LIMIT:
        assert refused.headers["Retry-After"] == "1"
    assert Fault.objects.count() == 0  # consumed

    assert create_task(sandbox).status_code == 201
    assert Task.objects.count() == 1


def test_commit_then_timeout_commits_before_the_client_times_out(sandbox, impatient):
    faults.add("tracker.create", faults.COMMIT_THEN_TIMEOUT)

    exc = raised(lambda: impatient.tracker.create_task("key-1", "Approve", "ada", {}))

    assert isinstance(exc, httpx.ReadTimeout)
    assert classify(exc).error_class == ErrorClass.UNKNOWN
    assert Task.objects.filter(idempotency_key="key-1").count() == 1  # committed all the same
    assert impatient.tracker.find_task("key-1")["idempotency_key"] == "key-1"


def test_commit_then_reset_commits_then_drops_the_connection_mid_response(sandbox, services):
    faults.add("ledger.post", faults.COMMIT_THEN_RESET)

    exc = raised(lambda: services.ledger.post("tx-1", "6000", "125.00", "EUR", "m"))

    assert isinstance(exc, httpx.RemoteProtocolError)
    assert "peer closed connection without sending complete message body" in str(exc)
    assert classify(exc).error_class == ErrorClass.UNKNOWN
    assert LedgerEntry.objects.filter(transaction_ref="tx-1").count() == 1
    # The client's pool dropped the broken connection: the next call works.
    assert services.ledger.find("tx-1")["transaction_ref"] == "tx-1"


def test_commit_then_reset_under_runserver(tmp_path):
    """The same connection drop from `manage.py runserver`, as `make demo` serves it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}/sandbox"
    log = open(tmp_path / "runserver.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "runserver", "--noreload", "--skip-checks",
         f"127.0.0.1:{port}"], cwd=ROOT, env=child_env(SANDBOX_BASE_URL=base),
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: _answers(f"{base}/stats"), what="runserver to answer")
        faults.add("tracker.create", faults.COMMIT_THEN_RESET)
        with httpx.Client(base_url=base, timeout=5) as client:
            exc = raised(lambda: create_task(client))
            assert isinstance(exc, httpx.RemoteProtocolError), exc
            assert create_task(client).status_code == 200  # the task the reset hid
    finally:
        stop(server)
        log.close()
    assert Task.objects.count() == 1


def _answers(url):
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def test_slow_acts_after_the_hold(sandbox, settings, impatient):
    settings.SANDBOX_HOLD_SECONDS = 1
    faults.add("messenger.send", faults.SLOW, times=2)

    started = time.monotonic()
    patient = sandbox.post("/messenger/messages", json={"to": "ada@example.com",
                                                        "client_reference": "ref-patient"})
    assert time.monotonic() - started >= 1
    assert patient.status_code == 201

    exc = raised(lambda: impatient.messenger.send("ada@example.com", "s", "b", "ref-gone"))
    assert isinstance(exc, httpx.ReadTimeout)
    assert Message.objects.filter(client_reference="ref-gone").count() == 0  # not yet
    wait_for(lambda: Message.objects.filter(client_reference="ref-gone").exists(),
             timeout=5, what="the slow send to land after the client left")
    assert Message.objects.count() == 2


def test_malformed_model_output_fails_the_schema(services):
    faults.add("model.chat", faults.MALFORMED)
    invoice = services.invoices.get("INV-1")

    bad = services.model.classify_invoice(invoice)
    good = services.model.classify_invoice(invoice)

    with pytest.raises(ValidationError):
        Classification.model_validate_json(bad)
    Classification.model_validate_json(good)
    assert ModelCall.objects.count() == 2
    assert ModelCall.objects.filter(malformed=True).count() == 1


def test_faults_are_consumed_in_order_and_times_is_honoured(sandbox):
    call_command("fault", "tracker.create", "unavailable", "--times", "2")
    call_command("fault", "tracker.create", "forbidden")
    call_command("fault", "tracker.lookup", "rate_limit")

    statuses = [create_task(sandbox, key=f"k-{i}").status_code for i in range(4)]

    assert statuses == [503, 503, 403, 201]
    assert Task.objects.count() == 1
    assert list(Fault.objects.values_list("endpoint", "kind", "remaining")) == [
        ("tracker.lookup", "rate_limit", 1)]  # another endpoint's queue is its own


def test_concurrent_calls_never_share_one_use_of_a_fault(sandbox, live_server):
    faults.add("messenger.send", faults.UNAVAILABLE, times=3)
    statuses = []

    def send(i):
        with httpx.Client(base_url=f"{live_server.url}/sandbox", timeout=10) as client:
            statuses.append(client.post("/messenger/messages", json={
                "to": "ada@example.com", "client_reference": f"r-{i}"}).status_code)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Calls wait for the fault's row lock: exactly three are refused, none twice, none skipped.
    refused = statuses.count(503)
    assert len(statuses) == 8 and statuses.count(201) == 8 - refused
    assert refused == 3 and faults.pending_count() == 0
    assert Message.objects.count() == 8 - refused


# The fault command and the staff-only endpoint --------------------------------------------


def test_fault_command_validates_with_the_valid_choices():
    with pytest.raises(CommandError, match="valid endpoints: invoices.read, tracker.create"):
        call_command("fault", "tracker.nope", "unavailable")
    with pytest.raises(CommandError, match="valid kinds: unavailable, rate_limit, forbidden"):
        call_command("fault", "tracker.create", "explode")
    with pytest.raises(CommandError, match="only to the endpoint 'model.chat'"):
        call_command("fault", "tracker.create", "malformed")
    for times in ("0", "2147483648", "99999999999999999999"):
        with pytest.raises(CommandError, match="whole number from 1 to 2147483647"):
            call_command("fault", "tracker.create", "unavailable", "--times", times)
    with pytest.raises(CommandError, match="both an ENDPOINT and a KIND"):
        call_command("fault", "tracker.create")
    assert Fault.objects.count() == 0


def test_fault_command_lists_and_clears(capsys):
    call_command("fault", "model.chat", "malformed", "--times", "3")
    call_command("fault", "ledger.post", "commit_then_timeout")
    call_command("fault", "--list")
    listed = capsys.readouterr().out

    assert "model.chat\tmalformed\tx3" in listed and "ledger.post\tcommit_then_timeout" in listed
    assert Fault.objects.count() == 2
    call_command("fault", "--clear")
    assert Fault.objects.count() == 0


@pytest.fixture
def fault_queuer():
    """A user holding the dedicated permission, and nothing else."""
    user = User.objects.create_user("chaos", password="pw")
    user.user_permissions.add(Permission.objects.get(content_type__app_label="sandbox",
                                                     codename="queue_fault"))
    return user


def test_fault_endpoint_refuses_anonymous_users_staff_and_the_demo_auditor():
    # Being staff is not enough: queueing a fault needs sandbox.queue_fault or a superuser.
    member = User.objects.create_user("member", password="pw", is_staff=True)
    call_command("seed_demo", stdout=io.StringIO())
    clients = [Client(enforce_csrf_checks=True) for _ in range(3)]
    clients[1].force_login(member)
    clients[2].force_login(User.objects.get(username="auditor"))

    for client in clients:
        assert client.get("/sandbox/faults").status_code == 403
        token = client.cookies["csrftoken"].value
        response = client.post("/sandbox/faults", {"endpoint": "tracker.create",
                                                   "kind": "unavailable"},
                               HTTP_X_CSRFTOKEN=token)
        assert response.status_code == 403
    assert Fault.objects.count() == 0


def test_fault_endpoint_needs_the_csrf_token(fault_queuer):
    client = Client(enforce_csrf_checks=True)
    client.force_login(fault_queuer)
    form = {"endpoint": "tracker.create", "kind": "unavailable", "times": "2"}

    without_token = client.post("/sandbox/faults", form)
    assert without_token.status_code == 403
    assert Fault.objects.count() == 0

    listing = client.get("/sandbox/faults")
    token = client.cookies["csrftoken"].value
    queued = client.post("/sandbox/faults", form, HTTP_X_CSRFTOKEN=token)
    as_json = client.post("/sandbox/faults", json.dumps({"endpoint": "model.chat",
                                                         "kind": "malformed"}),
                          content_type="application/json", HTTP_X_CSRFTOKEN=token)
    invalid = client.post("/sandbox/faults", {"endpoint": "tracker.create", "kind": "boom"},
                          HTTP_X_CSRFTOKEN=token)

    assert listing.status_code == 200 and "tracker.create" in listing.json()["endpoints"]
    assert queued.status_code == 201 and queued.json()["fault"]["remaining"] == 2
    assert as_json.status_code == 201
    assert invalid.status_code == 400 and "valid kinds" in invalid.json()["error"]
    assert list(Fault.objects.values_list("endpoint", "kind", "remaining")) == [
        ("tracker.create", "unavailable", 2), ("model.chat", "malformed", 1)]
    assert client.get("/sandbox/faults").json()["pending"][0]["kind"] == "unavailable"


def test_a_superuser_may_queue_a_fault():
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    response = client.post("/sandbox/faults", {"endpoint": "ledger.post", "kind": "forbidden"})
    assert response.status_code == 201 and Fault.objects.count() == 1


def test_only_the_demo_admin_is_staff():
    call_command("seed_demo", stdout=io.StringIO())
    # Seeding again puts right a database seeded when every demo user was staff.
    User.objects.update(is_staff=True)
    call_command("seed_demo", stdout=io.StringIO())
    assert list(User.objects.filter(is_staff=True).values_list("username", flat=True)) == \
        ["admin"]
    assert list(User.objects.filter(is_superuser=True).values_list("username", flat=True)) == \
        ["admin"]


def test_the_sandbox_is_not_served_with_production_settings():
    code = ("import django; django.setup(); from django.urls import Resolver404, resolve\n"
            "for path in ('/sandbox/faults', '/sandbox/stats', '/sandbox/tracker/tasks'):\n"
            "    try:\n        resolve(path)\n        print('served', path)\n"
            "    except Resolver404:\n        print('absent', path)\n")
    env = {k: v for k, v in child_env().items() if k != "SANDBOX_ENABLED"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**env, "DJANGO_SETTINGS_MODULE": "console.production", **PRODUCTION_ENV,
             "SECRET_KEY": "a-long-random-production-key-" + "x1y2z3" * 8})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == ["absent /sandbox/faults", "absent /sandbox/stats",
                                              "absent /sandbox/tracker/tasks"]


# The model endpoint -----------------------------------------------------------------------


def test_model_endpoint_answers_a_chat_completion_the_openai_client_parses(sandbox, settings):
    model = openai.OpenAI(base_url=settings.MODEL_BASE_URL, api_key=settings.MODEL_API_KEY,
                          max_retries=0, timeout=5)
    completion = model.chat.completions.create(
        model="sandbox-classifier", response_format={"type": "json_object"},
        messages=[{"role": "system", "content": "Classify the invoice."},
                  {"role": "user", "content": "Software license, annual subscription"}])
    model.close()

    assert completion.object == "chat.completion"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.total_tokens == (completion.usage.prompt_tokens
                                             + completion.usage.completion_tokens)
    decision = Classification.model_validate_json(completion.choices[0].message.content)
    assert decision.category == "software" and decision.approver_group == "finance-approvers"
    assert ModelCall.objects.count() == 1


def test_model_endpoint_wants_the_api_key(sandbox):
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}

    missing = sandbox.post("/model/v1/chat/completions", json=body)
    wrong = sandbox.post("/model/v1/chat/completions", json=body,
                         headers={"Authorization": "Bearer not-the-key"})

    assert missing.status_code == wrong.status_code == 401
    assert "not-the-key" not in wrong.text
    assert ModelCall.objects.count() == 0


@pytest.mark.parametrize("number, vendor, category", [
    ("INV-1", "Papeterie Lumière SARL", "office-supplies"),
    ("INV-3", "Nordic Rail & Air Travel", "travel"),
    ("INV-4", "CloudForge Software GmbH", "software"),
    ("INV-8", "Brightline Facility Services", "services"),
])
def test_the_model_client_classifies_invoices_by_their_words(services, number, vendor,
                                                             category):
    invoice = services.invoices.get(number)
    decision = Classification.model_validate_json(services.model.classify_invoice(invoice))

    assert invoice["vendor"] == vendor and decision.category == category
    assert ModelCall.objects.count() == 1
    assert vendor in ModelCall.objects.get().prompt  # the invoice text, never the API key


# The clients' failures, as the runtime classifies them ------------------------------------


@pytest.mark.parametrize("kind, expected, retry_after", [
    (faults.FORBIDDEN, ErrorClass.PERMANENT, None),
    (faults.UNAVAILABLE, ErrorClass.TRANSIENT, None),
    (faults.RATE_LIMIT, ErrorClass.TRANSIENT, 1.0),
    (faults.COMMIT_THEN_RESET, ErrorClass.UNKNOWN, None),
])
def test_client_failures_are_classified_by_the_runtime(services, kind, expected, retry_after):
    faults.add("payments.update", kind)

    exc = raised(lambda: services.payments.update("pay-key", "CUS-1", "trial"))

    assert classify(exc).error_class == expected
    assert classify(exc).retry_after == retry_after
    changed = kind == faults.COMMIT_THEN_RESET
    assert PaymentUpdate.objects.count() == (1 if changed else 0)


def test_a_lookup_that_finds_nothing_is_none_but_a_refused_lookup_raises(services):
    faults.add("tracker.lookup", faults.UNAVAILABLE)

    exc = raised(lambda: services.tracker.find_task("key-1"))

    assert classify(exc).error_class == ErrorClass.TRANSIENT
    assert services.tracker.find_task("key-1") is None
    assert services.messenger.find("ref") == []
    assert services.ledger.find("tx") is None


@pytest.mark.parametrize("kind, error, retry_after", [
    (faults.RATE_LIMIT, TransientError, 1.0),
    (faults.UNAVAILABLE, TransientError, None),
    (faults.FORBIDDEN, PermanentError, None),
    (faults.COMMIT_THEN_RESET, TransientError, None),
])
def test_model_client_translates_openai_errors(services, kind, error, retry_after):
    faults.add("model.chat", kind)

    exc = raised(lambda: services.model.classify_invoice({"number": "INV-1"}))

    assert type(exc) is error
    assert getattr(exc, "retry_after", None) == retry_after
    assert classify(exc).error_class == error.error_class
    assert ModelCall.objects.count() == (1 if kind == faults.COMMIT_THEN_RESET else 0)


def test_a_model_timeout_is_transient_not_unknown(impatient):
    faults.add("model.chat", faults.COMMIT_THEN_TIMEOUT)

    exc = raised(lambda: impatient.model.classify_invoice({"number": "INV-1"}))

    assert isinstance(exc, TransientError)
    assert isinstance(exc.__cause__, openai.APITimeoutError)
    assert classify(exc).error_class == ErrorClass.TRANSIENT


def test_a_wrong_model_key_is_permanent_and_never_leaks(sandbox, settings):
    wrong = ModelClient(base_url=settings.MODEL_BASE_URL, api_key="sk-wrong-key-0123456789",
                        model="sandbox-classifier", timeout=5)
    try:
        exc = raised(lambda: wrong.classify_invoice({"number": "INV-1"}))
    finally:
        wrong.close()

    assert isinstance(exc, PermanentError)
    assert "sk-wrong-key" not in str(exc) and "sk-wrong-key" not in repr(wrong)
    assert ModelCall.objects.count() == 0
