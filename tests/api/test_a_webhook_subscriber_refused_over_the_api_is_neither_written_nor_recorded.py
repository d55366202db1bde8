"""What admin refuses of a webhook subscriber, the API refuses, with nothing written or
recorded: a person without the model permission admin asks (403, before their body is
read), a token that acts for nobody (403 no_acting_user), a workflow the person may not
view the runs of (403, admin's refusal), one that is not the token's (403), a field the
model refuses, named (422), another name (422: its records name it), one with deliveries
deleted (409), a subscriber that is not there or not the token's (404). A URL on a private
address is taken as admin takes it, and in a deployment sent nothing, as admin's is."""


import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied

from api import webhook_cursors, webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from api.subscribers import subscriber_create, subscriber_delete, subscriber_save
from api.tokens import token_create
from audit.models import AccessRecord
from runs.models import Workflow
from tests.factories import new_run

from .test_a_webhook_subscriber_is_made_changed_and_deleted_over_the_api_as_in_admin import (
    keeper_with,
    send,
)

pytestmark = pytest.mark.django_db

SECRET = "whsec-refused-4711"
GOOD = {"name": "erp", "url": "https://hooks.example.com/in", "secret": SECRET,
        "workflows": ["test-orders"]}


def bearer(person, workflows=("test-orders", "test-saga")) -> str:
    _, plaintext = token_create(name=f"token-of-{person}", workflows=list(workflows),
                                acting_user=person)
    return f"Bearer {plaintext}"


def as_person(client, person, workflows=("test-orders", "test-saga")):
    client.defaults["HTTP_AUTHORIZATION"] = bearer(person, workflows)
    return client


def written():
    return (sorted(WebhookSubscriber.objects.values_list("name", "url", "workflows", "active",
                                                         "secret")),
            AccessRecord.objects.count())


@pytest.fixture
def root():
    return User.objects.create_superuser("root")


@pytest.fixture
def existing(root):
    made = WebhookSubscriber(name="kept", url="https://kept.example.com/in", secret=SECRET,
                             workflows=["test-orders"])
    subscriber_create(made, by=root)
    return made


@pytest.fixture
def keeper():
    return keeper_with("view", "add", "change", "delete")


def test_a_person_without_the_permission_admin_asks_is_refused_each_operation(client,
                                                                             existing):
    viewer = bearer(keeper_with("view"))
    nobody = bearer(User.objects.create_user("nobody"))
    client.defaults["HTTP_AUTHORIZATION"] = viewer
    before = written()
    path = f"/api/subscribers/{existing.pk}"
    for method, where, body, needed in [
            ("POST", "/api/subscribers", GOOD, "add"),
            ("PATCH", path, {"active": False}, "change"),
            ("DELETE", path, None, "delete")]:
        refused = send(client, method, where, body)
        assert refused.status_code == 403, (method, refused.content)
        assert refused.json()["error"] == "forbidden"
        assert f"api.{needed}_webhooksubscriber" in refused.json()["detail"]
    # Admin shows the list to who may view or change; without either, nothing.
    client.defaults["HTTP_AUTHORIZATION"] = nobody
    for where in ("/api/subscribers", path):
        refused = send(client, "GET", where)
        assert refused.status_code == 403 and "api.view_webhooksubscriber" in \
            refused.json()["detail"]
    assert written() == before


def test_who_may_not_change_hears_nothing_of_the_body_they_sent(client, existing):
    as_person(client, keeper_with("view"))
    for body in ({"name": 7}, {"url": "x\u0000"}, {"secrt": "s"}):
        assert send(client, "POST", "/api/subscribers", body).status_code == 403
        assert send(client, "PATCH", f"/api/subscribers/{existing.pk}", body).status_code == 403


def test_a_token_acting_for_nobody_is_refused_each_operation(client, existing):
    _, plaintext = token_create(name="nobody", workflows=["test-orders"])
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    before = written()
    path = f"/api/subscribers/{existing.pk}"
    for method, where, body in [("GET", "/api/subscribers", None),
                                ("POST", "/api/subscribers", GOOD), ("GET", path, None),
                                ("PATCH", path, {"active": False}), ("DELETE", path, None)]:
        refused = send(client, method, where, body)
        assert refused.status_code == 403, (method, where)
        assert refused.json()["error"] == "no_acting_user"
    assert written() == before


def test_a_workflow_whose_runs_the_person_may_not_view_is_refused_as_admin_refuses_it(client):
    person = keeper_with("view", "add", "change")
    Workflow.objects.get_or_create(name="test-approval")
    # The token has test-approval; its person may view only test-orders and test-saga.
    as_person(client, person, workflows=("test-orders", "test-approval"))
    before = written()

    refused = send(client, "POST", "/api/subscribers", {**GOOD, "workflows": ["test-approval"]})

    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    assert "may not have a subscriber take test-approval" in refused.json()["detail"]
    mine = send(client, "POST", "/api/subscribers", GOOD)
    assert mine.status_code == 201
    widened = send(client, "PATCH", f"/api/subscribers/{mine.json()['id']}",
                   {"workflows": ["test-orders", "test-approval"]})
    assert widened.status_code == 403 and "test-approval" in widened.json()["detail"]
    assert WebhookSubscriber.objects.get().workflows == ["test-orders"]
    assert AccessRecord.objects.count() == before[1] + 1  # its creation only


@pytest.mark.parametrize("workflows", [[], ["test-approval"], ["test-orders", "test-saga"]])
def test_a_workflow_that_is_not_the_tokens_is_refused(client, keeper, workflows):
    as_person(client, keeper, workflows=("test-orders",))
    before = written()

    refused = send(client, "POST", "/api/subscribers", {**GOOD, "workflows": workflows})

    assert refused.status_code == 403 and refused.json()["error"] == "workflow_not_allowed"
    assert written() == before


@pytest.mark.parametrize(("body", "field"), [
    ({**GOOD, "url": "not a url"}, "url"),
    ({**GOOD, "url": "https://"}, "url"),
    ({**GOOD, "name": "kept"}, "name"),
    ({**GOOD, "workflows": ["  "]}, "workflows"),
    ({**GOOD, "workflows": "test-orders"}, "workflows"),
    ({**GOOD, "secret": ""}, "secret"),
    ({**GOOD, "secret": "s" * 129}, "secret"),
    ({**GOOD, "active": "yes"}, "active"),
    ({**GOOD, "name": "erp\ud800"}, "name"),
    ({**GOOD, "workflow": ["test-orders"]}, "workflow"),
    ({key: value for key, value in GOOD.items() if key != "url"}, "url"),
])
def test_a_bad_field_is_named_and_nothing_is_made(client, keeper, existing, body, field):
    as_person(client, keeper)
    before = written()

    refused = send(client, "POST", "/api/subscribers", body)

    assert refused.status_code == 422, refused.content
    assert refused.json()["error"] == "invalid_request"
    assert [e["loc"][0] for e in refused.json()["errors"]] == [field]
    assert SECRET not in refused.content.decode()
    assert written() == before


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "renamed"}, "name"),
    ({"url": "ftp:/nowhere"}, "url"),
    ({"workflows": [""]}, "workflows"),
    ({"secret": "s" * 129, "active": False}, "secret"),
])
def test_a_bad_change_is_named_and_nothing_is_changed(client, keeper, existing, body, field):
    as_person(client, keeper)
    before = written()

    refused = send(client, "PATCH", f"/api/subscribers/{existing.pk}", body)

    assert refused.status_code == 422, refused.content
    assert [e["loc"][0] for e in refused.json()["errors"]] == [field]
    assert written() == before


def test_a_subscriber_not_there_or_not_the_tokens_is_not_found(client, keeper, existing,
                                                                root):
    other = WebhookSubscriber(name="every", url="https://every.example.com/in", secret="s",
                              workflows=[])
    subscriber_create(other, by=root)
    as_person(client, keeper)
    before = written()
    for subscriber_id in (existing.pk + other.pk + 1, other.pk):
        path = f"/api/subscribers/{subscriber_id}"
        for method, body in [("GET", None), ("PATCH", {"active": False}), ("DELETE", None)]:
            refused = send(client, method, path, body)
            assert refused.status_code == 404, (method, subscriber_id)
            assert refused.json()["error"] == "subscriber_not_found"
        # Not even a body the schema refuses tells it is there.
        assert send(client, "PATCH", path, {"active": "no"}).status_code == 404
    assert [s["name"] for s in send(client, "GET", "/api/subscribers").json()[
        "subscribers"]] == ["kept"]
    assert written() == before


def test_a_subscriber_with_deliveries_is_not_deleted_but_may_be_deactivated(client, keeper,
                                                                           existing):
    as_person(client, keeper)
    new_run()
    webhook_cursors.queue_deliveries()
    assert WebhookDelivery.objects.filter(subscriber=existing).exists()
    before = written()

    refused = send(client, "DELETE", f"/api/subscribers/{existing.pk}")

    assert refused.status_code == 409 and refused.json()["error"] == "subscriber_in_use"
    assert "deactivate it instead" in refused.json()["detail"]
    assert written() == before
    assert send(client, "PATCH", f"/api/subscribers/{existing.pk}",
                {"active": False}).json()["active"] is False


def test_a_subscriber_on_a_loopback_address_is_taken_as_admin_takes_it_and_sent_nothing(
        client, keeper, settings):
    settings.WEBHOOK_PRIVATE_ADDRESSES = False
    as_person(client, keeper)

    made = send(client, "POST", "/api/subscribers",
                {**GOOD, "url": "http://127.0.0.1:9/hook"})
    assert made.status_code == 201
    new_run()
    report = webhooks.publish()

    assert report.delivered == 0
    [delivery] = WebhookDelivery.objects.filter(subscriber_id=made.json()["id"])
    assert delivery.last_status_code is None
    assert "is a loopback address" in delivery.last_error


def test_the_functions_refuse_a_person_without_the_permission_whoever_calls_them(existing):
    viewer = keeper_with("view")
    before = written()
    with pytest.raises(PermissionDenied, match="api.add_webhooksubscriber"):
        subscriber_create(WebhookSubscriber(name="x", url="https://a.example.com/",
                                            secret="s", workflows=["test-orders"]), by=viewer)
    existing.active = False
    with pytest.raises(PermissionDenied, match="api.change_webhooksubscriber"):
        subscriber_save(existing, by=viewer)
    with pytest.raises(PermissionDenied, match="api.delete_webhooksubscriber"):
        subscriber_delete(existing, by=viewer)
    assert written() == before
