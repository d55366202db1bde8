"""The admin's revoke action says how many tokens it revoked and how many already were, as a
warning when it revoked none (never "0 token(s) revoked." as a success)."""

from datetime import timedelta

import pytest
from django.contrib import messages
from django.contrib.auth.models import User
from django.utils import timezone

from api.models import ApiToken
from api.tokens import token_create, token_revoke
from audit.access import AccessAction
from audit.models import AccessRecord

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(client):
    user = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(user)
    return user


def revoke(client, *tokens):
    response = client.post("/admin/api/apitoken/", {
        "action": "revoke", "_selected_action": [t.pk for t in tokens]}, follow=True)
    assert response.status_code == 200
    return [(m.level, str(m)) for m in response.context["messages"]]


def test_revoking_only_revoked_tokens_warns_that_none_was_revoked(client, root):
    old, _ = token_create(name="old", workflows=["test-orders"], created_by=root)
    older, _ = token_create(name="older", workflows=["test-orders"], created_by=root)
    assert token_revoke(old, by=root) and token_revoke(older, by=root)
    revoked_at = set(ApiToken.objects.values_list("revoked_at", flat=True))
    recorded = AccessRecord.objects.count()
    assert revoke(client, old, older) == [
        (messages.WARNING, "0 token(s) revoked, 2 already revoked.")]
    assert set(ApiToken.objects.values_list("revoked_at", flat=True)) == revoked_at
    assert AccessRecord.objects.count() == recorded


def test_revoking_a_mix_says_how_many_of_each_as_a_success(client, root):
    live, _ = token_create(name="live", workflows=["test-orders"], created_by=root)
    lapsed, _ = token_create(name="lapsed", workflows=["test-orders"], created_by=root)
    ApiToken.objects.filter(pk=lapsed.pk).update(expires_at=timezone.now() - timedelta(days=1))
    gone, _ = token_create(name="gone", workflows=["test-orders"], created_by=root)
    assert token_revoke(gone, by=root)
    assert revoke(client, live, lapsed, gone) == [
        (messages.SUCCESS, "2 token(s) revoked, 1 already revoked.")]
    assert not ApiToken.objects.filter(revoked_at__isnull=True).exists()
    revoked = AccessRecord.objects.filter(action=AccessAction.API_TOKEN_REVOKED)
    assert sorted(revoked.values_list("subject", flat=True)) == [
        "token gone", "token lapsed", "token live"]
