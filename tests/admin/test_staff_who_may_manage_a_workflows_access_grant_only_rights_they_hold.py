"""Staff allowed to change workflow rows (the permission the role form and guardian's
object-permission pages ask for) grant on a workflow only the rights they hold there
themselves: one holding no right on any run cannot give themselves, another user or a group
they are in the operators' role, by either form; nothing is written or recorded. What they
do hold they still grant, and a superuser grants anything."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from guardian.shortcuts import assign_perm, get_perms

from audit.models import AccessRecord
from runs.models import Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def workflow():
    return Workflow.objects.get_or_create(name="test-approval")[0]


@pytest.fixture
def keeper(client):
    """Staff who may view and change workflow rows in admin, and holds no right on runs."""
    user = User.objects.create_user("keeper", password="x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="runs", codename__in=["view_workflow", "change_workflow"]))
    client.force_login(user)
    return user


def role_form(client, workflow, **data):
    return client.post(f"/admin/runs/workflow/{workflow.pk}/role/",
                       {"operation": "grant", **data})


def test_the_role_form_gives_no_right_its_user_lacks(client, keeper, workflow):
    crew = Group.objects.create(name="crew")
    keeper.groups.add(crew)
    eve = User.objects.create_user("eve")
    for holder in ({"user": keeper.pk}, {"group": crew.pk}, {"user": eve.pk}):
        response = role_form(client, workflow, role="operators", **holder)
        assert response.status_code == 400
        assert "only rights you hold there yourself" in response.text
        assert "terminate_run" in response.text
    assert get_perms(keeper, workflow) == [] and get_perms(eve, workflow) == []
    assert AccessRecord.objects.count() == 0
    # Still nothing to see in the console.
    assert client.get("/runs/").status_code == 403


@pytest.mark.parametrize("kind", ["user", "group"])
def test_guardians_forms_give_no_right_their_user_lacks(client, keeper, workflow, kind):
    if kind == "user":
        holder = keeper
    else:
        holder = Group.objects.create(name="crew")
        keeper.groups.add(holder)
    url = f"/admin/runs/workflow/{workflow.pk}/permissions/{kind}-manage/{holder.pk}/"
    response = client.post(url, {"permissions": ["view_runs", "terminate_run"]})
    assert response.status_code == 200  # the form again, saying why
    assert "you do not hold terminate_run, view_runs" in response.text.lower()
    assert get_perms(keeper, workflow) == []
    assert AccessRecord.objects.count() == 0


def test_what_they_hold_on_the_workflow_they_still_grant(client, keeper, workflow):
    for codename in ("view_runs", "resume_run"):
        assign_perm(f"runs.{codename}", keeper, workflow)
    bob = User.objects.create_user("bob")
    response = role_form(client, workflow, role="auditors", user=bob.pk)
    assert response.status_code == 302
    assert get_perms(bob, workflow) == ["view_runs"]
    url = f"/admin/runs/workflow/{workflow.pk}/permissions/user-manage/{bob.pk}/"
    assert client.post(url, {"permissions": ["view_runs", "resume_run"]}).status_code == 302
    assert set(get_perms(bob, workflow)) == {"view_runs", "resume_run"}
    # One more than they hold, and nothing of the change is made.
    refused = client.post(url, {"permissions": ["view_runs", "resume_run", "terminate_run"]})
    assert refused.status_code == 200
    assert set(get_perms(bob, workflow)) == {"view_runs", "resume_run"}
    assert AccessRecord.objects.count() == 2
    # A right held on another workflow is not held on this one.
    other = Workflow.objects.get_or_create(name="test-orders")[0]
    assign_perm("runs.terminate_run", keeper, other)
    assert client.post(url, {"permissions": ["view_runs", "resume_run", "terminate_run"]}) \
        .status_code == 200
    assert "terminate_run" not in get_perms(bob, workflow)


def test_a_superuser_still_grants_any_role(client, workflow):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    eve = User.objects.create_user("eve")
    assert role_form(client, workflow, role="operators", user=eve.pk).status_code == 302
    assert "terminate_run" in get_perms(eve, workflow)
