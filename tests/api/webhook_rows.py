"""Rows written and publisher passes made for the webhook publisher's tests: status changes
and step outcomes of runs of several workflows, committed at once or held open in
transactions of their own (real connections), passes a minute apart that check each pass's
deliveries as they go, and what each subscriber is to be told."""

import itertools
import time
from datetime import timedelta

import psycopg
from django.db import connection
from django.db.models import Max
from django.utils import timezone

from api import webhook_cursors
from api.models import WebhookDelivery, WebhookSubscriber
from audit.actions import STEP_OUTCOMES, AuditAction
from audit.models import AuditRecord
from runs.models import RunEvent
from tests.factories import new_run

KINDS = {"event": RunEvent, "record": AuditRecord}
# Audit sequence numbers for the records written here, clear of those a run starts with.
_seqs = itertools.count(1000)


def other_connection(**options) -> psycopg.Connection:
    """A connection of its own to the test database: its transaction is another's."""
    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"],
                           dbname=db["NAME"], **options)


def new_subscriber(name: str, workflows: list[str], heads: dict) -> WebhookSubscriber:
    return WebhookSubscriber.objects.create(name=name, url="http://127.0.0.1:9/hooks",
                                            secret="k", workflows=workflows, **heads)


def new_runs() -> list:
    """Runs of three workflows (test-orders, test-saga, test-approval), and a drill run (no
    news to anyone)."""
    return [new_run("test-orders"), new_run("test-saga"), new_run("test-approval"),
            new_run("test-orders", drill=True)]


def write_rows(runs, rounds: int = 1) -> None:
    """Status changes and step outcomes of `runs`, interleaved, each committed at once; some
    records are no step outcome, or have no step, and so no news."""
    for number in range(rounds):
        for run in runs:
            now = timezone.now()
            RunEvent.objects.create(run=run, status_from="running", status_to="running",
                                    created_at=now)
            AuditRecord.objects.create(
                run=run, seq=next(_seqs),
                action=AuditAction.SUCCEEDED if number % 3 else AuditAction.CLAIMED,
                step_name="charge" if number % 4 != 1 else "", actor_kind="system",
                actor_label="test", created_at=now, prev_hash="0" * 64, hash="0" * 64)


def hold_event(other: psycopg.Connection, run) -> tuple[str, int]:
    """("event", id) of a status change of `run` written in `other`'s transaction, left
    open."""
    return "event", other.execute(
        f"INSERT INTO {RunEvent._meta.db_table}"
        " (run_id, status_from, status_to, step_name, outcome, created_at)"
        " VALUES (%s, 'running', 'running', '', '', now()) RETURNING id",
        [run.pk]).fetchone()[0]


def hold_record(other: psycopg.Connection, run) -> tuple[str, int]:
    """("record", id) of a step outcome of `run` written in `other`'s transaction, left
    open."""
    return "record", other.execute(
        f"INSERT INTO {AuditRecord._meta.db_table}"
        " (run_id, seq, action, step_name, actor_kind, actor_label, reason, before, after,"
        "  data, created_at, prev_hash, hash)"
        " VALUES (%s, %s, 'succeeded', 'charge', 'system', 'test', '', '{}', '{}', '{}',"
        "  now(), %s, %s) RETURNING id",
        [run.pk, next(_seqs), "0" * 64, "0" * 64]).fetchone()[0]


HOLD = {"event": hold_event, "record": hold_record}


def wait_for_transactions_open_now_to_end() -> None:
    """Transaction ids are the server's: a test of another database may hold one open for
    a while. Waits (not a timed assertion: the bound only stops a hang) until every
    transaction given an id before this call has ended."""
    with other_connection(autocommit=True) as other:
        now = other.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]
        deadline = time.monotonic() + 600
        # Every id below `now` still open is in the snapshot's list: `now` has ended.
        while other.execute("SELECT count(*) FROM pg_snapshot_xip(pg_current_snapshot()) x"
                            " WHERE x::text::bigint < %s", [now]).fetchone()[0]:
            assert time.monotonic() < deadline, "a transaction of the server stays open"
            time.sleep(0.2)


class Publisher:
    """Publisher passes a minute apart (past HOLE_MIN_AGE: a hole one pass sees has its
    horizon taken by the next), checking each pass's deliveries as it goes: each
    subscriber's of each kind in the order of their ids, at most the limit, and each one
    the pass counted made (none refused as a second delivery of a row)."""

    def __init__(self, *, limit: int = 1000):
        self.now = timezone.now() + timedelta(hours=1)
        self.limit = limit
        self.queued = 0

    def passes(self, count: int = 1) -> None:
        for _ in range(count):
            before = WebhookDelivery.objects.aggregate(last=Max("pk"))["last"] or 0
            self.queued += webhook_cursors.queue_deliveries(now=self.now, limit=self.limit)
            self.now += timedelta(minutes=1)
            made = WebhookDelivery.objects.filter(pk__gt=before).order_by("pk")
            for subscriber in WebhookSubscriber.objects.all():
                for kind in KINDS:
                    ids = list(made.filter(subscriber=subscriber, **{f"{kind}__isnull": False})
                               .values_list(f"{kind}_id", flat=True))
                    assert ids == sorted(ids), (subscriber.name, kind, ids)
                    assert len(ids) <= self.limit
            assert self.queued == WebhookDelivery.objects.count()

    def until_at_head(self, subscribers) -> None:
        """Passes until every cursor of `subscribers` stands at the newest row of its kind,
        each transaction that could fill a hole having ended (bounded: a pass moves each
        cursor, or its holes' judging, on)."""
        for _ in range(200):
            self.passes(2)
            if all(at_head(subscriber) for subscriber in subscribers):
                break
            wait_for_transactions_open_now_to_end()
        assert all(at_head(subscriber) for subscriber in subscribers)
        self.passes()
        assert all(at_head(subscriber) for subscriber in subscribers)


def at_head(subscriber) -> bool:
    subscriber.refresh_from_db()
    return (subscriber.last_event_id, subscriber.last_record_id) == (
        RunEvent.objects.aggregate(head=Max("pk"))["head"],
        AuditRecord.objects.aggregate(head=Max("pk"))["head"])


def rows_taken(subscriber, heads: dict) -> dict[str, set[int]]:
    """The committed rows of each kind `subscriber` is to be told of: news (step outcomes
    with a step, of runs that are no drill) of its workflows, written after `heads` (where
    its cursors started)."""
    events = RunEvent.objects.filter(pk__gt=heads["last_event_id"], run__drill=False)
    records = (AuditRecord.objects.filter(pk__gt=heads["last_record_id"], run__drill=False,
                                          action__in=[str(a) for a in STEP_OUTCOMES])
               .exclude(step_name=""))
    if subscriber.workflows:
        events = events.filter(run__workflow_name__in=subscriber.workflows)
        records = records.filter(run__workflow_name__in=subscriber.workflows)
    return {"event": set(events.values_list("pk", flat=True)),
            "record": set(records.values_list("pk", flat=True))}


def rows_told(subscriber, kind: str) -> list[int]:
    """The rows of `kind` the subscriber is told of, in the order queued."""
    return list(WebhookDelivery.objects.filter(subscriber=subscriber, **{f"{kind}__isnull": False})
                .order_by("pk").values_list(f"{kind}_id", flat=True))


def assert_told_once_in_order(subscriber, heads: dict, *, late=()) -> None:
    """Each row the subscriber takes is told once and nothing else, each kind in the order
    of its ids, save the `late` rows ((kind, id)), which committed after rows above them
    were told."""
    taken = rows_taken(subscriber, heads)
    for kind in KINDS:
        told = rows_told(subscriber, kind)
        assert len(told) == len(set(told)), (subscriber.name, kind)
        assert set(told) == taken[kind], (subscriber.name, kind)
        in_order = [pk for pk in told if (kind, pk) not in late]
        assert in_order == sorted(in_order), (subscriber.name, kind)


def assert_below(subscriber, held) -> None:
    """The subscriber's cursors stand below each of the `held` rows ((kind, id)): they may
    still commit."""
    subscriber.refresh_from_db()
    for kind, pk in held:
        assert getattr(subscriber, f"last_{kind}_id") < pk
