"""A kept event (one that came before any run waited for it) is kept for
RUNS_EVENT_KEEP_SECONDS from when it came, by the database's clock, and then expires: marked
expired once, by whichever meets it first (a run beginning to wait, or the sweeper's pass),
said once at WARNING with its event and key and never its payload, counted, and never
delivered by any path (a run beginning to wait, the sweeper, a person's delivery). An event
delivered in time never expires, and one within its time is delivered as before. Expired rows
leave the sweeper's pass over the kept rows, whose cost then no longer follows them."""

import logging
from datetime import timedelta
from importlib import import_module
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.machine.transitions.events import insert_event
from runs.models import ExternalEvent, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.waiting import events, kept_expiry
from runs.waiting.kept import consume_kept_events, consume_kept_for_run
from tests.api.test_metrics import scrape, value
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
PSP = Actor.system("payments")
OLGA = Actor(kind="user", label="olga")
SECRET = "PSP-SECRET-REF-77"
PAID = {"amount": 120, "reference": SECRET}
WEEK = timedelta(days=7)


def _send(run=None, *, key=None, event_id="evt-1", now=None):
    return events.receive_event(workflow="test-payment-wait", event="payment.settled",
                                key=key or run.business_key, event_id=event_id, source="psp",
                                payload=PAID, actor=PSP, now=now)


def _past_its_time(**rows):
    """The kept rows (all, or those matching `rows`) kept until a minute ago."""
    ExternalEvent.objects.filter(**rows).update(keep_until=timezone.now() - timedelta(minutes=1))


def _waits(run):
    """`run` reaches its wait; nobody has looked for a kept event since."""
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


def _expiry_lines(caplog):
    return [r for r in caplog.records
            if r.name == "runs.waiting.kept_expiry" and "expired" in r.getMessage()]


def test_a_kept_event_is_kept_for_the_configured_time_from_when_it_came(script, settings):
    run = new_run("test-payment-wait")
    receipt = _send(run)
    kept = ExternalEvent.objects.get()
    assert receipt == events.Receipt("kept")
    assert receipt.keep_until == kept.keep_until == kept.received_at + WEEK
    settings.RUNS_EVENT_KEEP_SECONDS = 60
    _send(run, event_id="evt-2")
    second = ExternalEvent.objects.get(event_id="evt-2")
    assert second.keep_until == second.received_at + timedelta(seconds=60)
    assert (kept.state, kept.expired_at) == ("kept", None)


def test_a_run_reaching_the_wait_after_the_keep_time_does_not_get_the_event(script, caplog):
    run = new_run("test-payment-wait")
    assert _send(run) == events.Receipt("kept")
    _past_its_time()
    _waits(run)

    with caplog.at_level(logging.INFO):
        assert not consume_kept_for_run(run.pk)
        # Nor later: the run's look again, and the sweeper's pass.
        assert not consume_kept_for_run(run.pk)
        report = sweeper.sweep()
    assert (report.events, report.events_expired) == (0, 0)

    payment = step(run, "payment")
    assert (payment.status, payment.result) == (StepStatus.WAITING, None)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    kept = ExternalEvent.objects.get()
    assert kept.state == "expired" and kept.expired_at is not None
    assert kept.consumed_at is None and kept.consumed_run_id is None
    (line,) = _expiry_lines(caplog)
    assert line.levelno == logging.WARNING
    message = line.getMessage()
    assert "payment.settled" in message and run.business_key in message
    # Never the payload: neither its reference nor its amount (the business key, made from
    # the clock, may hold the digits "120" by chance, so the field is looked for).
    assert SECRET not in message and "amount" not in message
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED).exists()


def test_an_expired_event_is_passed_over_for_a_later_one_kept_for_the_same_wait(script):
    run = new_run("test-payment-wait")
    _send(run, event_id="old", now=timezone.now() - timedelta(days=8))
    _send(run, event_id="new")
    _waits(run)

    assert consume_kept_for_run(run.pk)
    assert step(run, "payment").status == StepStatus.SUCCEEDED
    states = dict(ExternalEvent.objects.values_list("event_id", "consumed_run_id"))
    assert states == {"old": None, "new": run.pk}
    assert ExternalEvent.objects.get(event_id="old").state == "expired"


def test_the_sweepers_pass_expires_and_counts_what_is_past_its_time_and_delivers_the_rest(
        script, client, settings, caplog):
    settings.METRICS_FINISHED_RECOUNT_SECONDS = 0
    before = scrape(client)
    settings.RUNS_EVENT_KEEP_SECONDS = 60
    # For no run, kept two minutes ago for a minute: past its time.
    _send(key="no-such-run", event_id="stale", now=timezone.now() - timedelta(minutes=2))
    run = new_run("test-payment-wait")
    settings.RUNS_EVENT_KEEP_SECONDS = 7 * 24 * 3600
    _send(run)
    _waits(run)

    with caplog.at_level(logging.INFO):
        report = sweeper.sweep()
        assert sweeper.sweep().events_expired == 0
    assert (report.events_expired, report.events) == (1, 1)
    assert step(run, "payment").result == PAID
    assert ExternalEvent.objects.get(event_id="stale").state == "expired"
    assert ExternalEvent.objects.get(event_id="evt-1").state == "delivered"
    assert len(_expiry_lines(caplog)) == 1
    after = scrape(client)
    assert value(after, "durable_events_expired_total") == \
        value(before, "durable_events_expired_total") + 1
    assert value(after, "durable_events_kept") == 0


def test_an_event_delivered_in_time_never_expires(script):
    waiting = _waits(new_run("test-payment-wait"))
    assert _send(waiting) == events.Receipt("delivered", waiting.pk)
    early = new_run("test-payment-wait")
    assert _send(early, event_id="evt-early") == events.Receipt("kept")
    _waits(early)
    assert consume_kept_for_run(early.pk)
    _past_its_time()

    assert sweeper.sweep().events_expired == 0
    assert kept_expiry.expire_kept_events() == 0
    assert {e.state for e in ExternalEvent.objects.all()} == {"delivered"}
    assert not ExternalEvent.objects.filter(expired_at__isnull=False).exists()


def test_a_kept_row_past_its_time_is_not_delivered_even_before_it_is_marked(script):
    # The time passed between a look and the delivery's transaction: the delivery's own
    # condition refuses it, by the database's clock.
    run = _waits(new_run("test-payment-wait"))
    kept = insert_event(
        workflow_name="test-payment-wait", source="psp", event_id="late",
        event_name="payment.settled", correlation_key=run.business_key, payload=PAID,
        received_at=timezone.now() - WEEK - timedelta(minutes=1),
        keep_until=timezone.now() - timedelta(minutes=1))
    with pytest.raises(transitions.DuplicateEvent):
        transitions.deliver_event(run.pk, step_name="payment", source="psp", event_id="late",
                                  payload=PAID, actor=PSP, kept=kept)
    assert step(run, "payment").status == StepStatus.WAITING
    kept.refresh_from_db()
    assert kept.consumed_at is None


def test_a_hand_delivery_does_not_settle_an_expired_event_as_its_own(script):
    run = new_run("test-payment-wait")
    _send(run)
    _past_its_time()
    _waits(run)

    ACTIONS["event_received"].perform(run.pk, actor=OLGA, given=ActionInput(
        reason="the provider confirmed it by phone",
        evidence='{"amount": 7, "reference": "PHONE-1"}'))

    (by_hand,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED)
    assert "kept_settled" not in by_hand.data
    assert ExternalEvent.objects.get(source="psp").consumed_at is None
    assert sweeper.sweep().events_expired == 1
    assert ExternalEvent.objects.get(source="psp").state == "expired"


def test_expired_rows_leave_the_pass_over_the_kept_rows(script):
    # A sender left many events no run waited for; once expired, a pass's window of kept
    # rows no longer spends itself on them.
    now = timezone.now()
    ExternalEvent.objects.bulk_create(
        ExternalEvent(workflow_name="test-payment-wait", source="psp", event_id=f"stale-{i}",
                      event_name="payment.settled", correlation_key=f"no-such-run-{i}",
                      awaited_ref=transitions.awaiting_ref("payment.settled",
                                                           f"no-such-run-{i}"),
                      payload=PAID, received_at=now - WEEK, keep_until=now - timedelta(hours=1))
        for i in range(40))
    run = new_run("test-payment-wait")
    _send(run)
    _waits(run)

    assert kept_expiry.expire_kept_events(batch=15) == 40
    assert consume_kept_events(rows=5) == 1
    assert step(run, "payment").result == PAID


def test_the_expiry_pass_reads_the_kept_rows_by_their_time_along_its_index(script):
    now = timezone.now()
    ExternalEvent.objects.bulk_create(
        ExternalEvent(workflow_name="test-payment-wait", source="psp", event_id=f"e-{i}",
                      event_name="payment.settled", correlation_key=f"k-{i}", payload=PAID,
                      received_at=now, keep_until=now + WEEK,
                      consumed_at=now if i % 2 else None) for i in range(200))
    with CaptureQueriesContext(connection) as ctx:
        assert kept_expiry.expire_kept_events() == 0
    reads = [q["sql"] for q in ctx.captured_queries
             if q["sql"].startswith("SELECT") and "runs_externalevent" in q["sql"]]
    assert len(reads) == 2  # the rows lacking their time, the rows past it
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_externalevent")
        cursor.execute("SET enable_seqscan = off")
        try:
            for sql in reads:
                cursor.execute("EXPLAIN " + sql)
                plan = "\n".join(row[0] for row in cursor.fetchall())
                assert "external_event_keep_until_idx" in plan, plan
        finally:
            cursor.execute("RESET enable_seqscan")


def test_rows_kept_without_a_keep_time_are_given_one_from_when_they_came(script):
    # Kept by the previous release while the migration ran: the pass stamps them, and those
    # already older than the keep time expire in the same pass.
    now = timezone.now()
    for event_id, came in (("recent", now - timedelta(hours=1)), ("old", now - WEEK * 2)):
        ExternalEvent.objects.create(
            workflow_name="test-payment-wait", source="psp", event_id=event_id,
            event_name="payment.settled", correlation_key=event_id, payload=PAID,
            received_at=came)

    assert kept_expiry.expire_kept_events() == 1
    recent, old = (ExternalEvent.objects.get(event_id=e) for e in ("recent", "old"))
    assert recent.keep_until == recent.received_at + WEEK and recent.state == "kept"
    assert old.state == "expired"


def test_the_migration_keeps_each_kept_event_seven_days_from_when_it_came_in_batches(
        monkeypatch):
    migration = import_module("runs.migrations.0047_external_event_keep_until")
    now = timezone.now()
    for i in range(5):
        ExternalEvent.objects.create(
            workflow_name="test-payment-wait", source="psp", event_id=f"kept-{i}",
            event_name="payment.settled", correlation_key=f"k-{i}", payload=PAID,
            received_at=now - timedelta(days=i))
    ExternalEvent.objects.create(
        workflow_name="test-payment-wait", source="psp", event_id="delivered",
        event_name="payment.settled", correlation_key="k", payload=PAID, received_at=now,
        consumed_at=now)
    monkeypatch.setattr(migration, "BATCH", 2)

    with CaptureQueriesContext(connection) as ctx:
        migration.backfill(django_apps, SimpleNamespace(connection=connection))
    kept = ExternalEvent.objects.filter(consumed_at__isnull=True)
    assert kept.count() == 5
    assert not kept.exclude(keep_until=F("received_at") + WEEK).exists()
    assert ExternalEvent.objects.get(event_id="delivered").keep_until is None
    updates = [q for q in ctx.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(updates) == 3
