"""From the console: delivering the event of a wait whose step a release renamed is
refused with a message that names the step, never a server error; nothing is delivered."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db


def _messages(response, level: str) -> list[str]:
    return [m.message for m in get_messages(response.wsgi_request) if m.level_tag == level]


def test_the_console_refuses_delivery_to_a_renamed_step_naming_it(
        script, monkeypatch, client_for, operator):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    monkeypatch.setattr(registry.get("test-payment-wait", 1).step("payment"), "name",
                        "payment-v2")
    records = AuditRecord.objects.filter(run=run).count()
    client = client_for(operator)
    assert client.get(reverse("console:run", args=[run.pk])).status_code == 200

    response = client.post(
        reverse("console:action", args=[run.pk, "event_received"]),
        {"seen": str(Run.objects.get(pk=run.pk).audit_seq), "reason": "confirmed by phone",
         "evidence": '{"amount": 5, "reference": "PSP-9"}'})

    assert response.status_code == 302
    [error] = _messages(response, "error")
    assert error.startswith("Deliver event was not done: test-payment-wait v1 here has no "
                            "step 'payment', which the run waits on")
    assert _messages(response, "success") == []
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert step(run, "payment").status == StepStatus.WAITING
    assert AuditRecord.objects.filter(run=run).count() == records
    assert ExternalEvent.objects.count() == 0
