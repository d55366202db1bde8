"""A publisher pass reads the status changes and the audit records written since the last
pass once, not once per subscriber: each subscriber's cursor judges the rows read by its
own workflows, and each subscriber is queued what it takes, in the order written. A
subscriber far behind the others (made active again) reads its own rows: the others are
not held back while it catches up."""

import pytest
from django.db import connection, transaction
from django.utils import timezone

from api import webhook_cursors
from api.models import WebhookDelivery, WebhookSubscriber
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import RunEvent
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _subscriber(name: str, workflows: list[str], heads: dict) -> WebhookSubscriber:
    return WebhookSubscriber.objects.create(name=name, url="http://127.0.0.1:9/hooks",
                                            secret="k", workflows=workflows, **heads)


def _fetched(cursor, model) -> int:
    """The rows of `model`'s table this session fetched in its transaction, by its indexes or
    by a sequential scan."""
    cursor.execute("SELECT coalesce(idx_tup_fetch, 0) + seq_tup_read"
                   " FROM pg_stat_xact_user_tables WHERE relid = %s::regclass",
                   [model._meta.db_table])
    return cursor.fetchone()[0]


def _told(subscriber) -> list[tuple[int | None, int | None]]:
    return list(WebhookDelivery.objects.filter(subscriber=subscriber).order_by("pk")
                .values_list("event_id", "record_id"))


def test_a_pass_with_three_subscribers_reads_each_new_row_once_and_queues_each_what_it_takes(
        script):
    heads = webhook_cursors.cursors_at_head()
    every = _subscriber("every", [], heads)
    orders = _subscriber("orders", ["test-orders"], heads)
    sagas = _subscriber("sagas", ["test-saga"], heads)
    for run in (new_run(), new_run()):
        executor.advance_run(run.pk, worker="w1")
    events = RunEvent.objects.filter(pk__gt=heads["last_event_id"]).count()
    records = AuditRecord.objects.filter(pk__gt=heads["last_record_id"]).count()

    # By the indexes, as on a large table: a sequential scan, which a planner may choose for
    # a small one, would read every row whatever the bounds.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        before = _fetched(cursor, RunEvent), _fetched(cursor, AuditRecord)
        queued = webhook_cursors.queue_deliveries()
        read = (_fetched(cursor, RunEvent) - before[0],
                _fetched(cursor, AuditRecord) - before[1])

    assert read == (events, records)  # each row once, not once per subscriber
    # Each run: queued, running, four step outcomes, completed.
    assert queued == 2 * 2 * 7
    assert len(_told(every)) == 2 * 7
    assert _told(orders) == _told(every)  # the same rows, in the same order
    assert _told(sagas) == []
    for subscriber in (every, orders, sagas):  # every row read, told or not
        subscriber.refresh_from_db()
        assert [webhook_cursors.CursorState.of(subscriber, kind).through
                for kind in ("event", "record")] == [RunEvent.objects.latest("pk").pk,
                                                    AuditRecord.objects.latest("pk").pk]


def test_a_subscriber_catching_up_holds_back_no_other_and_each_is_told_every_row_once(
        monkeypatch):
    monkeypatch.setattr(webhook_cursors, "SCAN", 20)  # rows read per cursor and pass
    heads = webhook_cursors.cursors_at_head()
    keeping_up = _subscriber("keeping-up", [], heads)
    behind = _subscriber("behind", [], heads)
    WebhookSubscriber.objects.filter(pk=behind.pk).update(active=False)
    run = new_run()
    _write(run, 50)
    for _ in range(3):
        webhook_cursors.queue_deliveries()
    WebhookSubscriber.objects.filter(pk=behind.pk).update(active=True)
    _write(run, 5)
    written = list(RunEvent.objects.filter(pk__gt=heads["last_event_id"]).order_by("pk")
                   .values_list("pk", flat=True))

    webhook_cursors.queue_deliveries()

    # The five new rows reach the subscriber keeping up in the pass that starts the other's
    # catching up, 20 rows at a time.
    assert _events(keeping_up) == written
    assert _events(behind) == written[:20]
    for _ in range(2):
        webhook_cursors.queue_deliveries()
    assert _events(behind) == written
    assert _events(keeping_up) == written


def _events(subscriber) -> list[int]:
    """The status changes `subscriber` is told of, by id (each once: a second delivery of
    one is refused)."""
    return sorted(event for event, _ in _told(subscriber))


def _write(run, count: int) -> None:
    RunEvent.objects.bulk_create(
        RunEvent(run=run, status_from="running", status_to="running",
                 created_at=timezone.now()) for _ in range(count))
