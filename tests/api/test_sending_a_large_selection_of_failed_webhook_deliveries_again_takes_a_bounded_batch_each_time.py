""""Send again" on the webhook deliveries list, with Django's "select all" across pages,
takes the first SEND_AGAIN_AT_MOST failed deliveries of the selection back to pending, not
all of them: it counted the whole selection, then read, locked and changed every failed one
in one request and one transaction (a receiver down for a day leaves a million). The message
says how many were taken and that more are left, to be taken by choosing it again on the
same list; each time takes the next ones, until none is left. Failed ones left so because
their subscriber no longer takes their workflow are read past, not counted in the batch."""

from datetime import timedelta
from uuid import uuid4

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db import connection
from django.utils import timezone

from api.models import WebhookDelivery, WebhookSubscriber
from api.webhooks import SEND_AGAIN_AT_MOST
from audit.access import AccessAction
from audit.models import AccessRecord
from runs.models import RunEvent
from tests.factories import new_run

pytestmark = pytest.mark.django_db

FAILED = 2 * SEND_AGAIN_AT_MOST + SEND_AGAIN_AT_MOST // 2
TABLE = WebhookDelivery._meta.db_table
URL = "/admin/api/webhookdelivery/?status__exact=failed"
MORE = (f"more failed deliveries are left in the selection: {SEND_AGAIN_AT_MOST} at most are "
        "sent again at a time, choose Send again on the same list once more for the next "
        "ones.")


@pytest.fixture
def backlog():
    crm = WebhookSubscriber.objects.create(name="crm", url="https://crm.example/", secret="s")
    then = timezone.now() - timedelta(days=1)
    WebhookDelivery.objects.bulk_create(
        WebhookDelivery(subscriber=crm, delivery_id=uuid4(), status="failed", attempts=10,
                        next_attempt_at=then, last_status_code=500)
        for _ in range(FAILED))
    return sorted(WebhookDelivery.objects.values_list("pk", flat=True))


def send_again_all(client, one_pk):
    sent = []

    def noted(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(noted):
        response = client.post(URL, {"action": "send_again", "index": 0, "select_across": 1,
                                     "_selected_action": [one_pk]})
    assert response.status_code == 302
    said = [str(m) for m in get_messages(response.wsgi_request)]
    client.get(response["Location"])  # shows the message, and takes it out of the session
    return said, sent


def pending() -> set:
    return set(WebhookDelivery.objects.filter(status="pending").values_list("pk", flat=True))


def test_select_all_sends_again_a_bounded_batch_each_time_and_says_more_are_left(
        client, backlog):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))

    said, queries = send_again_all(client, backlog[0])

    assert said == [f"{SEND_AGAIN_AT_MOST} failed delivery(ies) taken back to pending, due "
                    f"now; {MORE}"]
    assert pending() == set(backlog[:SEND_AGAIN_AT_MOST])
    (record,) = AccessRecord.objects.filter(action=AccessAction.WEBHOOK_DELIVERIES_SENT_AGAIN)
    assert record.after == {"status": "pending", "deliveries": SEND_AGAIN_AT_MOST}
    # The deliveries are read no more than the bound at a time: no unbounded count or read.
    reads = [sql for sql in queries if f'FROM "{TABLE}"' in sql and sql.startswith("SELECT")]
    assert reads and all("LIMIT" in sql for sql in reads), reads

    said, _ = send_again_all(client, backlog[-1])
    assert said == [f"{SEND_AGAIN_AT_MOST} failed delivery(ies) taken back to pending, due "
                    f"now; {MORE}"]
    assert pending() == set(backlog[:2 * SEND_AGAIN_AT_MOST])

    said, _ = send_again_all(client, backlog[-1])
    assert said == [f"{FAILED - 2 * SEND_AGAIN_AT_MOST} failed delivery(ies) taken back to "
                    "pending, due now; 0 skipped (not failed)."]
    assert pending() == set(backlog)
    assert WebhookDelivery.objects.filter(status="failed").count() == 0


def test_failed_ones_of_a_workflow_no_longer_taken_first_in_the_list_do_not_hold_back_the_rest(
        client):
    """Those left failed because their subscriber no longer takes their workflow stay in
    the failed list: counted toward the batch, a list beginning with SEND_AGAIN_AT_MOST of
    them took nothing, and said more were left, however often it was sent again."""
    crm = WebhookSubscriber.objects.create(name="crm", url="https://crm.example/", secret="s",
                                           workflows=["test-orders"])
    then = timezone.now() - timedelta(days=1)

    def failed_deliveries(run, count):
        events = RunEvent.objects.bulk_create(
            RunEvent(run=run, status_from="running", status_to="failed", created_at=then)
            for _ in range(count))
        return [d.pk for d in WebhookDelivery.objects.bulk_create(
            WebhookDelivery(subscriber=crm, event=event, delivery_id=uuid4(), status="failed",
                            attempts=10, next_attempt_at=then, last_status_code=500)
            for event in events)]

    not_taken = failed_deliveries(new_run("test-saga"), SEND_AGAIN_AT_MOST + 5)
    orders = failed_deliveries(new_run("test-orders"), 3)
    assert max(not_taken) < min(orders)
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    left = (f"more than {SEND_AGAIN_AT_MOST} left failed: their subscriber no longer takes "
            "their workflow; the rest of the selection skipped (not failed).")

    said, queries = send_again_all(client, not_taken[0])

    assert said == [f"3 failed delivery(ies) taken back to pending, due now; {left}"]
    assert pending() == set(orders)
    reads = [sql for sql in queries if f'FROM "{TABLE}"' in sql and sql.startswith("SELECT")]
    assert reads and all("LIMIT" in sql for sql in reads), reads

    # Again on the same list: nothing more to take, and none of the three taken twice.
    said, _ = send_again_all(client, not_taken[0])
    assert said == [f"0 failed delivery(ies) taken back to pending, due now; {left}"]
    assert pending() == set(orders)
    assert (set(WebhookDelivery.objects.filter(status="failed").values_list("pk", flat=True))
            == set(not_taken))
    (record,) = AccessRecord.objects.filter(action=AccessAction.WEBHOOK_DELIVERIES_SENT_AGAIN)
    assert record.after == {"status": "pending", "deliveries": 3}
