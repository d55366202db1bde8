"""A body naming one key twice in an object, at any depth, is refused 400 `bad_request`
naming the key, by the one rule of the API's body parser (api.parser), and nothing is done.
Read as json.loads reads it, the last would count silently, where another reader of the same
body (a proxy, a log, a signature check) may take the first: a start of "k10" that started
"k11"."""

import json

import pytest
from django.contrib.auth.models import Group, Permission, User

from api.tokens import token_create
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus, Step, StepStatus
from tests.api.conftest import post_run
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _rows():
    return (Run.objects.count(), Step.objects.count(), ExternalEvent.objects.count(),
            AuditRecord.objects.count())


def _refused_naming(response, key: str):
    assert response.status_code == 400, response.content
    answer = response.json()
    assert answer["error"] == "bad_request"
    assert f"the key '{key}' more than once" in answer["detail"], answer["detail"]


@pytest.mark.parametrize(("body", "key"), [
    ('{"workflow": "test-orders", "business_key": "k10", "business_key": "k11", '
     '"input": {"order": "o-1", "amount": 5}}', "business_key"),
    ('{"workflow": "test-orders", "business_key": "k10", '
     '"input": {"order": "o-1", "amount": 5, "amount": 500}}', "amount"),
    ('{"workflow": "test-orders", "business_key": "k10", '
     '"input": {"order": "o-1", "extras": [{"x": 1, "x": 2}]}}', "x"),
])
def test_a_start_with_a_key_twice_is_400_naming_it_and_starts_nothing(api_client, body, key):
    before = _rows()
    _refused_naming(post_run(api_client, body), key)
    assert _rows() == before


def test_a_key_sent_twice_is_named_cut_short(api_client):
    key = "k" * 5000
    body = '{"workflow": "test-orders", "input": {"' + key + '": 1, "' + key + '": 2}}'
    response = post_run(api_client, body)
    assert response.status_code == 400, response.content
    assert "(5000 characters)" in response.json()["detail"]
    assert len(response.json()["detail"]) < 300
    assert Run.objects.count() == 0


def test_an_event_with_a_key_twice_is_400_naming_it_and_keeps_nothing(client):
    _, plaintext = token_create(name="psp", workflows=["test-payment-wait"])
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    before = _rows(), Run.objects.values_list("status", "audit_seq").get(pk=run.pk)
    body = json.dumps({"workflow": "test-payment-wait", "event": "payment.settled",
                       "event_id": "e-1", "correlation_key": run.business_key,
                       "payload": {"amount": 120, "reference": "PSP-77"}})
    body = body.replace('"amount": 120', '"amount": 120, "amount": 1')
    response = client.post("/api/events", body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    _refused_naming(response, "amount")
    assert (_rows(), Run.objects.values_list("status", "audit_seq").get(pk=run.pk)) == before


def test_an_action_with_a_key_twice_is_400_naming_it_and_does_nothing(client):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    _, plaintext = token_create(name="t-olga", workflows=["test-orders"], acting_user=olga)
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED})
    before = _rows(), list(Step.objects.filter(run=run).values_list("status", "attempt"))
    response = client.post(f"/api/runs/{run.pk}/actions/retry_step",
                           '{"reason": "INC-7", "reason": "INC-8", "step": "create-task"}',
                           content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    _refused_naming(response, "reason")
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    assert (_rows(), list(Step.objects.filter(run=run).values_list("status", "attempt"))) \
        == before


def test_the_same_key_in_different_objects_is_no_duplicate(api_client):
    body = ('{"workflow": "test-orders", "business_key": "k10", '
            '"input": {"order": "o-1", "amount": 5, "extras": [{"order": 1}, {"order": 2}]}}')
    response = post_run(api_client, body)
    assert response.status_code == 201, response.content
    assert Run.objects.get().business_key == "k10"
