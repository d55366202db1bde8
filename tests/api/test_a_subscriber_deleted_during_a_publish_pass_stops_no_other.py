"""An admin may delete a subscriber that has no deliveries yet while a publish pass queues its
first ones: that subscriber's deliveries go with it, and the pass goes on for every other
subscriber. The foreign key refused the whole pass's insert, and the pass stopped there."""

import threading

import pytest
from django.db import connection, transaction

from api import webhook_cursors
from api.models import WebhookDelivery, WebhookSubscriber
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)


def _subscribe(name: str) -> WebhookSubscriber:
    return WebhookSubscriber.objects.create(name=name, url=f"http://127.0.0.1:9/{name}",
                                            secret="k", **webhook_cursors.cursors_at_head())


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                       "current_database() AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0] > 0


def test_the_pass_queues_the_other_subscribers_deliveries():
    going, staying = _subscribe("going"), _subscribe("staying")
    new_run()
    deleted, commit, queued = threading.Event(), threading.Event(), {}

    def admin_deletes_it():
        try:
            with transaction.atomic():
                WebhookSubscriber.objects.filter(pk=going.pk).delete()
                deleted.set()
                commit.wait(30)
        finally:
            connection.close()

    def publish_pass():
        try:
            queued["n"] = webhook_cursors.queue_deliveries()
        except Exception as exc:  # what the pass would have ended in
            queued["error"] = exc
        finally:
            connection.close()

    admin = threading.Thread(target=admin_deletes_it, daemon=True)
    admin.start()
    assert deleted.wait(30)
    publisher = threading.Thread(target=publish_pass, daemon=True)
    publisher.start()
    # The pass read both subscribers and waits on the deleted one's row, which the admin's
    # transaction holds: its commit makes the pass's delivery for it refer to nothing.
    for _ in range(600):
        if _waiting_on_a_lock() or not publisher.is_alive():
            break
        publisher.join(0.05)
    commit.set()
    admin.join(30)
    publisher.join(30)

    assert "error" not in queued, queued.get("error")
    assert not WebhookSubscriber.objects.filter(pk=going.pk).exists()
    assert WebhookDelivery.objects.filter(subscriber=staying).count() == 1
    assert WebhookDelivery.objects.count() == 1
