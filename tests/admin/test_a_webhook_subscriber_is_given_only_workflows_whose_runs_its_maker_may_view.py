"""Each webhook delivery carries a run's workflow, business key and status to the URL its
subscriber names. Staff who may make or change subscribers, but are no superuser, give one
only workflows whose runs they may view, and every workflow (an empty list) only if they may
view every workflow's runs: with the subscriber permissions and a grant on test-orders
alone, one subscribed a URL of their own to every workflow's runs. Refused on the form,
naming what, and by the service whoever calls it, with nothing written or recorded. What
a subscriber took already stays whoever edits it; a superuser gives anything."""

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import PermissionDenied
from guardian.shortcuts import assign_perm

from api.models import WebhookSubscriber
from api.subscribers import subscriber_create
from audit.models import AccessRecord
from runs.models import Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def keeper(client):
    """Staff who may view, add and change webhook subscribers, and view test-orders runs."""
    user = User.objects.create_user("keeper", password="x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="api", codename__in=[
            "view_webhooksubscriber", "add_webhooksubscriber", "change_webhooksubscriber"]))
    for name in ("test-orders", "test-saga"):
        Workflow.objects.get_or_create(name=name)
    assign_perm("runs.view_runs", user, Workflow.objects.get(name="test-orders"))
    client.force_login(user)
    return user


def add(client, workflows: list[str]):
    return client.post("/admin/api/webhooksubscriber/add/", {
        "name": "mine", "url": "https://hooks.example.com/in", "secret": "s3cret-value-4711-x",
        "workflows": json.dumps(workflows), "active": "on"})


def change(client, subscriber, workflows: list[str]):
    return client.post(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/", {
        "url": subscriber.url, "workflows": json.dumps(workflows), "active": "on"})


@pytest.mark.parametrize("workflows, named", [
    ([], "every workflow"), (["test-saga"], "test-saga"),
    (["test-orders", "test-saga"], "test-saga")])
def test_a_subscriber_is_not_made_for_workflows_its_maker_may_not_view(client, keeper,
                                                                        workflows, named):
    response = add(client, workflows)
    assert response.status_code == 200
    assert named in response.text and "may not have a subscriber take" in response.text
    assert not WebhookSubscriber.objects.exists()
    assert AccessRecord.objects.count() == 0


def test_a_subscriber_of_workflows_its_maker_may_view_is_made_and_not_widened(client,
                                                                               keeper):
    assert add(client, ["test-orders"]).status_code == 302
    mine = WebhookSubscriber.objects.get(name="mine")
    for wider in (["test-orders", "test-saga"], []):
        response = change(client, mine, wider)
        assert response.status_code == 200 and "may not have a subscriber take" in response.text
        mine.refresh_from_db()
        assert mine.workflows == ["test-orders"]
    assert AccessRecord.objects.count() == 1  # its creation only


def test_what_a_subscriber_took_stays_whoever_edits_it_where_it_is_sent(client, keeper):
    everything = WebhookSubscriber.objects.create(name="erp", url="https://erp.example.com/h",
                                                  secret="s", workflows=[])
    saga = WebhookSubscriber.objects.create(name="saga", url="https://erp.example.com/s",
                                            secret="s", workflows=["test-saga"])
    assert change(client, everything, []).status_code == 302
    assert change(client, saga, ["test-orders", "test-saga"]).status_code == 302
    saga.refresh_from_db()
    assert saga.workflows == ["test-orders", "test-saga"]
    # Sent elsewhere, it is a new receiver of all it takes: the editor's own URL is refused.
    everything.refresh_from_db()
    moved = client.post(f"/admin/api/webhooksubscriber/{everything.pk}/change/", {
        "url": "https://mine.example.org/in", "workflows": "[]", "active": "on"})
    assert moved.status_code == 200 and "every workflow" in moved.text
    everything.refresh_from_db()
    assert everything.url == "https://erp.example.com/h"
    narrowed = client.post(f"/admin/api/webhooksubscriber/{everything.pk}/change/", {
        "url": "https://mine.example.org/in", "workflows": '["test-orders"]', "active": "on"})
    assert narrowed.status_code == 302


def test_the_service_refuses_whoever_calls_it(keeper):
    with pytest.raises(PermissionDenied, match="every workflow"):
        subscriber_create(WebhookSubscriber(name="x", url="https://a.example.com/",
                                            secret="s", workflows=[]), by=keeper)
    assert not WebhookSubscriber.objects.exists() and AccessRecord.objects.count() == 0
    root = User.objects.create_superuser("root", "root@example.com", "x")
    subscriber_create(WebhookSubscriber(name="x", url="https://a.example.com/", secret="s",
                                        workflows=[]), by=root)
    assert WebhookSubscriber.objects.get(name="x").workflows == []
