"""The run page's timeline reads the webhook deliveries of its run only, along indexes:
those of its status changes (events) and those of its steps' outcomes (audit records).
Asked as one query (a delivery whose event is the run's OR whose record is), PostgreSQL
joined every delivery to every event and every audit record and kept the run's: 3 to 6 s
for each run page at a million runs. Here other runs have 2 * OTHERS deliveries, the run
two, and the page's queries of the deliveries read a few rows, not the table."""

import uuid

import pytest
from django.urls import reverse
from django.utils import timezone

from api.models import WebhookDelivery, WebhookSubscriber
from audit.models import AuditRecord
from runs.models import RunEvent
from tests.admin.scale import analyzed, bulk_runs, page_reads
from tests.factories import new_run

pytestmark = pytest.mark.django_db

OTHERS = 1500


def delivered(subscriber, *, event=None, record=None) -> WebhookDelivery:
    now = timezone.now()
    return WebhookDelivery(subscriber=subscriber, event=event, record=record,
                           delivery_id=uuid.uuid4(), status="delivered", attempts=1,
                           next_attempt_at=now, delivered_at=now)


def test_the_run_page_shows_its_runs_deliveries_reading_only_theirs(client_for, operator):
    crm = WebhookSubscriber.objects.create(name="crm", url="https://crm.example/", secret="s")
    WebhookSubscriber.objects.create(name="idle", url="https://idle.example/", secret="s")
    now = timezone.now()
    others = bulk_runs(f"other-{n}" for n in range(OTHERS))
    events = RunEvent.objects.bulk_create(
        RunEvent(run=other, status_from="queued", status_to="running", created_at=now)
        for other in others)
    records = AuditRecord.objects.bulk_create(
        AuditRecord(run=other, seq=1, action="succeeded", step_name="create-task",
                    actor_kind="system", actor_label="worker", created_at=now,
                    prev_hash="p", hash="h") for other in others)
    WebhookDelivery.objects.bulk_create(
        [delivered(crm, event=event) for event in events]
        + [delivered(crm, record=record) for record in records])

    run = new_run()
    event = RunEvent.objects.create(run=run, status_from="queued", status_to="running",
                                    created_at=now)
    record = run.audit_records.get(seq=1)
    WebhookDelivery.objects.bulk_create([delivered(crm, event=event),
                                         delivered(crm, record=record)])
    analyzed("api_webhookdelivery", "runs_runevent", "audit_auditrecord")

    page, reads = page_reads(client_for(operator), reverse("console:run", args=[run.pk]),
                             "api_webhookdelivery")
    body = page.content.decode()
    assert "progress event (queued → running) delivered to crm" in body
    assert f"progress event ( {record.action}) delivered to crm" in body
    assert reads
    # Its two deliveries, its event and record, and the two subscribers probed: not the
    # 3,000 deliveries, events and records of the other runs.
    assert max(reads.values()) <= 20, reads
