"""Staff allowed to change users and groups in admin edit names and addresses; who may do
what (superuser status, groups, permissions, what a group grants) only a superuser
changes there. Django's own admins let such staff make themselves superuser."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from audit.models import AccessRecord

from .test_access import user_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def clerk(client):
    """Staff who may view and change users and groups, and nothing else."""
    user = User.objects.create_user("clerk", "clerk@example.com", "x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="auth",
        codename__in=["view_user", "change_user", "view_group", "change_group", "add_group"]))
    client.force_login(user)
    return user


def rights(user):
    user = User.objects.get(pk=user.pk)
    return (user.is_superuser, sorted(user.groups.values_list("name", flat=True)),
            sorted(user.user_permissions.values_list("codename", flat=True)))


def test_staff_who_may_change_users_cannot_make_themselves_superuser_or_join_a_group(
        client, clerk):
    before, records = rights(clerk), AccessRecord.objects.count()
    admins = Group.objects.get(name="admins")
    terminate = Permission.objects.get(codename="terminate_run")
    response = client.post(f"/admin/auth/user/{clerk.pk}/change/", user_form(
        clerk, first_name="Clara", is_superuser="on", groups=[admins.pk],
        user_permissions=[terminate.pk]))
    assert response.status_code == 302
    assert rights(clerk) == before and not before[0]
    # What the clerk may change is changed; no grant is recorded, as none was made.
    assert User.objects.get(pk=clerk.pk).first_name == "Clara"
    assert AccessRecord.objects.count() == records
    page = client.get(f"/admin/auth/user/{clerk.pk}/change/").text
    assert 'name="is_superuser"' not in page and 'name="groups"' not in page


def test_staff_who_may_change_users_cannot_grant_another_user_rights(client, clerk):
    eve = User.objects.create_user("eve")
    operators = Group.objects.get(name="operators")
    client.post(f"/admin/auth/user/{eve.pk}/change/", user_form(
        eve, is_superuser="on", groups=[operators.pk]))
    assert rights(eve) == (False, [], [])


def test_staff_who_may_change_groups_cannot_change_what_a_group_grants(client, clerk):
    operators = Group.objects.get(name="operators")
    before = sorted(operators.permissions.values_list("codename", flat=True))
    everything = list(Permission.objects.values_list("pk", flat=True))
    client.post(f"/admin/auth/group/{operators.pk}/change/",
                {"name": "operators", "permissions": everything})
    assert sorted(operators.permissions.values_list("codename", flat=True)) == before
    response = client.post("/admin/auth/group/add/",
                           {"name": "shadow", "permissions": everything})
    assert response.status_code == 302
    assert not Group.objects.get(name="shadow").permissions.exists()


def test_a_superuser_still_grants_rights_in_admin(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    eve = User.objects.create_user("eve")
    operators = Group.objects.get(name="operators")
    response = client.post(f"/admin/auth/user/{eve.pk}/change/", user_form(
        eve, is_superuser="on", groups=[operators.pk]))
    assert response.status_code == 302
    assert rights(eve) == (True, ["operators"], [])
    assert AccessRecord.objects.count() == 2
