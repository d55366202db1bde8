"""The reason for a change of who may do what is kept in the access chain for good, and shown
on pages and in CSV exports: a credential pasted into it (a bearer token, an api_key=...) is
masked before the record is written, as a run action's reason is, whichever path wrote it."""

import pytest
from django.contrib.auth.models import User
from guardian.shortcuts import get_perms

from audit.access import AccessAction, record_access_change
from audit.chain import Actor
from audit.models import AccessRecord

from .test_access import root, workflow  # noqa: F401 - the fixtures

pytestmark = pytest.mark.django_db

SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"


def test_a_role_granted_in_admin_keeps_its_reason_with_the_credential_masked(
        client, root, workflow):  # noqa: F811
    bob = User.objects.create_user("bob")
    response = client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
        "user": bob.pk, "role": "operators", "operation": "grant",
        "reason": f"vendor asked, their key is api_key={SECRET} and Bearer {SECRET}"})
    assert response.status_code == 302
    assert get_perms(bob, workflow)  # the grant itself is made
    (record,) = AccessRecord.objects.all()
    assert SECRET not in record.reason
    assert record.reason == "vendor asked, their key is api_key=[redacted] and Bearer [redacted]"


def test_every_caller_of_the_access_chain_has_its_reason_masked():
    record = record_access_change(action=AccessAction.API_TOKEN_CREATED, subject="token ci",
                                  actor=Actor.system("manage.py"), before={}, after={},
                                  reason=f"rotated; old one was {SECRET}")
    assert record.reason == "rotated; old one was [redacted]"
    assert AccessRecord.objects.get().reason == record.reason
