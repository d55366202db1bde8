"""A publisher pass reads the new rows once for every subscriber, then judges them
subscriber by subscriber. Rows that commit in between are not in what the pass read: a hole
of the shared read that fills, a hole every cursor kept that fills after one subscriber read
it again and before the others did, a row beyond the read. Each is told once to each
subscriber that takes it, in this pass or a later one. Likewise rows that commit between the
read for the cursor furthest behind and the read for one far ahead, and rows of
transactions overlapping the passes as they come (some rolled back). The transactions are
real ones, on connections of their own."""

import random
import threading
import time

import pytest

from api import webhook_cursors
from api.models import WebhookSubscriber
from tests.api.webhook_rows import (
    HOLD,
    KINDS,
    Publisher,
    assert_told_once_in_order,
    new_runs,
    new_subscriber,
    other_connection,
    rows_told,
    write_rows,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _after_the_shared_read(monkeypatch, commits: dict) -> None:
    """Commits commits[kind] (connections) once the pass has read the new rows of `kind`,
    before the rows read are judged for any subscriber (the first has read its kept holes
    again; the others have not)."""
    after = webhook_cursors.Written.after

    def read_then_commit(written, through):
        rows = after(written, through)
        for other in commits.pop(written.kind, ()):
            other.commit()
        return rows

    monkeypatch.setattr(webhook_cursors.Written, "after", read_then_commit)


def test_rows_committing_between_the_shared_read_and_a_later_subscriber_are_told_once(
        monkeypatch):
    runs = new_runs()
    orders = runs[0]
    heads = webhook_cursors.cursors_at_head()
    subscribers = [new_subscriber("every", [], heads), new_subscriber("all", [], heads),
                   new_subscriber("orders", ["test-orders"], heads)]
    publisher = Publisher()
    write_rows(runs, 2)
    publisher.passes()
    connections = {(role, kind): other_connection()
                   for role in ("kept", "fresh", "beyond") for kind in KINDS}
    try:
        # A hole every cursor keeps (seen by earlier passes, its horizon taken)...
        kept = {kind: HOLD[kind](connections["kept", kind], orders) for kind in KINDS}
        write_rows(runs, 2)
        publisher.passes(2)
        # ...one the next pass's read will find missing, and a row beyond that read.
        fresh = {kind: HOLD[kind](connections["fresh", kind], orders) for kind in KINDS}
        write_rows(runs, 2)
        beyond = {kind: HOLD[kind](connections["beyond", kind], orders) for kind in KINDS}
        _after_the_shared_read(monkeypatch, {
            kind: [connections[role, kind] for role in ("kept", "fresh", "beyond")]
            for kind in KINDS})

        publisher.passes()
    finally:
        for other in connections.values():
            other.close()
    monkeypatch.undo()

    for kind in KINDS:
        told = [kept[kind][1] in rows_told(subscriber, kind) for subscriber in subscribers]
        # The first subscriber judged had read its holes before they filled; the others
        # read them after, and are told of the kept hole in this pass.
        assert sorted(told) == [False, True, True], kind
        for subscriber in subscribers:
            assert not {fresh[kind][1], beyond[kind][1]} & set(rows_told(subscriber, kind))
    write_rows(runs)
    publisher.passes(2)
    for subscriber in subscribers:
        assert_told_once_in_order(subscriber, heads,
                                  late={*kept.values(), *fresh.values()})
    publisher.until_at_head(subscribers)
    for subscriber in subscribers:
        assert_told_once_in_order(subscriber, heads, late={*kept.values(), *fresh.values()})


def test_rows_committing_between_the_read_for_a_cursor_behind_and_one_far_ahead_are_told_once(
        monkeypatch):
    monkeypatch.setattr(webhook_cursors, "SCAN", 7)
    runs = new_runs()
    orders = runs[0]
    heads = webhook_cursors.cursors_at_head()
    ahead = new_subscriber("ahead", [], heads)
    behind = new_subscriber("behind", ["test-orders"], heads)
    publisher = Publisher()
    WebhookSubscriber.objects.filter(pk=behind.pk).update(active=False)
    for _ in range(8):  # far more than one read of 7 rows
        write_rows(runs)
        publisher.passes()
    WebhookSubscriber.objects.filter(pk=behind.pk).update(active=True)
    held = {kind: other_connection() for kind in KINDS}
    try:
        hole = {kind: HOLD[kind](held[kind], orders) for kind in KINDS}
        write_rows(runs)
        after = webhook_cursors.Written.after

        def commit_before_the_second_read(written, through):
            # The read from the cursor behind is made; the one from the cursor ahead not.
            if len(written.reads) == 1 and written.kind in held:
                held.pop(written.kind).commit()
            return after(written, through)

        monkeypatch.setattr(webhook_cursors.Written, "after", commit_before_the_second_read)
        publisher.passes()
        monkeypatch.setattr(webhook_cursors.Written, "after", after)
        assert held == {}  # both committed during the pass
        for kind in KINDS:  # read by the cursor ahead after it committed: no hole
            assert hole[kind][1] in rows_told(ahead, kind)
    finally:
        for other in held.values():
            other.close()
    for _ in range(6):
        write_rows(runs)
        publisher.passes()
        assert_told_once_in_order(ahead, heads)
    publisher.until_at_head([ahead, behind])

    assert_told_once_in_order(ahead, heads)
    assert_told_once_in_order(behind, heads)
    for kind in KINDS:
        assert hole[kind][1] in rows_told(behind, kind)


def test_rows_written_by_overlapping_transactions_during_passes_are_each_told_once(monkeypatch):
    monkeypatch.setattr(webhook_cursors, "SCAN", 7)
    runs = new_runs()
    heads = webhook_cursors.cursors_at_head()
    subscribers = [new_subscriber("every", [], heads),
                   new_subscriber("orders", ["test-orders"], heads),
                   new_subscriber("others", ["test-saga", "test-approval"], heads)]
    write_rows(runs)
    publisher = Publisher(limit=3)
    publisher.passes()
    written, done = set(), threading.Event()

    def overlapping_transactions():
        # Three connections, each with a transaction of one to three rows left open for a
        # while; a fifth of them roll back. Seeded: the same rows every time, committing
        # wherever the passes happen to be.
        choose = random.Random(7)
        connections = [other_connection() for _ in range(3)]
        open_rows: dict[int, set] = {}
        try:
            for _ in range(90):
                index = choose.randrange(len(connections))
                if index in open_rows:
                    if choose.random() < 0.2:
                        connections[index].rollback()
                    else:
                        connections[index].commit()
                        written.update(open_rows[index])
                    del open_rows[index]
                else:
                    open_rows[index] = {HOLD[choose.choice(list(KINDS))](connections[index],
                                                                         choose.choice(runs[:3]))
                                        for _ in range(choose.randint(1, 3))}
                time.sleep(choose.random() / 50)
            for index, rows in open_rows.items():
                connections[index].commit()
                written.update(rows)
        finally:
            for other in connections:
                other.close()
            done.set()

    writer = threading.Thread(target=overlapping_transactions, daemon=True)
    writer.start()
    while not done.is_set():
        publisher.passes()
    writer.join()
    publisher.until_at_head(subscribers)

    for subscriber in subscribers:
        assert_told_once_in_order(subscriber, heads, late=written)
    # Each row committed is news (a step outcome or a status change of a run, no drill).
    assert written <= {(kind, pk) for kind in KINDS for pk in rows_told(subscribers[0], kind)}
