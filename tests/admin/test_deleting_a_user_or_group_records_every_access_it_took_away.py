"""Deleting a user or a group in admin, one or through the bulk action, takes away by
cascade every guardian object permission it held (on workflows, and on approval requests,
whose permissions have a table of their own), its global permissions and its memberships:
each is in the access chain, written in the transaction of the delete. A group's name
cannot be changed once it exists."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.utils import timezone
from guardian.models import GroupObjectPermission, UserObjectPermission
from guardian.shortcuts import assign_perm, get_perms

import console.access
from approvals.models import (
    DECIDE_CODENAME,
    ApprovalRequest,
    ApprovalRequestGroupObjectPermission,
    ApprovalRequestUserObjectPermission,
)
from audit.access import AccessAction, verify_access_chain
from audit.models import AccessRecord
from tests.factories import new_run

pytestmark = pytest.mark.django_db

REVOKED = AccessAction.OBJECT_PERMISSION_REVOKED


@pytest.fixture
def root(client):
    user = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(user)
    return user


@pytest.fixture
def world():
    """A workflow with a run, one of its approval requests, and a group finance holding
    object permissions on both and a global one, with members bob and ann."""
    run = new_run("test-orders")
    now = timezone.now()
    request = ApprovalRequest.objects.create(
        run=run, step_name="approve", snapshot={}, snapshot_hash="h",
        timeout=timedelta(hours=1), on_timeout="reject", requested_at=now,
        due_at=now + timedelta(hours=1))
    finance = Group.objects.create(name="finance")
    finance.permissions.add(Permission.objects.get(codename="retry_step"))
    assign_perm("runs.view_runs", finance, run.workflow)
    assign_perm(f"approvals.{DECIDE_CODENAME}", finance, request)
    bob = User.objects.create_user("bob", is_staff=True)
    bob.groups.add(finance, Group.objects.get(name="auditors"))
    bob.user_permissions.add(Permission.objects.get(codename="terminate_run"))
    for codename in ("view_runs", "resume_run"):
        assign_perm(f"runs.{codename}", bob, run.workflow)
    assign_perm(f"approvals.{DECIDE_CODENAME}", bob, request)
    ann = User.objects.create_user("ann")
    ann.groups.add(finance)
    return {"workflow": run.workflow, "request": request, "finance": finance, "bob": bob,
            "ann": ann}


def records():
    return {(r.action, r.subject): r for r in AccessRecord.objects.all()}


def assert_bobs_access_recorded(world, reason="user deleted"):
    found = records()
    subject = "user bob"
    on_workflow = found[(REVOKED, "user bob on workflow test-orders")]
    assert on_workflow.before == {"permissions": ["resume_run", "view_runs"]}
    assert on_workflow.after == {"permissions": []}
    on_request = found[(REVOKED, f"user bob on approval request {world['request']}")]
    assert on_request.before == {"permissions": [DECIDE_CODENAME]}
    assert found[(AccessAction.GROUP_MEMBERSHIP_CHANGED, subject)].before == {
        "groups": ["auditors", "finance"]}
    assert found[(AccessAction.GROUP_MEMBERSHIP_CHANGED, subject)].after == {"groups": []}
    assert found[(AccessAction.GLOBAL_PERMISSIONS_CHANGED, subject)].before == {
        "permissions": ["runs.terminate_run"]}
    assert found[(AccessAction.STAFF_STATUS_CHANGED, subject)].after == {"is_staff": False}
    bobs = [r for key, r in found.items() if key[1].startswith("user bob")]
    assert len(bobs) == 5
    assert {r.reason for r in bobs} == {reason} and {r.actor_label for r in bobs} == {"root"}


def test_deleting_a_user_records_each_object_and_global_permission_and_group(client, root,
                                                                             world):
    bob = world["bob"]
    response = client.post(f"/admin/auth/user/{bob.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not User.objects.filter(username="bob").exists()
    assert not UserObjectPermission.objects.filter(user_id=bob.pk).exists()
    assert not ApprovalRequestUserObjectPermission.objects.filter(user_id=bob.pk).exists()
    assert_bobs_access_recorded(world)
    # ann and the group keep what they had, and nothing was recorded of them.
    assert get_perms(world["finance"], world["workflow"]) == ["view_runs"]
    assert not [s for _, s in records() if "ann" in s or "finance" in s]
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None


def test_the_bulk_delete_of_users_records_each_users_access(client, root, world):
    carl = User.objects.create_user("carl")
    assign_perm("runs.terminate_run", carl, world["workflow"])
    response = client.post("/admin/auth/user/", {
        "action": "delete_selected", "_selected_action": [world["bob"].pk, carl.pk],
        "post": "yes"})
    assert response.status_code == 302
    assert not User.objects.filter(username__in=["bob", "carl"]).exists()
    assert_bobs_access_recorded(world)
    carls = records()[(REVOKED, "user carl on workflow test-orders")]
    assert carls.before == {"permissions": ["terminate_run"]} and carls.reason == "user deleted"


def test_deleting_a_group_records_its_permissions_and_each_members_membership(client, root,
                                                                              world):
    finance = world["finance"]
    response = client.post(f"/admin/auth/group/{finance.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Group.objects.filter(name="finance").exists()
    assert not GroupObjectPermission.objects.filter(group_id=finance.pk).exists()
    assert not ApprovalRequestGroupObjectPermission.objects.filter(group_id=finance.pk).exists()
    found = records()
    assert found[(REVOKED, "group finance on workflow test-orders")].before == {
        "permissions": ["view_runs"]}
    assert found[(REVOKED, f"group finance on approval request {world['request']}")].before \
        == {"permissions": [DECIDE_CODENAME]}
    assert found[(AccessAction.GLOBAL_PERMISSIONS_CHANGED, "group finance")].before == {
        "permissions": ["runs.retry_step"]}
    bobs = found[(AccessAction.GROUP_MEMBERSHIP_CHANGED, "user bob")]
    assert bobs.before == {"groups": ["auditors", "finance"]}
    assert bobs.after == {"groups": ["auditors"]} and bobs.reason == "group finance deleted"
    anns = found[(AccessAction.GROUP_MEMBERSHIP_CHANGED, "user ann")]
    assert anns.before == {"groups": ["finance"]} and anns.after == {"groups": []}
    assert len(found) == 5
    # The members' own access is untouched, and recorded as untouched.
    assert set(get_perms(world["bob"], world["workflow"])) == {"view_runs", "resume_run"}
    assert (AccessAction.STAFF_STATUS_CHANGED, "user bob") not in found


def test_the_bulk_delete_of_groups_records_each_groups_access(client, root, world):
    legal = Group.objects.create(name="legal")
    assign_perm("runs.compensate_run", legal, world["workflow"])
    response = client.post("/admin/auth/group/", {
        "action": "delete_selected", "_selected_action": [world["finance"].pk, legal.pk],
        "post": "yes"})
    assert response.status_code == 302
    assert not Group.objects.filter(name__in=["finance", "legal"]).exists()
    found = records()
    assert found[(REVOKED, "group legal on workflow test-orders")].before == {
        "permissions": ["compensate_run"]}
    assert (REVOKED, "group finance on workflow test-orders") in found
    assert (AccessAction.GROUP_MEMBERSHIP_CHANGED, "user ann") in found


@pytest.mark.parametrize("what", ["user", "group"])
def test_a_delete_whose_record_fails_deletes_nothing(client, root, world, monkeypatch, what):
    written = []
    real = console.access.record_access_change

    def fails_on_the_third(**kwargs):
        if len(written) == 2:
            raise RuntimeError("the access chain is unavailable")
        written.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(console.access, "record_access_change", fails_on_the_third)
    holder = world["bob"] if what == "user" else world["finance"]
    with pytest.raises(RuntimeError, match="unavailable"):
        client.post(f"/admin/auth/{what}/", {
            "action": "delete_selected", "_selected_action": [holder.pk], "post": "yes"})
    assert len(written) == 2
    # The delete and the two records written before the failure went back together.
    assert type(holder).objects.filter(pk=holder.pk).exists()
    assert AccessRecord.objects.count() == 0
    assert get_perms(holder, world["workflow"])
    assert set(world["ann"].groups.values_list("name", flat=True)) == {"finance"}


def test_a_groups_name_cannot_be_changed_but_a_new_group_is_named(client, root, world):
    finance = world["finance"]
    page = client.get(f"/admin/auth/group/{finance.pk}/change/")
    assert page.status_code == 200 and 'name="name"' not in page.text
    perms = list(finance.permissions.values_list("pk", flat=True))
    response = client.post(f"/admin/auth/group/{finance.pk}/change/", {
        "name": "accounting", "permissions": perms, "access_reason": "rename"})
    assert response.status_code == 302
    finance.refresh_from_db()
    assert finance.name == "finance" and not Group.objects.filter(name="accounting").exists()
    assert get_perms(finance, world["workflow"]) == ["view_runs"]
    assert AccessRecord.objects.count() == 0
    assert client.post("/admin/auth/group/add/", {"name": "accounting"}).status_code == 302
    assert Group.objects.filter(name="accounting").exists()
