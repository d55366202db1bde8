"""Staff who may only view (every view permission, nothing else) are offered no admin
action on any list, and an action they post anyway changes nothing: Django offers an action
declared without permissions to whoever may view the list, and runs it for them
(django-axes' clean-up of expired sign-in attempts deleted them so)."""

import uuid
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.test import RequestFactory
from django.utils import timezone

from api.models import ApiToken, WebhookDelivery, WebhookSubscriber
from api.tokens import token_create
from audit.models import AccessRecord
from runs.models import RunEvent

from .test_admin_lists import grow

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer():
    viewer = User.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    return viewer


def test_no_list_offers_an_action_to_staff_who_may_only_view(viewer):
    request = RequestFactory().get("/admin/")
    request.user = viewer
    offered = {model._meta.label: sorted(model_admin.get_actions(request))
               for model, model_admin in admin.site._registry.items()}
    assert {label: names for label, names in offered.items() if names} == {}


def test_an_action_posted_by_staff_who_may_only_view_changes_nothing(client, viewer):
    # Signed in first: axes clears expired attempts when someone signs in.
    client.force_login(viewer)
    old = timezone.now() - timedelta(days=30)
    attempt = AccessAttempt.objects.create(
        username="ann", ip_address="10.0.0.1", user_agent="ua", path_info="/login/",
        get_data="", post_data="", http_accept="*/*", failures_since_start=1,
        attempt_time=old)
    AccessAttempt.objects.filter(pk=attempt.pk).update(attempt_time=old)
    token, _ = token_create(name="erp", workflows=["test-orders"], created_by=None)
    run = grow(1)[0]
    subscriber = WebhookSubscriber.objects.create(name="crm", url="https://crm.example/",
                                                  secret="s")
    failed = WebhookDelivery.objects.create(
        subscriber=subscriber, delivery_id=uuid.uuid4(), status="failed",
        next_attempt_at=timezone.now(),
        event=RunEvent.objects.create(run=run, status_from="running", status_to="attention",
                                      created_at=timezone.now()))
    idle = WebhookSubscriber.objects.create(name="idle", url="https://idle.example/",
                                            secret="s")
    records = AccessRecord.objects.count()

    for url, action, pk in [("/admin/axes/accessattempt/", "cleanup_expired_attempts",
                             attempt.pk),
                            ("/admin/api/apitoken/", "revoke", token.pk),
                            ("/admin/api/webhookdelivery/", "send_again", failed.pk),
                            ("/admin/api/webhooksubscriber/", "delete_selected", idle.pk)]:
        response = client.post(url, {"action": action, "_selected_action": [pk],
                                     "post": "yes"})
        assert response.status_code in (200, 302, 403), (url, response.status_code)

    assert AccessAttempt.objects.filter(pk=attempt.pk).exists()
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    assert WebhookDelivery.objects.get(pk=failed.pk).status == "failed"
    assert WebhookSubscriber.objects.filter(pk=idle.pk).exists()
    assert AccessRecord.objects.count() == records
