"""A status change whose transaction stalls after drawing its id, while later ones commit,
is delivered once it commits, however long it stalled: the subscriber's cursor waits at its
hole while PostgreSQL says the transaction is open, not for a time (the publisher once
passed a hole 30 s after the row behind it was written, and lost such a row for good)."""

from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from api import webhook_cursors
from api.models import WebhookDelivery, WebhookSubscriber
from runs.models import RunEvent
from tests.factories import new_run


def _other_connection() -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"],
                           dbname=db["NAME"])


def _told(subscriber) -> list[int]:
    return list(WebhookDelivery.objects.filter(subscriber=subscriber, event__isnull=False)
                .order_by("event_id").values_list("event_id", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_row_whose_commit_stalls_past_the_old_settle_time_is_still_delivered():
    run = new_run()
    subscriber = WebhookSubscriber.objects.create(
        name="crm", url="http://127.0.0.1:9/hooks", secret="k", workflows=[run.workflow_name],
        **webhook_cursors.cursors_at_head())
    stalled = _other_connection()
    try:
        # A transition's transaction: its status change draws an id, then it stalls.
        stalled_id = stalled.execute(
            f"INSERT INTO {RunEvent._meta.db_table}"
            " (run_id, status_from, status_to, step_name, outcome, created_at)"
            " VALUES (%s, 'queued', 'running', '', '', now()) RETURNING id",
            [run.pk]).fetchone()[0]
        later = new_run()  # commits, with higher ids
        later_event = RunEvent.objects.get(run=later).pk
        assert later_event > stalled_id
        # An hour on, and passes enough to pass any hole whose transactions ended.
        far = timezone.now() + timedelta(hours=1)
        for minutes in range(4):
            webhook_cursors.queue_deliveries(now=far + timedelta(minutes=minutes))

        subscriber.refresh_from_db()
        assert subscriber.last_event_id < stalled_id  # the cursor waits at the hole
        assert _told(subscriber) == [later_event]  # what committed is not held back
        stalled.commit()
    finally:
        stalled.close()

    webhook_cursors.queue_deliveries(now=far + timedelta(minutes=5))

    assert _told(subscriber) == [stalled_id, later_event]  # each once
    assert webhook_cursors.queue_deliveries(now=far + timedelta(minutes=6)) == 0
    subscriber.refresh_from_db()
    assert subscriber.last_event_id == RunEvent.objects.order_by("-pk").first().pk
    # Nothing is left waiting.
    assert subscriber.event_holes_upto is None
