"""Every subscriber is told each status change and step outcome it takes (news, of its
workflows) once, and nothing else, each kind in the order of its ids, whatever the passes
meet: subscribers of different workflows whose cursors stand in different places (one paused
for longer than a pass reads, one registered midway), a transaction holding ids below many
committed rows across passes, then committing, another rolling back, passes cut short by
their limit, and rows whose times (taken when their transaction began) do not follow their
ids. The transactions are real ones, on connections of their own."""

import pytest

from api import webhook_cursors
from api.models import WebhookSubscriber
from tests.api.webhook_rows import (
    KINDS,
    Publisher,
    assert_below,
    assert_told_once_in_order,
    hold_event,
    hold_record,
    new_runs,
    new_subscriber,
    other_connection,
    rows_taken,
    rows_told,
    write_rows,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_three_subscribers_are_told_their_rows_once_past_a_held_then_a_rolled_back_transaction():
    runs = new_runs()
    orders, saga, approval, _ = runs
    heads = webhook_cursors.cursors_at_head()
    subscribers = [new_subscriber("every", [], heads),
                   new_subscriber("orders", ["test-orders"], heads),
                   new_subscriber("others", ["test-saga", "test-approval"], heads)]
    publisher = Publisher()
    write_rows(runs, 2)
    publisher.passes()
    held = other_connection()
    try:
        held_rows = {hold_event(held, orders), hold_record(held, saga),
                     hold_event(held, approval)}
        write_rows(runs, 10)  # far more committed rows above the held ids
        publisher.passes(4)
        for subscriber in subscribers:
            assert_told_once_in_order(subscriber, heads)
            assert_below(subscriber, held_rows)
        write_rows(runs, 3)
        publisher.passes(2)
        held.commit()
    finally:
        held.close()
    publisher.passes(2)
    for subscriber in subscribers:
        assert_told_once_in_order(subscriber, heads, late=held_rows)
    assert {(kind, pk) for subscriber in subscribers for kind in KINDS
            for pk in rows_told(subscriber, kind)} >= held_rows

    rolled_back = other_connection()
    try:
        gone = {hold_event(rolled_back, saga), hold_record(rolled_back, orders)}
        write_rows(runs, 3)
        publisher.passes(2)
        rolled_back.rollback()
    finally:
        rolled_back.close()
    write_rows(runs, 1)
    publisher.until_at_head(subscribers)

    for subscriber in subscribers:
        assert_told_once_in_order(subscriber, heads, late=held_rows)
        assert not gone & {(kind, pk) for kind in KINDS for pk in rows_told(subscriber, kind)}
    assert webhook_cursors.queue_deliveries(now=publisher.now) == 0


def test_a_subscriber_paused_past_a_read_and_one_registered_midway_are_told_their_rows_once(
        monkeypatch):
    monkeypatch.setattr(webhook_cursors, "SCAN", 7)  # rows read per cursor and pass
    runs = new_runs()
    orders = runs[0]
    heads = webhook_cursors.cursors_at_head()
    steady = new_subscriber("steady", [], heads)
    paused = new_subscriber("paused", ["test-orders"], heads)
    publisher = Publisher()
    write_rows(runs)
    publisher.passes()
    WebhookSubscriber.objects.filter(pk=paused.pk).update(active=False)
    for _ in range(12):  # over 40 rows of each kind: many reads of 7
        write_rows(runs)
        publisher.passes()
        assert_told_once_in_order(steady, heads)
    WebhookSubscriber.objects.filter(pk=paused.pk).update(active=True)
    midway_heads = webhook_cursors.cursors_at_head()
    midway = new_subscriber("midway", ["test-saga"], midway_heads)
    held = other_connection()
    try:
        held_row = hold_event(held, orders)
        for number in range(15):
            if number % 3 == 0:
                write_rows(runs)
            publisher.passes()
            # The steady subscriber is not held back while the other catches up.
            assert_told_once_in_order(steady, heads)
            assert_told_once_in_order(midway, midway_heads)
        held.commit()
    finally:
        held.close()
    publisher.until_at_head([steady, paused, midway])

    assert_told_once_in_order(steady, heads, late={held_row})
    assert_told_once_in_order(paused, heads, late={held_row})
    assert_told_once_in_order(midway, midway_heads)
    assert held_row[1] in rows_told(paused, "event")


def test_passes_cut_short_by_their_limit_skip_no_row_and_tell_none_twice(monkeypatch):
    monkeypatch.setattr(webhook_cursors, "SCAN", 7)
    runs = new_runs()
    saga = runs[1]
    heads = webhook_cursors.cursors_at_head()
    first = new_subscriber("first", [], heads)
    orders = new_subscriber("orders", ["test-orders"], heads)
    publisher = Publisher(limit=3)
    write_rows(runs, 3)
    publisher.passes()
    WebhookSubscriber.objects.filter(pk=orders.pk).update(active=False)
    later_heads = webhook_cursors.cursors_at_head()
    later = new_subscriber("later", ["test-saga", "test-approval"], later_heads)
    write_rows(runs, 4)
    publisher.passes(2)
    WebhookSubscriber.objects.filter(pk=orders.pk).update(active=True)
    last_heads = webhook_cursors.cursors_at_head()
    last = new_subscriber("last", [], last_heads)
    starts = ((first, heads), (orders, heads), (later, later_heads), (last, last_heads))
    held = other_connection()
    try:
        held_rows = {hold_record(held, saga), hold_event(held, saga)}
        for number in range(20):  # more new than a pass takes: the cursors stay apart
            if number % 2 == 0:
                write_rows(runs)
            publisher.passes()
        for subscriber, start in starts:
            assert_below(subscriber, held_rows)
            for kind in KINDS:
                assert set(rows_told(subscriber, kind)) <= rows_taken(subscriber, start)[kind]
        held.commit()
    finally:
        held.close()
    publisher.until_at_head([first, orders, later, last])

    for subscriber, start in starts:
        assert_told_once_in_order(subscriber, start, late=held_rows)


def test_rows_whose_transaction_began_before_rows_below_them_are_told_after_those():
    # A transition's rows carry the time it began, not when they were written: this
    # transaction's now() is when it began, before the committed rows below its own ids.
    runs = new_runs()
    orders, saga, _, _ = runs
    heads = webhook_cursors.cursors_at_head()
    subscribers = [new_subscriber("every", [], heads),
                   new_subscriber("orders", ["test-orders"], heads)]
    begun_first = other_connection()
    try:
        begun_first.execute("SELECT pg_current_xact_id()")
        write_rows(runs, 2)
        written_last = {hold_event(begun_first, orders), hold_record(begun_first, saga)}
        begun_first.commit()
    finally:
        begun_first.close()
    write_rows(runs)

    Publisher().passes()  # every row is new to this one pass

    for subscriber in subscribers:  # each kind in the order of its ids
        assert_told_once_in_order(subscriber, heads)
    assert {(kind, pk) for kind in KINDS for pk in rows_told(subscribers[0], kind)} >= written_last
