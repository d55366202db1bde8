"""An event source's secret is rotated without refusing its events: with the new `secret`
and the old one as `previous_secret` in RUNS_EVENT_SOURCES, an event signed with either is
taken, so the sender can move to the new secret when it is ready; one signed with any other
secret is still refused 401, and nothing is kept. Once `previous_secret` is removed, the old
secret is refused. A `previous_secret` that is blank, no string or the secret itself stops
the process at start, naming the source (a rotation left half done would look finished)."""

import json
import time

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.settings import event_sources
from runs.execution import executor
from runs.models import RunStatus, StepStatus
from runs.waiting import events
from runs.world_models import ExternalEvent
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db

OLD, NEW = "old-secret-4711", "new-secret-0815"


def _send(client, run, secret: str, event_id: str):
    body = json.dumps({"workflow": "test-payment-wait", "event": "payment.settled",
                       "event_id": event_id, "correlation_key": run.business_key,
                       "payload": {"amount": 5, "reference": "PSP-1"}}).encode()
    now = str(int(time.time()))
    return client.post("/api/events/webhook/psp", body, content_type="application/json",
                       HTTP_X_EVENT_TIMESTAMP=now,
                       HTTP_X_EVENT_SIGNATURE=events.signature(secret, now, body))


def _waiting_run():
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


@pytest.mark.parametrize("secret", [OLD, NEW])
def test_during_a_rotation_an_event_signed_with_either_secret_is_taken(client, settings,
                                                                       script, secret):
    settings.RUNS_EVENT_SOURCES = {"psp": {"secret": NEW, "previous_secret": OLD}}
    run = _waiting_run()
    response = _send(client, run, secret, "evt-1")
    assert response.status_code == 202, response.content
    assert step(run, "payment").status == StepStatus.SUCCEEDED
    assert ExternalEvent.objects.count() == 1


def test_any_other_secret_is_refused_and_nothing_is_kept(client, settings, script):
    settings.RUNS_EVENT_SOURCES = {"psp": {"secret": NEW, "previous_secret": OLD}}
    run = _waiting_run()
    response = _send(client, run, "someone-elses", "evt-1")
    assert response.status_code == 401 and response.json()["error"] == "bad_signature"
    assert not ExternalEvent.objects.exists()
    assert step(run, "payment").status == StepStatus.WAITING


def test_once_the_rotation_is_over_the_old_secret_is_refused(client, settings, script):
    settings.RUNS_EVENT_SOURCES = {"psp": {"secret": NEW}}
    run = _waiting_run()
    assert _send(client, run, OLD, "evt-1").status_code == 401
    assert not ExternalEvent.objects.exists()
    assert _send(client, run, NEW, "evt-2").status_code == 202


@pytest.mark.parametrize("previous", ["", "   ", 7, NEW])
def test_a_previous_secret_that_is_no_other_secret_stops_the_process(previous):
    with pytest.raises(ImproperlyConfigured) as refused:
        event_sources(json.dumps({"psp": {"secret": NEW, "previous_secret": previous}}))
    message = str(refused.value)
    assert "source 'psp' has a \"previous_secret\" that is not" in message
    assert NEW not in message
