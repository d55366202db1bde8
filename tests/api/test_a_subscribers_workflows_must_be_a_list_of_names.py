"""A subscriber's workflows are a list of workflow names ([] for every workflow). The admin
refuses anything else, naming the shape it takes: a bare name would be read as its letters
and the subscriber told nothing, and a number was a server error."""

import pytest

from api import webhooks
from api.models import WebhookSubscriber
from tests.factories import new_run
from tests.receiver import ScriptedReceiver

pytestmark = pytest.mark.django_db
ADD = "/admin/api/webhooksubscriber/add/"


@pytest.fixture
def receiver():
    with ScriptedReceiver() as r:
        yield r


def _add(admin_client, receiver, workflows):
    return admin_client.post(ADD, {"name": "crm", "url": f"{receiver.url}/hooks",
                                   "secret": "whsec-crm-4711-0815", "workflows": workflows,
                                   "active": "on"})


@pytest.mark.parametrize("workflows", ['"test-orders"', "5", '{"test-orders": true}',
                                       '[5]', '[["test-orders"]]', '[""]'])
def test_workflows_that_are_not_a_list_of_names_are_refused_naming_the_shape(
        admin_client, receiver, workflows):
    response = _add(admin_client, receiver, workflows)

    assert response.status_code == 200
    assert "a list of workflow names" in response.content.decode()
    assert not WebhookSubscriber.objects.exists()


def test_a_list_of_names_is_kept_once_each_and_the_subscriber_told_of_them(
        admin_client, receiver):
    response = _add(admin_client, receiver, '["test-orders", "test-orders"]')

    assert response.status_code == 302, response.content[:500]
    assert WebhookSubscriber.objects.get().workflows == ["test-orders"]
    new_run("test-orders")
    webhooks.publish()
    assert len(receiver.sent("POST", "/hooks")) == 1


def test_an_empty_list_is_every_workflow(admin_client, receiver):
    assert _add(admin_client, receiver, "[]").status_code == 302
    assert WebhookSubscriber.objects.get().workflows == []
