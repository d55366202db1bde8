"""Staff allowed to change users in admin, not superusers themselves, cannot set the password
of (or rename, deactivate or delete) a user who holds a right they lack: a superuser, a member
of a role group, a holder of a permission on a workflow. Setting that user's password is
signing in as them, with every right they hold. Users holding no more than the clerk still
are theirs to edit."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from guardian.shortcuts import assign_perm

from runs.models import Workflow

from .test_access import user_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def clerk(client):
    """Staff who may view, change and delete users, and nothing else."""
    user = User.objects.create_user("clerk", "clerk@example.com", "x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="auth",
        codename__in=["view_user", "change_user", "delete_user"]))
    client.force_login(user)
    return user


def new_password(client, user):
    return client.post(f"/admin/auth/user/{user.pk}/password/",
                       {"password1": "Taken-over-1234", "password2": "Taken-over-1234",
                        "usable_password": "true"})


def holders_of_more_rights():
    root = User.objects.create_superuser("root", "root@example.com", "root-pw")
    operator = User.objects.create_user("olga", password="olga-pw")
    operator.groups.add(Group.objects.get(name="operators"))
    approver = User.objects.create_user("abe", password="abe-pw")
    assign_perm("runs.terminate_run", approver,
                Workflow.objects.get_or_create(name="invoice-approval")[0])
    return [(root, "root-pw"), (operator, "olga-pw"), (approver, "abe-pw")]


def test_staff_cannot_set_the_password_of_a_user_with_more_rights(client, clerk):
    for user, password in holders_of_more_rights():
        response = new_password(client, user)
        assert response.status_code == 403, user.username
        # What must not have happened: the password the clerk chose opens nothing.
        user = User.objects.get(pk=user.pk)
        assert user.check_password(password) and not user.check_password("Taken-over-1234")


def test_staff_cannot_rename_deactivate_or_delete_a_user_with_more_rights(client, clerk):
    for user, _ in holders_of_more_rights():
        response = client.post(f"/admin/auth/user/{user.pk}/change/",
                               user_form(user, username=f"{user.username}-x", is_active=None))
        assert response.status_code == 403, user.username
        response = client.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})
        assert response.status_code == 403, user.username
        response = client.post("/admin/auth/user/", {
            "action": "delete_selected", "_selected_action": [user.pk], "post": "yes"})
        after = User.objects.get(pk=user.pk)
        assert (after.username, after.is_active) == (user.username, True)
    assert User.objects.count() == 4


def test_staff_still_edit_users_holding_no_more_than_they_do(client, clerk):
    eve = User.objects.create_user("eve", password="eve-pw")
    assert new_password(client, eve).status_code == 302
    assert User.objects.get(pk=eve.pk).check_password("Taken-over-1234")
    response = client.post(f"/admin/auth/user/{eve.pk}/change/",
                           user_form(eve, email="eve@example.com"))
    assert response.status_code == 302
    assert User.objects.get(pk=eve.pk).email == "eve@example.com"
    response = client.post(f"/admin/auth/user/{clerk.pk}/change/",
                           user_form(clerk, first_name="Clara"))
    assert response.status_code == 302
    assert User.objects.get(pk=clerk.pk).first_name == "Clara"


def test_a_superuser_still_sets_anyones_password(client):
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "x"))
    for user, _ in holders_of_more_rights():
        assert new_password(client, user).status_code == 302
        assert User.objects.get(pk=user.pk).check_password("Taken-over-1234")
