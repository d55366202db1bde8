"""Ids are drawn when a row is inserted, not when it commits: a status change whose
transaction commits after a later one's sits below ids already visible. A subscriber's
cursor never moves past such a hole while it may still fill, so the event is delivered
once it commits. (A hole a rolled-back transaction left, and one held by a transaction
stalled for long: test_a_hole_is_passed_once_no_transaction_that_could_fill_it_is_open,
test_a_row_whose_commit_stalls_past_the_old_settle_time_is_still_delivered.)"""

import threading

import pytest
from django.db import connection, transaction
from django.utils import timezone

from api import webhook_cursors
from api.models import WebhookDelivery, WebhookSubscriber
from runs.models import RunEvent
from tests.factories import new_run


def _subscribe() -> WebhookSubscriber:
    return WebhookSubscriber.objects.create(name="crm", url="http://127.0.0.1:9/hooks",
                                            secret="k", **webhook_cursors.cursors_at_head())


def _told(subscriber) -> set[int]:
    return set(WebhookDelivery.objects.filter(subscriber=subscriber)
               .values_list("event_id", flat=True))


@pytest.mark.django_db(transaction=True)
def test_an_event_committed_after_a_later_one_is_still_delivered():
    run = new_run()
    subscriber = _subscribe()
    written, release, ended = threading.Event(), threading.Event(), threading.Event()
    slow = {}

    def transition_that_commits_late():
        try:
            with transaction.atomic():
                slow["id"] = RunEvent.objects.create(
                    run=run, status_from="queued", status_to="running",
                    created_at=timezone.now()).pk
                written.set()
                release.wait(30)
        finally:
            connection.close()
            ended.set()

    threading.Thread(target=transition_that_commits_late, daemon=True).start()
    assert written.wait(30)
    later = new_run()  # its event commits first, with a higher id
    webhook_cursors.queue_deliveries()
    later_event = RunEvent.objects.get(run=later).pk
    assert _told(subscriber) == {later_event}  # what is committed is not held back
    release.set()
    assert ended.wait(30)

    webhook_cursors.queue_deliveries()

    assert _told(subscriber) == {later_event, slow["id"]}
    assert webhook_cursors.queue_deliveries() == 0  # each once
