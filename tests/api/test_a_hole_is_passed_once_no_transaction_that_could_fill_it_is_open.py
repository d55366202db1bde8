"""A rolled-back transaction leaves a hole in the ids for good. A subscriber's cursor passes
it once PostgreSQL says that every transaction open when the hole was judged has ended, and
not before, however long that takes: a transaction open since before the hole, even one
that never touches a run, holds the cursor (the rows after the hole are delivered
meanwhile)."""

import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from api import webhook_cursors
from api.models import WebhookDelivery, WebhookSubscriber
from audit.models import AuditRecord
from runs.models import RunEvent
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


def _other_connection(**options) -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"],
                           dbname=db["NAME"], **options)


def _subscribe() -> WebhookSubscriber:
    return WebhookSubscriber.objects.create(name="crm", url="http://127.0.0.1:9/hooks",
                                            secret="k", **webhook_cursors.cursors_at_head())


def _rolled_back_event(run) -> int:
    """The id of a status change whose transaction rolled back."""
    with _other_connection() as other:
        drawn = other.execute(
            f"INSERT INTO {RunEvent._meta.db_table}"
            " (run_id, status_from, status_to, step_name, outcome, created_at)"
            " VALUES (%s, 'queued', 'running', '', '', now()) RETURNING id",
            [run.pk]).fetchone()[0]
        other.rollback()
    return drawn


def _rolled_back_record() -> int:
    """An audit record's id drawn by a transaction that rolled back."""
    with _other_connection() as other:
        drawn = other.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))",
                              [AuditRecord._meta.db_table]).fetchone()[0]
        other.rollback()
    return drawn


def _wait_for_transactions_open_now_to_end() -> None:
    """Transaction ids are the server's: a test of another database may hold one open for
    a while. Waits (not a timed assertion: the bound only stops a hang) until every
    transaction given an id before this call has ended."""
    with _other_connection(autocommit=True) as other:
        now = other.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]
        deadline = time.monotonic() + 600
        # Every id below `now` still open is in the snapshot's list: `now` has ended.
        while other.execute("SELECT count(*) FROM pg_snapshot_xip(pg_current_snapshot()) x"
                            " WHERE x::text::bigint < %s", [now]).fetchone()[0]:
            assert time.monotonic() < deadline, "a transaction of the server stays open"
            time.sleep(0.2)


def _told(subscriber, kind: str) -> list[int]:
    return list(WebhookDelivery.objects.filter(subscriber=subscriber,
                                               **{f"{kind}__isnull": False})
                .order_by(f"{kind}_id").values_list(f"{kind}_id", flat=True))


def _head(model) -> int:
    return model.objects.order_by("-pk").values_list("pk", flat=True).first()


def test_a_hole_a_rollback_left_is_passed_once_no_older_transaction_is_open():
    run = new_run()
    subscriber = _subscribe()
    hole = _rolled_back_event(run)
    record_hole = _rolled_back_record()
    later = new_run()  # rows after both holes
    after_hole = RunEvent.objects.get(run=later).pk
    assert after_hole > hole and _head(AuditRecord) > record_hole
    # Well short of the 30 s the publisher once waited at any hole.
    now = timezone.now()
    aged = now + webhook_cursors.HOLE_MIN_AGE

    assert webhook_cursors.queue_deliveries(now=now) >= 1
    subscriber.refresh_from_db()
    assert subscriber.last_event_id < hole  # it may still be a transaction that commits
    assert subscriber.last_record_id < record_hole
    webhook_cursors.queue_deliveries(now=aged)  # judges the hole by the transactions open now
    _wait_for_transactions_open_now_to_end()
    webhook_cursors.queue_deliveries(now=aged)

    subscriber.refresh_from_db()
    assert subscriber.last_event_id == _head(RunEvent)
    assert subscriber.last_record_id == _head(AuditRecord)
    assert _told(subscriber, "event") == [after_hole]  # once, though read on every pass
    assert webhook_cursors.queue_deliveries(now=aged) == 0
    assert (subscriber.event_holes_upto, subscriber.record_holes_upto) == (None, None)


def test_a_transaction_open_since_before_a_hole_holds_the_cursor_at_it():
    run = new_run()
    subscriber = _subscribe()
    unrelated = _other_connection()
    try:
        # It has a transaction id, as any transaction that writes has; it never touches a
        # run, but nothing tells its rows from a transition's.
        unrelated.execute("SELECT pg_current_xact_id()")
        hole = _rolled_back_event(run)
        later = new_run()
        after_hole = RunEvent.objects.get(run=later).pk
        far = timezone.now() + timedelta(hours=1)
        for minutes in range(4):
            webhook_cursors.queue_deliveries(now=far + timedelta(minutes=minutes))

        subscriber.refresh_from_db()
        assert subscriber.last_event_id < hole
        assert _told(subscriber, "event") == [after_hole]
    finally:
        unrelated.rollback()
        unrelated.close()
    _wait_for_transactions_open_now_to_end()
    # A transaction that began after the hole was judged does not hold it.
    newer = _other_connection()
    try:
        newer.execute("SELECT pg_current_xact_id()")
        webhook_cursors.queue_deliveries(now=far + timedelta(minutes=5))

        subscriber.refresh_from_db()
        assert subscriber.last_event_id == _head(RunEvent)
        assert _told(subscriber, "event") == [after_hole]
    finally:
        newer.close()
