"""The page that asks to confirm deleting a user or a group (one, or several through the
bulk action) says how many rows of each kind go with it, not each row. An approver named
on every request of a year holds an object permission on each: Django's page named every
one, reading its request once per row, and for 116,806 of them had not answered after a
minute. Here bob and the group finance hold one on each of REQUESTS requests; each page
costs the same few queries."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import (
    DECIDE_CODENAME,
    ApprovalRequest,
    ApprovalRequestGroupObjectPermission,
    ApprovalRequestUserObjectPermission,
)
from tests.factories import new_run

pytestmark = pytest.mark.django_db

REQUESTS = 120


@pytest.fixture
def root(client):
    user = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(user)
    return user


@pytest.fixture
def holders():
    run = new_run("test-orders")
    now = timezone.now()
    requests = ApprovalRequest.objects.bulk_create(
        ApprovalRequest(run=run, step_name=f"approve-{n}", snapshot={}, snapshot_hash="h",
                        status="approved", timeout=timedelta(hours=1), on_timeout="reject",
                        requested_at=now, due_at=now, settled_at=now)
        for n in range(REQUESTS))
    decide = Permission.objects.get(codename=DECIDE_CODENAME)
    bob = User.objects.create_user("bob", is_staff=True)
    finance = Group.objects.create(name="finance")
    bob.groups.add(finance)
    ApprovalRequestUserObjectPermission.objects.bulk_create(
        ApprovalRequestUserObjectPermission(user=bob, permission=decide, content_object=r)
        for r in requests)
    ApprovalRequestGroupObjectPermission.objects.bulk_create(
        ApprovalRequestGroupObjectPermission(group=finance, permission=decide,
                                             content_object=r)
        for r in requests)
    return bob, finance


@pytest.mark.parametrize("kind", ["user", "group"])
def test_the_delete_page_counts_the_object_permissions_in_a_few_queries(client, root,
                                                                        holders, kind):
    bob, finance = holders
    holder = bob if kind == "user" else finance
    with CaptureQueriesContext(connection) as ctx:
        page = client.get(f"/admin/auth/{kind}/{holder.pk}/delete/")
    assert page.status_code == 200
    assert len(ctx.captured_queries) < 30, len(ctx.captured_queries)
    body = page.content.decode()
    assert f"{REQUESTS} approval request {kind} object permissions" in body
    assert "1 user-group relationship" in body
    assert f"approve-{REQUESTS - 1}" not in body  # no row named
    assert 'type="submit"' in body and not page.context["perms_lacking"]


def test_the_bulk_delete_asks_the_same_in_as_few_queries(client, root, holders):
    bob, _ = holders
    other = User.objects.create_user("carl")
    with CaptureQueriesContext(connection) as ctx:
        page = client.post("/admin/auth/user/", {"action": "delete_selected",
                                                 "_selected_action": [bob.pk, other.pk]})
    assert page.status_code == 200
    assert len(ctx.captured_queries) < 30, len(ctx.captured_queries)
    body = page.content.decode()
    assert "User: bob" in body and "User: carl" in body
    assert f"{REQUESTS} approval request user object permissions" in body
    # Nothing was deleted by asking.
    assert ApprovalRequestUserObjectPermission.objects.filter(user=bob).count() == REQUESTS
