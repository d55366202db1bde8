"""A delivery that failed for good (ten errors, about 17 minutes) is sent again from the
Webhook deliveries list by staff who may change deliveries: it goes back to pending, due
now, with a fresh budget of attempts and its delivery id, and is delivered once the
receiver answers. Pending and delivered ones are left as they are; staff who may only look
change nothing; every send-again is in the access chain. The receiver is a real HTTP
server on localhost."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from api import webhook_cursors, webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from audit.access import AccessAction, verify_access_chain
from audit.models import AccessRecord
from tests.factories import new_run
from tests.receiver import ScriptedReceiver

SENT_AGAIN = AccessAction.WEBHOOK_DELIVERIES_SENT_AGAIN

pytestmark = pytest.mark.django_db
LIST = "/admin/api/webhookdelivery/"
SECRET = "whsec-never-recorded"


@pytest.fixture
def receiver():
    r = ScriptedReceiver()
    # Also the X-Webhook-Id of each POST, in the order received.
    r.ids = []
    answer = r.server.RequestHandlerClass

    class Recording(answer):
        def do_POST(self):
            r.ids.append((self.path, self.headers["X-Webhook-Id"]))
            super().do_POST()

    r.server.RequestHandlerClass = Recording
    with r:
        yield r


def _subscriber(receiver, name):
    return WebhookSubscriber.objects.create(name=name, url=f"{receiver.url}/{name}",
                                            secret=SECRET, **webhook_cursors.cursors_at_head())


def _fail_for_good(runs=1):
    """Queue a status change of `runs` new runs and send it until it fails for good: ten
    passes an hour apart, each after the backoff."""
    for _ in range(runs):
        new_run()
    start = timezone.now() - timedelta(days=1)
    webhook_cursors.queue_deliveries(now=start)
    for hour in range(webhooks.RETRY.maximum_attempts):
        webhooks.send_due(now=start + timedelta(hours=hour))


def _staff(codenames, username="ops"):
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="api",
                                                        codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def _send_again(client, deliveries, url=LIST, **extra):
    return client.post(url, {"action": "send_again", "index": 0,
                             "_selected_action": [d.pk for d in deliveries], **extra})


def _state(delivery):
    delivery.refresh_from_db()
    return (delivery.status, delivery.attempts, delivery.next_attempt_at,
            delivery.last_status_code, delivery.last_error, delivery.delivered_at)


def _said(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_a_failed_delivery_sent_again_is_delivered_once_with_its_delivery_id(receiver):
    _subscriber(receiver, "crm")
    receiver.answer("POST", "/crm", 500)
    _fail_for_good()
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 10)
    assert len(receiver.ids) == 10

    staff = _staff(["view_webhookdelivery", "change_webhookdelivery"])
    offered = staff.get(LIST).context["action_form"].fields["action"].choices
    assert "send_again" in dict(offered)
    response = _send_again(staff, [delivery])

    assert response.status_code == 302
    assert _said(response) == ["1 failed delivery(ies) taken back to pending, due now; "
                               "0 skipped (not failed)."]
    again = WebhookDelivery.objects.get(pk=delivery.pk)
    assert (again.status, again.attempts) == ("pending", 0)
    assert again.next_attempt_at <= timezone.now()
    assert again.delivery_id == delivery.delivery_id
    assert len(receiver.ids) == 10  # nothing sent by the action itself

    receiver.answer("POST", "/crm", 204)
    report = webhooks.send_due()
    assert (report.delivered, report.failed) == (1, 0)
    webhooks.send_due(now=timezone.now() + timedelta(hours=2))  # and never again
    assert receiver.ids == [("/crm", str(delivery.delivery_id))] * 11
    delivered = WebhookDelivery.objects.get(pk=delivery.pk)
    assert (delivered.status, delivered.attempts, delivered.last_status_code) == \
        ("delivered", 1, 204)

    record = AccessRecord.objects.get(action=SENT_AGAIN)
    assert (record.actor_label, record.subject) == ("ops", "webhook subscriber crm")
    assert (record.before, record.after) == ({"status": "failed", "deliveries": 1},
                                             {"status": "pending", "deliveries": 1})
    assert SECRET not in f"{record.before}{record.after}{record.reason}"
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None


def test_pending_and_delivered_deliveries_are_left_as_they_are(receiver):
    _subscriber(receiver, "crm")
    receiver.answer("POST", "/crm", 500)
    _fail_for_good()
    failed = WebhookDelivery.objects.get()
    receiver.answer("POST", "/crm", 204)
    new_run()
    webhooks.publish()
    delivered = WebhookDelivery.objects.get(status="delivered")
    receiver.answer("POST", "/crm", 500)
    new_run()
    webhooks.publish()
    pending = WebhookDelivery.objects.get(status="pending")
    untouched = {d.pk: _state(d) for d in (delivered, pending)}
    sent = len(receiver.ids)

    response = _send_again(_staff(["view_webhookdelivery", "change_webhookdelivery"]),
                           [failed, delivered, pending])

    assert _said(response) == ["1 failed delivery(ies) taken back to pending, due now; "
                               "2 skipped (not failed)."]
    assert {d.pk: _state(d) for d in (delivered, pending)} == untouched
    assert _state(failed)[:2] == ("pending", 0)
    assert AccessRecord.objects.get(action=SENT_AGAIN).after["deliveries"] == 1
    assert len(receiver.ids) == sent


def test_staff_who_may_only_view_deliveries_send_nothing_again(receiver):
    _subscriber(receiver, "crm")
    receiver.answer("POST", "/crm", 500)
    _fail_for_good()
    delivery = WebhookDelivery.objects.get()
    before = _state(delivery)
    viewer = _staff(["view_webhookdelivery"], username="viewer")
    offered = viewer.get(LIST).context["action_form"]
    assert offered is None or "send_again" not in dict(offered.fields["action"].choices)

    response = _send_again(viewer, [delivery])

    assert response.status_code in (200, 302)
    assert _state(delivery) == before
    assert not AccessRecord.objects.filter(action=SENT_AGAIN).exists()
    assert webhooks.send_due().delivered == 0
    assert len(receiver.ids) == 10


def test_a_send_again_posted_without_its_csrf_token_is_refused(receiver):
    _subscriber(receiver, "crm")
    receiver.answer("POST", "/crm", 500)
    _fail_for_good()
    delivery = WebhookDelivery.objects.get()
    before = _state(delivery)
    user = User.objects.create_superuser("root", password="pw")
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(user)

    assert _send_again(forged, [delivery]).status_code == 403
    assert _state(delivery) == before
    assert not AccessRecord.objects.filter(action=SENT_AGAIN).exists()


def test_a_subscribers_whole_failed_backlog_is_sent_again_from_its_filtered_list(receiver):
    crm, erp = _subscriber(receiver, "crm"), _subscriber(receiver, "erp")
    receiver.answer("POST", "/crm", 500)
    receiver.answer("POST", "/erp", 500)
    _fail_for_good(runs=3)
    assert WebhookDelivery.objects.filter(status="failed").count() == 6
    staff = _staff(["view_webhookdelivery", "change_webhookdelivery"])
    filtered = f"{LIST}?status__exact=failed&subscriber__id__exact={crm.pk}"
    listed = staff.get(filtered).context["cl"].result_list
    backlog = list(WebhookDelivery.objects.filter(subscriber=crm))
    assert {d.pk for d in listed} == {d.pk for d in backlog}

    # "Select all": one row ticked, the whole filtered list acted on.
    response = _send_again(staff, backlog[:1], url=filtered, select_across=1)

    assert _said(response) == ["3 failed delivery(ies) taken back to pending, due now; "
                               "0 skipped (not failed)."]
    assert set(WebhookDelivery.objects.filter(subscriber=crm)
               .values_list("status", "attempts")) == {("pending", 0)}
    assert set(WebhookDelivery.objects.filter(subscriber=erp)
               .values_list("status", "attempts")) == {("failed", 10)}
    receiver.answer("POST", "/crm", 204)
    assert webhooks.send_due().delivered == 3
    sent_crm = [i for path, i in receiver.ids if path == "/crm"]
    assert sorted(sent_crm[-3:]) == sorted(str(d.delivery_id) for d in backlog)
    assert len([p for p, _ in receiver.ids if p == "/erp"]) == 30  # erp: none again
    record = AccessRecord.objects.get(action=SENT_AGAIN)
    assert (record.subject, record.after["deliveries"]) == ("webhook subscriber crm", 3)


def test_a_failed_delivery_of_a_workflow_its_subscriber_no_longer_takes_is_left_failed(
        receiver):
    crm = WebhookSubscriber.objects.create(
        name="crm", url=f"{receiver.url}/crm", secret=SECRET,
        workflows=["test-orders", "test-saga"], **webhook_cursors.cursors_at_head())
    receiver.answer("POST", "/crm", 500)
    new_run("test-orders")
    new_run("test-saga")
    start = timezone.now() - timedelta(days=1)
    webhook_cursors.queue_deliveries(now=start)
    for hour in range(webhooks.RETRY.maximum_attempts):
        webhooks.send_due(now=start + timedelta(hours=hour))
    # Queued while the subscriber took the workflow, withdrawn unsent once it did not.
    new_run("test-saga")
    webhook_cursors.queue_deliveries()
    WebhookSubscriber.objects.filter(pk=crm.pk).update(workflows=["test-orders"])
    assert webhooks.send_due().withdrawn == 1
    orders = WebhookDelivery.objects.get(event__run__workflow_name="test-orders")
    saga = list(WebhookDelivery.objects.filter(event__run__workflow_name="test-saga"))
    assert {d.status for d in [orders, *saga]} == {"failed"}
    left = {d.pk: _state(d) for d in saga}
    sent = len(receiver.ids)

    response = _send_again(_staff(["view_webhookdelivery", "change_webhookdelivery"]),
                           [orders, *saga])

    assert _said(response) == ["1 failed delivery(ies) taken back to pending, due now; "
                               "2 left failed: their subscriber no longer takes their "
                               "workflow; 0 skipped (not failed)."]
    assert {d.pk: _state(d) for d in saga} == left
    assert _state(orders)[:2] == ("pending", 0)
    record = AccessRecord.objects.get(action=SENT_AGAIN)
    assert (record.before, record.after) == ({"status": "failed", "deliveries": 1},
                                             {"status": "pending", "deliveries": 1})
    receiver.answer("POST", "/crm", 204)
    report = webhooks.send_due()
    assert (report.delivered, report.withdrawn) == (1, 0)
    assert receiver.ids[sent:] == [("/crm", str(orders.delivery_id))]
