"""A workflow's row is made by the runtime and is what object permissions attach to: admin
can neither rename it (the next start_run of the old name would make a new row holding no
grant) nor add one by hand, and the row's permissions still change through the audited
forms."""

import pytest
from django.contrib.auth.models import User
from guardian.shortcuts import assign_perm, get_perms

from audit.access import AccessAction
from audit.models import AccessRecord
from runs.models import Run, Workflow
from runs.permissions import VIEW, grant_for
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(client):
    user = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(user)
    return user


def test_posting_a_new_name_leaves_the_row_and_its_grants_on_the_next_run(client, root):
    first = new_run("test-orders")
    workflow = first.workflow
    created_at = workflow.created_at
    bob = User.objects.create_user("bob")
    assign_perm(f"runs.{VIEW}", bob, workflow)
    response = client.post(f"/admin/runs/workflow/{workflow.pk}/change/", {
        "name": "test-orders-renamed", "created_at_0": "2000-01-01",
        "created_at_1": "00:00:00"})
    assert response.status_code in (302, 403)
    workflow.refresh_from_db()
    assert workflow.name == "test-orders" and workflow.created_at == created_at
    assert not Workflow.objects.filter(name="test-orders-renamed").exists()
    # The next run of the name lands on the same row, which bob may still see.
    second = new_run("test-orders")
    assert second.workflow_id == workflow.pk
    assert Workflow.objects.filter(name="test-orders").count() == 1
    assert grant_for(bob, VIEW).covers(second.workflow_id)
    assert Run.objects.filter(workflow=workflow).count() == 2
    # The page shows the row with nothing to edit, and offers no save.
    page = client.get(f"/admin/runs/workflow/{workflow.pk}/change/")
    assert page.status_code == 200
    assert 'name="name"' not in page.text and 'name="_save"' not in page.text


def test_no_workflow_row_is_added_by_hand(client, root):
    count = Workflow.objects.count()
    assert client.get("/admin/runs/workflow/add/").status_code == 403
    assert client.post("/admin/runs/workflow/add/", {"name": "by-hand"}).status_code == 403
    assert Workflow.objects.count() == count
    assert not Workflow.objects.filter(name="by-hand").exists()
    assert "/admin/runs/workflow/add/" not in client.get("/admin/runs/workflow/").text


def test_the_rows_permissions_still_change_through_the_recorded_forms(client, root):
    workflow = new_run("test-orders").workflow
    bob = User.objects.create_user("bob")
    assert client.get(f"/admin/runs/workflow/{workflow.pk}/permissions/").status_code == 200
    response = client.post(
        f"/admin/runs/workflow/{workflow.pk}/permissions/user-manage/{bob.pk}/",
        {"permissions": [VIEW]})
    assert response.status_code == 302
    assert get_perms(bob, workflow) == [VIEW]
    record = AccessRecord.objects.get()
    assert record.action == AccessAction.OBJECT_PERMISSION_GRANTED
    assert record.subject == "user bob on workflow test-orders"
    response = client.post(f"/admin/runs/workflow/{workflow.pk}/role/", {
        "user": bob.pk, "role": "auditors", "operation": "revoke", "reason": "left"})
    assert response.status_code == 302 and get_perms(bob, workflow) == []
    assert AccessRecord.objects.count() == 2
