"""External events: a run waits for a named event matched by its correlation key; the
event is delivered once (a redelivery changes nothing), kept if it arrives before the run
waits, validated against the step's schema; the timeout policy applies; a person may
deliver or skip it; the API and signed webhooks bring events in."""

import json
import time
from datetime import timedelta

import pytest

from api.tokens import token_create
from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.models import AttentionReason, ExternalEvent, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.waiting import events
from runs.waiting.kept import consume_kept_for_run
from runs.waiting.payloads import EventRefused
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
SOURCE = Actor.system("payments")
PAID = {"amount": 120, "reference": "PSP-77"}
OLGA = Actor(kind="user", label="olga")


def send(run, event_id="evt-1", payload=PAID, workflow=None):
    return events.receive_event(workflow=workflow or run.workflow_name, event="payment.settled",
                                key=run.business_key, event_id=event_id, source="psp",
                                payload=payload, actor=SOURCE)


def waiting(workflow="test-payment-wait"):
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    return run


def test_the_awaited_event_is_delivered_once_and_the_run_goes_on(script):
    run = waiting()
    assert "waits for the event payment.settled" in run.status_message
    assert step(run, "payment").status == StepStatus.WAITING
    assert send(run) == events.Receipt("delivered", run.pk)
    payment = step(run, "payment")
    assert (payment.status, payment.result, payment.remote_ref) == (
        StepStatus.SUCCEEDED, PAID, "event:psp:evt-1")
    records = AuditRecord.objects.filter(run=run).count()
    # The provider delivers the same callback again: nothing changes.
    assert send(run) == events.Receipt("duplicate", run.pk)
    assert AuditRecord.objects.filter(run=run).count() == records
    assert ExternalEvent.objects.count() == 1
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert [c[0] for c in script.calls] == ["invoice", "book"]


def test_an_event_that_comes_before_the_wait_is_kept_and_consumed_there(script):
    run = new_run("test-payment-wait")
    assert send(run) == events.Receipt("kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    # The worker's task (or the next sweep) hands the kept event to the run now waiting.
    assert consume_kept_for_run(run.pk)
    assert step(run, "payment").result == PAID
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert ExternalEvent.objects.get().consumed_run_id == run.pk


def test_the_sweeper_delivers_a_kept_event_whose_run_began_to_wait(script):
    run = new_run("test-payment-wait")
    send(run)
    executor.advance_run(run.pk, worker="w1")
    assert sweeper.sweep().events == 1
    assert step(run, "payment").status == StepStatus.SUCCEEDED


def test_a_payload_that_fails_the_schema_is_refused_field_by_field_and_nothing_is_kept(script):
    run = waiting()
    with pytest.raises(EventRefused) as refused:
        send(run, payload={"amount": "lots"})
    locs = [e["loc"] for e in refused.value.errors]
    assert ["payload", "amount"] in locs and ["payload", "reference"] in locs
    with pytest.raises(EventRefused, match="no step of test-payment-wait waits"):
        events.receive_event(workflow="test-payment-wait", event="refund", key="k",
                             event_id="e", source="psp", payload={}, actor=SOURCE)
    assert not ExternalEvent.objects.exists()
    assert step(run, "payment").status == StepStatus.WAITING


def _past_timeout(run):
    later = step(run, "payment").next_attempt_at + timedelta(seconds=1)
    assert sweeper.sweep(now=later).due >= 1
    lease = transitions.claim_run(run.pk, worker="w2", now=later)
    run.refresh_from_db()
    return lease, run


def test_timeout_escalates_to_a_person_and_a_late_event_is_still_delivered(script):
    run = waiting()
    _, run = _past_timeout(run)
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.EVENT_TIMED_OUT)
    assert step(run, "payment").status == StepStatus.WAITING
    assert send(run).status == "delivered"
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED


def test_timeout_continues_with_the_default(script):
    run = waiting("test-payment-continue")
    lease, run = _past_timeout(run)
    assert lease.work.name == "book"
    assert step(run, "payment").result == {"amount": 0, "reference": "none"}


def test_timeout_fails_the_step(script):
    run = waiting("test-payment-fail")
    _, run = _past_timeout(run)
    assert run.status == RunStatus.ATTENTION
    assert step(run, "payment").status == StepStatus.FAILED
    assert "no payment.settled event arrived" in step(run, "payment").error_message


def test_a_person_delivers_or_skips_the_event_with_a_reason(script):
    run = waiting()
    with pytest.raises(ValueError, match="does not match PaymentSettled"):
        ACTIONS["event_received"].perform(run.pk, actor=OLGA, given=ActionInput(
            reason="PSP confirmed by phone", evidence=json.dumps({"amount": 5})))
    ACTIONS["event_received"].perform(run.pk, actor=OLGA, given=ActionInput(
        reason="PSP confirmed by phone", evidence=json.dumps(PAID)))
    record = AuditRecord.objects.get(run=run, action=AuditAction.EVENT_RECEIVED)
    assert (record.actor_label, record.reason) == ("olga", "PSP confirmed by phone")
    assert step(run, "payment").result == PAID
    other = waiting()
    ACTIONS["skip_event"].perform(other.pk, actor=OLGA,
                                  given=ActionInput(reason="paid in cash"))
    assert step(other, "payment").status == StepStatus.SKIPPED
    assert executor.advance_run(other.pk, worker="w1") == RunStatus.COMPLETED


def test_the_api_takes_events_for_a_token_of_the_workflow(client, script):
    run = waiting()
    _, good = token_create(name="psp", workflows=["test-payment-wait"])
    _, other = token_create(name="erp", workflows=["test-orders"])
    body = {"workflow": "test-payment-wait", "event": "payment.settled", "event_id": "e-9",
            "correlation_key": run.business_key, "payload": PAID}

    def post(data, token):
        return client.post("/api/events", data, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")

    assert post(body, other).status_code == 403
    bad = post({**body, "payload": {"amount": "x"}}, good)
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"][0] == "payload"
    assert post({**body, "event": "nope"}, good).status_code == 404
    assert not ExternalEvent.objects.exists()
    first = post(body, good)
    assert first.status_code == 202 and first.json() == {"status": "delivered",
                                                           "run_id": run.pk}
    again = post(body, good)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"


def test_a_signed_webhook_is_checked_for_signature_and_replay(client, settings, script):
    settings.RUNS_EVENT_SOURCES = {"psp": {"secret": "s3cret",
                                           "workflows": ["test-payment-wait"]}}
    run = waiting()
    body = json.dumps({"workflow": "test-payment-wait", "event": "payment.settled",
                       "event_id": "wh-1", "correlation_key": run.business_key,
                       "payload": PAID}).encode()

    def post(timestamp, signature):
        return client.post("/api/events/webhook/psp", body, content_type="application/json",
                           HTTP_X_EVENT_TIMESTAMP=timestamp, HTTP_X_EVENT_SIGNATURE=signature)

    now = str(int(time.time()))
    assert post(now, "0" * 64).status_code == 401
    stale = str(int(time.time()) - 3600)
    assert post(stale, events.signature("s3cret", stale, body)).status_code == 401
    assert not ExternalEvent.objects.exists()
    good = post(now, events.signature("s3cret", now, body))
    assert good.status_code == 202 and good.json()["status"] == "delivered"
    # The same delivery replayed inside the window: a duplicate, nothing changes.
    assert post(now, events.signature("s3cret", now, body)).json()["status"] == "duplicate"
    assert ExternalEvent.objects.get().source == "webhook:psp"


@pytest.mark.parametrize("action", ["event_received", "skip_event"])
@pytest.mark.parametrize("reason", ["", "   "])
def test_deliver_and_skip_refuse_an_empty_reason_and_write_nothing(script, action, reason):
    from runs.machine.errors import ReasonRequired

    run = waiting()
    seq = run.audit_seq
    with pytest.raises(ReasonRequired):
        ACTIONS[action].perform(run.pk, actor=OLGA, given=ActionInput(
            reason=reason, evidence=json.dumps(PAID)))
    run.refresh_from_db()
    assert run.audit_seq == seq and step(run, "payment").status == StepStatus.WAITING
    assert not ExternalEvent.objects.exists()


def test_the_run_page_says_what_it_waits_for_and_delivers_by_hand(admin_client, script):
    run = waiting()
    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert "waits for the event payment.settled" in page and "Deliver event" in page
    # Since when, and until when it waits, in the status line.
    began, until = step(run, "payment").started_at, step(run, "payment").next_attempt_at
    assert f"since {began:%Y-%m-%d %H:%M:%S}" in page and f"until {until:%Y-%m-%d %H:%M:%S}" in page
    assert 'name="evidence" id="payload-' in page
    admin_client.post(f"/runs/{run.pk}/event_received/", {
        "seen": str(run.audit_seq), "reason": "confirmed by the PSP's support",
        "evidence": json.dumps(PAID)})
    assert step(run, "payment").result == PAID
