"""A transaction that stays open holds a subscriber's cursor at its hole for as long as it
is open, but not the deliveries: the rows written after the hole are queued however far past
it they are (the publisher once read only a window of ids after the cursor, and rows beyond
it waited for the hole), each once. A hole further on that fills is delivered too, and the
one the cursor waits at is delivered once its transaction commits; then the cursor reaches
the head. A pass reads what is new and the holes, not the rows between the cursor and the
head, however many."""

from datetime import timedelta

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone

from api import webhook_cursors
from api.models import WebhookDelivery, WebhookSubscriber
from runs.models import RunEvent
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)

# Small, so that the rows past the hole are many windows of the publisher's reads.
SCAN = 50
LIMIT = 30


def _other_connection() -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"],
                           dbname=db["NAME"])


def _held_event(other: psycopg.Connection, run) -> int:
    """The id of a status change written in `other`'s transaction, left open."""
    return other.execute(
        f"INSERT INTO {RunEvent._meta.db_table}"
        " (run_id, status_from, status_to, step_name, outcome, created_at)"
        " VALUES (%s, 'queued', 'running', '', '', now()) RETURNING id",
        [run.pk]).fetchone()[0]


def _written(run, count: int) -> list[int]:
    events = RunEvent.objects.bulk_create(
        RunEvent(run=run, status_from="running", status_to="running",
                 created_at=timezone.now()) for _ in range(count))
    return [event.pk for event in events]


def _told(subscriber) -> list[int]:
    return list(WebhookDelivery.objects.filter(subscriber=subscriber, event__isnull=False)
                .order_by("event_id").values_list("event_id", flat=True))


def _passes(far, count: int) -> None:
    for minutes in range(count):
        webhook_cursors.queue_deliveries(now=far + timedelta(minutes=minutes), limit=LIMIT)


def _rows_read_by_a_pass(far) -> int:
    """The status changes a pass fetches (by the table's indexes: a sequential scan, which a
    planner may choose for a small table, would read them all whatever the bounds)."""

    def fetched(cursor) -> int:
        # This session's counts not yet reported, which include earlier transactions'; none
        # are reported while a transaction is open.
        cursor.execute("SELECT coalesce(idx_tup_fetch, 0) + seq_tup_read"
                       " FROM pg_stat_xact_user_tables WHERE relid = %s::regclass",
                       [RunEvent._meta.db_table])
        return cursor.fetchone()[0]

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        before = fetched(cursor)
        webhook_cursors.queue_deliveries(now=far, limit=LIMIT)
        return fetched(cursor) - before


@pytest.fixture
def small_reads(monkeypatch):
    monkeypatch.setattr(webhook_cursors, "SCAN", SCAN)


def test_rows_far_past_a_held_hole_are_delivered_and_so_is_the_hole_once_it_commits(
        small_reads):
    run = new_run()
    subscriber = WebhookSubscriber.objects.create(
        name="crm", url="http://127.0.0.1:9/hooks", secret="k", **webhook_cursors.cursors_at_head())
    held = _other_connection()
    try:
        hole = _held_event(held, run)
        later = _written(run, 120)  # well over two windows past the hole
        far = timezone.now() + timedelta(hours=1)
        _passes(far, 6)

        subscriber.refresh_from_db()
        assert subscriber.last_event_id < hole  # it may still commit
        assert _told(subscriber) == later  # each committed row, once
        # With nothing new, a pass reads no row: not the 120 between the cursor and the head.
        assert _rows_read_by_a_pass(far + timedelta(minutes=6)) == 0
        more = _written(run, 70)
        _passes(far + timedelta(minutes=7), 3)
        assert _told(subscriber) == later + more
        held.commit()
    finally:
        held.close()

    webhook_cursors.queue_deliveries(now=far + timedelta(minutes=10), limit=LIMIT)

    assert _told(subscriber) == [hole, *later, *more]  # each once
    assert webhook_cursors.queue_deliveries(now=far + timedelta(minutes=11), limit=LIMIT) == 0
    subscriber.refresh_from_db()
    assert subscriber.last_event_id == more[-1]
    assert (subscriber.event_queued_through, subscriber.event_holes_missing,
            subscriber.event_holes_upto) == (None, None, None)


def test_a_hole_past_the_one_the_cursor_waits_at_is_delivered_when_it_fills(small_reads):
    run = new_run()
    subscriber = WebhookSubscriber.objects.create(
        name="crm", url="http://127.0.0.1:9/hooks", secret="k", **webhook_cursors.cursors_at_head())
    first, second = _other_connection(), _other_connection()
    try:
        first_hole = _held_event(first, run)
        between = _written(run, 80)
        second_hole = _held_event(second, run)
        after = _written(run, 80)
        far = timezone.now() + timedelta(hours=1)
        _passes(far, 8)
        assert _told(subscriber) == between + after

        second.commit()  # the later hole fills first, far past the cursor
        _passes(far + timedelta(minutes=8), 2)

        subscriber.refresh_from_db()
        assert subscriber.last_event_id < first_hole
        assert _told(subscriber) == [*between, second_hole, *after]
        first.commit()
    finally:
        first.close()
        second.close()

    _passes(far + timedelta(minutes=10), 2)

    assert _told(subscriber) == [first_hole, *between, second_hole, *after]
    subscriber.refresh_from_db()
    assert subscriber.last_event_id == after[-1]
