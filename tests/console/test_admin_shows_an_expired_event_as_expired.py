"""Django admin lists external events with what became of each: delivered (to which run),
kept (until when), refused (for which run) or expired (when, and until when it was kept:
never delivered), filtered by that state; read-only, as every record of evidence is."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from runs.models import ExternalEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    return client


def _event(event_id, **fields):
    now = timezone.now()
    fields.setdefault("keep_until", now - timedelta(days=1))
    return ExternalEvent.objects.create(
        workflow_name="test-payment-wait", source="psp", event_id=event_id,
        event_name="payment.settled", correlation_key=f"key-{event_id}", payload={},
        received_at=now - timedelta(days=8), **fields)


def test_the_event_list_says_which_events_expired_and_filters_them(admin_client):
    now = timezone.now()
    _event("gone", expired_at=now - timedelta(hours=2))
    _event("waiting", keep_until=now + timedelta(days=6))
    _event("taken", consumed_at=now, consumed_run_id=41, consumed_step="payment")

    listing = admin_client.get("/admin/runs/externalevent/")
    assert listing.status_code == 200
    assert "expired at" in listing.text and "never delivered" in listing.text
    assert 'href="/runs/41/"' in listing.text  # delivered to run 41

    expired = admin_client.get("/admin/runs/externalevent/?state=expired").text
    assert "key-gone" in expired and "key-waiting" not in expired and "key-taken" not in expired
    kept = admin_client.get("/admin/runs/externalevent/?state=kept").text
    assert "key-waiting" in kept and "key-gone" not in kept


def test_no_one_adds_changes_or_deletes_an_event_in_admin(admin_client):
    event = _event("gone", expired_at=timezone.now())
    before = ExternalEvent.objects.filter(pk=event.pk).values().get()
    base = "/admin/runs/externalevent/"
    assert admin_client.get(f"{base}add/").status_code == 403
    assert admin_client.get(f"{base}{event.pk}/change/").status_code == 200
    assert admin_client.post(f"{base}{event.pk}/change/", {"expired_at": ""}).status_code == 403
    assert admin_client.post(f"{base}{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ExternalEvent.objects.filter(pk=event.pk).values().get() == before
