"""A pass queues at most `limit` rows of each kind (status changes, step outcomes). When one
kind is cut there, the other kind's rows written since the first row left over wait for the
next pass with it: a receiver never hears that a run completed before the step outcome that
led there, however many other runs' outcomes came first. Each kind keeps its own order."""

from datetime import timedelta

import pytest
from django.utils import timezone

from api.models import WebhookDelivery
from api.webhook_cursors import cursors_at_head, queue_deliveries
from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.models import RunEvent
from tests.api.webhook_rows import new_subscriber
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def outcome(run, seq: int, at):
    return AuditRecord.objects.create(
        run=run, seq=1000 + seq, action=AuditAction.SUCCEEDED, step_name="charge",
        actor_kind="system", actor_label="test", created_at=at, prev_hash="0" * 64,
        hash="0" * 64)


def status_change(run, at, to="completed"):
    return RunEvent.objects.create(run=run, status_from="running", status_to=to,
                                   created_at=at)


def told_in_order(subscriber) -> list[tuple[str, int]]:
    return [("record", record) if record else ("event", event)
            for record, event in WebhookDelivery.objects.filter(subscriber=subscriber)
            .order_by("pk").values_list("record_id", "event_id")]


def test_a_completion_waits_for_its_step_outcome_left_over_by_the_limit():
    busy, finishing = new_run("test-orders"), new_run("test-orders")
    subscriber = new_subscriber("erp", [], cursors_at_head())
    start = timezone.now()
    others = [outcome(busy, n, start + timedelta(seconds=n)) for n in range(4)]
    last_step = outcome(finishing, 10, start + timedelta(seconds=5))
    completed = status_change(finishing, start + timedelta(seconds=6))

    first = queue_deliveries(now=start + timedelta(minutes=1), limit=3)
    # Three outcomes fit; the completion waits with the fourth and the finishing run's.
    assert first == 3
    assert ("event", completed.pk) not in told_in_order(subscriber)

    queue_deliveries(now=start + timedelta(minutes=2), limit=3)
    told = told_in_order(subscriber)
    assert told == [("record", r.pk) for r in others] + [("record", last_step.pk),
                                                          ("event", completed.pk)]


def test_outcomes_wait_for_the_status_changes_left_over_by_the_limit():
    run = new_run("test-orders")
    subscriber = new_subscriber("erp", [], cursors_at_head())
    start = timezone.now()
    changes = [status_change(run, start + timedelta(seconds=n), to="running")
               for n in range(4)]
    later = outcome(run, 20, start + timedelta(seconds=5))

    queue_deliveries(now=start + timedelta(minutes=1), limit=3)
    assert told_in_order(subscriber) == [("event", c.pk) for c in changes[:3]]

    queue_deliveries(now=start + timedelta(minutes=2), limit=3)
    assert told_in_order(subscriber) == [("event", c.pk) for c in changes] + [
        ("record", later.pk)]


def test_an_outcome_written_before_the_rows_left_over_is_not_held():
    run = new_run("test-orders")
    subscriber = new_subscriber("erp", [], cursors_at_head())
    start = timezone.now()
    early = status_change(run, start, to="running")
    outcomes = [outcome(run, n, start + timedelta(seconds=1 + n)) for n in range(4)]

    queue_deliveries(now=start + timedelta(minutes=1), limit=3)
    # The status change came before every outcome left over: it goes now, first.
    assert told_in_order(subscriber) == [("event", early.pk)] + [
        ("record", o.pk) for o in outcomes[:3]]
    queue_deliveries(now=start + timedelta(minutes=2), limit=3)
    assert told_in_order(subscriber)[-1] == ("record", outcomes[3].pk)
    assert WebhookDelivery.objects.filter(subscriber=subscriber).count() == 5
