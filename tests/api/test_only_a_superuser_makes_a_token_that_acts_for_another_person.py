"""A token that acts for a person holds that person's permissions, in their name. Staff who
may add API tokens but are not superusers make tokens that act for themselves or for nobody:
one that would act for anyone else (a superuser, the second person of a four-eyes request)
is refused on its field, and nothing is written. A superuser makes one for any person (a
person who signs in only through single sign-on has no other way to the API)."""

import pytest
from django.contrib.auth.models import Permission, User
from guardian.shortcuts import assign_perm

from api.models import ApiToken
from audit.models import AccessRecord
from runs.models import Workflow
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def token_clerk(client):
    clerk = User.objects.create_user("clerk", password="pw", is_staff=True)
    clerk.user_permissions.set(Permission.objects.filter(
        content_type__app_label="api", codename__in=["add_apitoken", "view_apitoken",
                                                     "change_apitoken"]))
    # A token reaches only workflows whose runs its maker may view.
    new_run("test-orders")
    assign_perm("runs.view_runs", clerk, Workflow.objects.get(name="test-orders"))
    client.force_login(clerk)
    return clerk


def _add(client, acting_user):
    return client.post("/admin/api/apitoken/add/", {
        "name": "side-door", "workflows": ["test-orders"], "rate_limit": "",
        "expires_at_0": "", "expires_at_1": "", "acting_user": acting_user.pk})


def test_staff_cannot_make_a_token_that_acts_for_a_superuser(client, token_clerk):
    root = User.objects.create_superuser("root", password="pw")
    records = AccessRecord.objects.count()
    response = _add(client, root)
    assert response.status_code == 200
    assert "acting_user" in response.context["adminform"].form.errors
    assert not ApiToken.objects.exists() and AccessRecord.objects.count() == records


def test_staff_make_a_token_that_acts_for_themselves(client, token_clerk):
    response = _add(client, token_clerk)
    assert response.status_code == 200 and "plaintext" in response.context
    assert ApiToken.objects.get(name="side-door").acting_user == token_clerk


def test_a_superuser_makes_a_token_for_another_person(client):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    approver = User.objects.create_user("sso-approver")
    assert _add(client, approver).status_code == 200
    assert ApiToken.objects.get(name="side-door").acting_user == approver


def test_the_rule_holds_for_every_caller_of_token_create(token_clerk):
    from django.core.exceptions import PermissionDenied

    from api.tokens import token_create

    root = User.objects.create_superuser("root", password="pw")
    records = AccessRecord.objects.count()
    with pytest.raises(PermissionDenied, match="clerk may not make a token that acts for root"):
        token_create(name="side-door", workflows=["test-orders"], created_by=token_clerk,
                     acting_user=root)
    assert not ApiToken.objects.exists() and AccessRecord.objects.count() == records
    token, _ = token_create(name="own", workflows=["test-orders"], created_by=token_clerk,
                            acting_user=token_clerk)
    assert token.acting_user == token_clerk
