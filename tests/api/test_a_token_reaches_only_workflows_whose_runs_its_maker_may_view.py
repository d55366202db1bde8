"""A person who may make API tokens, but is no superuser, gives a token only workflows whose
runs they may view: a token starts and reads runs of its workflows, so a staff member with
`api.add_apitoken` and a grant on test-orders alone made one for test-saga in the admin and
started and read test-saga runs with it. The admin's form refuses it naming the workflow,
and nothing is made or recorded; a token's existing workflows stay whoever edits it, and
what the maker may view they may give."""

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import PermissionDenied
from guardian.shortcuts import assign_perm

from api.models import ApiToken
from api.tokens import token_create, token_save
from audit.models import AccessRecord
from runs.models import Run, Workflow
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def maker(db):
    """Staff who may add and change tokens, and view test-orders runs only."""
    new_run("test-orders"), new_run("test-saga")  # the workflows' rows
    user = User.objects.create_user("tom", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="api", codename__in=["add_apitoken", "change_apitoken",
                                                     "view_apitoken"]))
    assign_perm("runs.view_runs", user, Workflow.objects.get(name="test-orders"))
    return user


def _add(client, workflows):
    return client.post("/admin/api/apitoken/add/", {
        "name": "side-door", "workflows": workflows, "rate_limit": "", "expires_at": ""})


def test_the_admin_refuses_a_workflow_beyond_the_makers_naming_it(client, maker):
    client.force_login(maker)
    runs, records = Run.objects.count(), AccessRecord.objects.count()
    response = _add(client, ["test-orders", "test-saga"])
    assert response.status_code == 200
    assert "You may not give a token test-saga" in response.content.decode()
    assert not ApiToken.objects.filter(name="side-door").exists()
    assert (Run.objects.count(), AccessRecord.objects.count()) == (runs, records)


def test_the_admin_makes_a_token_of_the_makers_own_workflows(client, maker):
    client.force_login(maker)
    response = _add(client, ["test-orders"])
    assert response.status_code == 200, response.content
    assert ApiToken.objects.get(name="side-door").workflows == ["test-orders"]


def test_an_edit_adds_no_workflow_beyond_the_makers_and_keeps_those_it_had(client, maker):
    root = User.objects.create_superuser("root")
    token, _ = token_create(name="erp", workflows=["test-saga"], created_by=root)
    client.force_login(maker)
    url = f"/admin/api/apitoken/{token.pk}/change/"
    kept = client.post(url, {"workflows": ["test-saga", "test-orders"], "rate_limit": "",
                             "expires_at": ""})
    assert kept.status_code == 302, kept.content
    token.refresh_from_db()
    assert token.workflows == ["test-orders", "test-saga"]
    token.workflows = ["test-orders"]
    token_save(token, by=root)
    refused = client.post(url, {"workflows": ["test-orders", "test-saga"], "rate_limit": "",
                                "expires_at": ""})
    assert refused.status_code == 200
    assert "You may not give a token test-saga" in refused.content.decode()
    token.refresh_from_db()
    assert token.workflows == ["test-orders"]


def test_the_functions_every_caller_uses_refuse_it_too(maker):
    with pytest.raises(PermissionDenied, match="tom may not give a token test-saga"):
        token_create(name="side-door", workflows=["test-saga"], created_by=maker)
    assert not ApiToken.objects.filter(name="side-door").exists()
    token, _ = token_create(name="mine", workflows=["test-orders"], created_by=maker)
    token.workflows = ["test-orders", "test-saga"]
    with pytest.raises(PermissionDenied):
        token_save(token, by=maker)
    token.refresh_from_db()
    assert token.workflows == ["test-orders"]
    # Commands and the system (no maker) and superusers reach every workflow.
    assert token_create(name="sys", workflows=["test-saga"])[0].workflows == ["test-saga"]
