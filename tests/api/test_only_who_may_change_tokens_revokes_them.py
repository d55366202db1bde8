"""Revoking a token stops a calling system at once: it is a change of the token, offered
and done only for staff who may change tokens. Staff who may only view them see the list
without the action, and a revoke posted anyway revokes nothing and records nothing."""

import pytest
from django.contrib.auth.models import Permission, User

from api.models import ApiToken
from api.tokens import token_create
from audit.access import AccessAction
from audit.models import AccessRecord

pytestmark = pytest.mark.django_db
LIST = "/admin/api/apitoken/"


def _staff(client, *codenames):
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="api",
                                                        codename__in=codenames))
    client.force_login(user)
    return user


def _revoke(client, token):
    return client.post(LIST, {"action": "revoke", "_selected_action": [token.pk]})


def test_staff_who_may_only_view_tokens_cannot_revoke_them(client):
    token, _ = token_create(name="erp", workflows=["test-orders"])
    _staff(client, "view_apitoken")
    page = client.get(LIST)
    assert page.status_code == 200
    offered = page.context["action_form"]  # None: no action is offered at all
    assert offered is None or "revoke" not in dict(offered.fields["action"].choices)
    _revoke(client, token)
    token.refresh_from_db()
    assert token.revoked_at is None
    assert not AccessRecord.objects.filter(action=AccessAction.API_TOKEN_REVOKED).exists()


def test_staff_who_may_change_tokens_revoke_them(client):
    token, _ = token_create(name="erp", workflows=["test-orders"])
    _staff(client, "view_apitoken", "change_apitoken")
    assert _revoke(client, token).status_code == 302
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
