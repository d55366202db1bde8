"""A rolled-back transaction leaves a hole in the ids for good. A subscriber's cursor passes
it once PostgreSQL says that every transaction open when the hole was judged has ended, and
not before, however long that takes: a transaction open since before the hole, even one
that never touches a run, holds the cursor (the rows after the hole are delivered
meanwhile)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from api import webhook_cursors
from api.models import WebhookDelivery, WebhookSubscriber
from audit.models import AuditRecord
from runs.models import RunEvent
from tests.api.webhook_rows import other_connection, wait_for_transactions_open_now_to_end
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


def _subscribe() -> WebhookSubscriber:
    return WebhookSubscriber.objects.create(name="crm", url="http://127.0.0.1:9/hooks",
                                            secret="k", **webhook_cursors.cursors_at_head())


def _rolled_back_event(run) -> int:
    """The id of a status change whose transaction rolled back."""
    with other_connection() as other:
        drawn = other.execute(
            f"INSERT INTO {RunEvent._meta.db_table}"
            " (run_id, status_from, status_to, step_name, outcome, created_at)"
            " VALUES (%s, 'queued', 'running', '', '', now()) RETURNING id",
            [run.pk]).fetchone()[0]
        other.rollback()
    return drawn


def _rolled_back_record() -> int:
    """An audit record's id drawn by a transaction that rolled back."""
    with other_connection() as other:
        drawn = other.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))",
                              [AuditRecord._meta.db_table]).fetchone()[0]
        other.rollback()
    return drawn


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
    wait_for_transactions_open_now_to_end()
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
    unrelated = other_connection()
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
    wait_for_transactions_open_now_to_end()
    # A transaction that began after the hole was judged does not hold it.
    newer = other_connection()
    try:
        newer.execute("SELECT pg_current_xact_id()")
        webhook_cursors.queue_deliveries(now=far + timedelta(minutes=5))

        subscriber.refresh_from_db()
        assert subscriber.last_event_id == _head(RunEvent)
        assert _told(subscriber, "event") == [after_hole]
    finally:
        newer.close()
