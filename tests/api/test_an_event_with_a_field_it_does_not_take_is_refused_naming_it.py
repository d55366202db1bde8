"""POST /api/events takes only its own fields: a misspelt one ("payloads") is refused with
422 naming it, never dropped. Dropped, the event would be delivered with an empty payload
(or its wait's default) and its id spent: the sender's corrected redelivery would then be a
duplicate that changes nothing. Nothing is kept and the waiting run does not move."""

import json

import pytest

from api.routes import api
from api.tokens import token_create
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def test_an_event_with_a_misspelt_field_is_422_naming_it_and_keeps_nothing(client):
    _, plaintext = token_create(name="psp", workflows=["test-payment-wait"])
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    before = (ExternalEvent.objects.count(), AuditRecord.objects.count(),
              Run.objects.values_list("status", "audit_seq").get(pk=run.pk))
    body = {"workflow": "test-payment-wait", "event": "payment.settled", "event_id": "e-1",
            "correlation_key": run.business_key,
            "payloads": {"amount": 120, "reference": "PSP-77"}}
    response = client.post("/api/events", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 422, response.content
    assert [(e["loc"], e["type"]) for e in response.json()["errors"]] == [
        (["payloads"], "extra_forbidden")]
    assert (ExternalEvent.objects.count(), AuditRecord.objects.count(),
            Run.objects.values_list("status", "audit_seq").get(pk=run.pk)) == before


def test_the_document_says_an_event_takes_no_other_field():
    assert api.get_openapi_schema()["components"]["schemas"]["EventIn"][
        "additionalProperties"] is False
