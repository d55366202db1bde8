"""A user's or a group's admin page shown read-only (to staff who may only view) names each
permission by its content type: read with the permissions, in one query, not one query per
permission (fifty-six queries for a user holding fifty)."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer_client(client):
    viewer = User.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__in=["view_user",
                                                                        "view_group"]))
    client.force_login(viewer)
    return client


def queries_of(client, url: str) -> int:
    client.get(url)  # once first: the content types are then cached for the process
    with CaptureQueriesContext(connection) as ctx:
        page = client.get(url)
    assert page.status_code == 200
    return len(ctx)


def test_a_users_page_makes_as_many_queries_for_2_permissions_as_for_30(viewer_client):
    permissions = list(Permission.objects.order_by("pk")[:30])
    few, many = User.objects.create_user("few"), User.objects.create_user("many")
    few.user_permissions.set(permissions[:2])
    many.user_permissions.set(permissions)
    assert queries_of(viewer_client, f"/admin/auth/user/{many.pk}/change/") == \
        queries_of(viewer_client, f"/admin/auth/user/{few.pk}/change/")


def test_a_groups_page_makes_as_many_queries_for_2_permissions_as_for_30(viewer_client):
    permissions = list(Permission.objects.order_by("pk")[:30])
    few, many = Group.objects.create(name="few"), Group.objects.create(name="many")
    few.permissions.set(permissions[:2])
    many.permissions.set(permissions)
    assert queries_of(viewer_client, f"/admin/auth/group/{many.pk}/change/") == \
        queries_of(viewer_client, f"/admin/auth/group/{few.pk}/change/")
