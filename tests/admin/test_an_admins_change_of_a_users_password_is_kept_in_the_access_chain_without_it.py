"""An admin's change of another user's password on admin's change-password page is kept in
the access chain, as every other change of a user's access made in admin is: one record
naming the admin, the user and the reason asked on the page, holding neither the password
nor its hash. The page wrote nothing there, so an account taken over through admin left no
trace of who changed whose password, or when. A change the page refuses (the confirmation
differs) writes no record."""

import pytest
from django.contrib.auth.models import User

from audit.access import AccessAction
from audit.models import AccessRecord

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a new one, long enough 7431"


@pytest.fixture
def root(client):
    user = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(user)
    return user


def change_password(client, user, confirmation: str, **more):
    return client.post(f"/admin/auth/user/{user.pk}/password/", {
        "usable_password": "true", "password1": NEW_PASSWORD, "password2": confirmation,
        "set-password": "1", **more})


def test_a_password_changed_from_admin_writes_one_record_naming_who_and_whose(client, root):
    bob = User.objects.create_user("bob", password="the old one, long enough 1234")
    page = client.get(f"/admin/auth/user/{bob.pk}/password/")
    assert b'name="access_reason"' in page.content  # the reason is asked, as on the user page

    response = change_password(client, bob, NEW_PASSWORD, access_reason="bob lost his phone")

    assert response.status_code == 302, response.content[:2000]
    bob.refresh_from_db()
    assert bob.check_password(NEW_PASSWORD)
    (record,) = AccessRecord.objects.all()
    assert record.action == AccessAction.PASSWORD_CHANGED
    assert record.subject == "user bob"
    assert record.actor_user_id == root.pk
    assert record.reason == "bob lost his phone"
    assert (record.before, record.after) == ({"password": "usable"}, {"password": "new"})
    kept = repr([getattr(record, f.attname) for f in record._meta.concrete_fields])
    for secret in (NEW_PASSWORD, bob.password, bob.password.split("$")[-1]):
        assert secret not in kept


def test_a_password_disabled_from_admin_is_kept_as_unusable(client, root):
    bob = User.objects.create_user("bob", password="the old one, long enough 1234")

    response = client.post(f"/admin/auth/user/{bob.pk}/password/", {
        "usable_password": "false", "unset-password": "1"})

    assert response.status_code == 302
    (record,) = AccessRecord.objects.all()
    assert (record.before, record.after) == ({"password": "usable"}, {"password": "unusable"})


def test_a_refused_password_change_writes_no_record(client, root):
    bob = User.objects.create_user("bob", password="the old one, long enough 1234")

    response = change_password(client, bob, "not the same one 7431")

    assert response.status_code == 200  # the page again, saying why
    bob.refresh_from_db()
    assert not bob.check_password(NEW_PASSWORD)
    assert AccessRecord.objects.count() == 0
