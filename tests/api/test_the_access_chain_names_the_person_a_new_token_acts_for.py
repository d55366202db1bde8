"""A token that acts for a person carries that person's permissions, in their name: the
access chain's record of its creation names them (whichever path made it, the admin's form
or token_create), and its revocation's record says whose credential was withdrawn. A token
that acts for nobody is recorded as such."""

import pytest
from django.contrib.auth.models import User

from api.models import ApiToken
from api.tokens import token_create, token_revoke
from audit.access import AccessAction
from audit.models import AccessRecord

pytestmark = pytest.mark.django_db


def _last(action):
    return AccessRecord.objects.filter(action=action).order_by("-seq").first()


def test_token_create_and_revoke_record_the_acting_user():
    root = User.objects.create_superuser("root", password="pw")
    token, _ = token_create(name="ops-bot", workflows=["test-orders"], acting_user=root,
                            created_by=root)
    assert _last(AccessAction.API_TOKEN_CREATED).after["acting_user"] == "root"
    token_revoke(token, by=root)
    assert _last(AccessAction.API_TOKEN_REVOKED).before["acting_user"] == "root"


def test_the_admin_form_records_the_acting_user_of_a_new_token(client):
    root = User.objects.create_superuser("root", password="pw")
    alice = User.objects.create_user("alice", password="pw")
    client.force_login(root)
    response = client.post("/admin/api/apitoken/add/", {
        "name": "alice-cli", "workflows": ["test-orders"], "rate_limit": "",
        "expires_at_0": "", "expires_at_1": "", "acting_user": alice.pk})
    assert response.status_code == 200, response.content
    assert ApiToken.objects.get(name="alice-cli").acting_user == alice
    record = _last(AccessAction.API_TOKEN_CREATED)
    assert record.subject == "token alice-cli" and record.after["acting_user"] == "alice"


def test_a_token_acting_for_nobody_is_recorded_so():
    token_create(name="erp", workflows=["test-orders"])
    assert _last(AccessAction.API_TOKEN_CREATED).after["acting_user"] is None
