"""An account made inactive holds no right at all (no sign-in, its API tokens refused, its
bulk jobs act on no further run), and one made active again gets back every right it held,
a superuser's included. Unticking or ticking Active on a user's admin page changed that
silently: the access chain recorded staff and superuser status, groups and permissions, and
not the account's own state. Each change is now one record, with who, why, before and after;
a save that leaves it as it was, or that makes or deletes an account, writes none of it."""

import pytest
from django.contrib.auth.models import User

from audit.access import AccessAction, verify_access_chain
from audit.models import AccessRecord
from tests.admin.test_access import root, user_form  # noqa: F401

pytestmark = pytest.mark.django_db

ACTIVE = AccessAction.ACCOUNT_ACTIVE_CHANGED


def test_deactivating_and_reactivating_a_superuser_are_each_recorded(client, root):  # noqa: F811
    sam = User.objects.create_superuser("sam", "sam@example.com", "x")

    response = client.post(f"/admin/auth/user/{sam.pk}/change/", user_form(
        sam, is_active=None, access_reason="left the company"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    sam.refresh_from_db()
    assert not sam.is_active
    client.post(f"/admin/auth/user/{sam.pk}/change/", user_form(
        sam, is_active="on", access_reason="back from leave"))
    sam.refresh_from_db()
    client.post(f"/admin/auth/user/{sam.pk}/change/", user_form(sam, first_name="Sam"))

    records = list(AccessRecord.objects.order_by("seq").values_list(
        "action", "subject", "actor_label", "reason", "before", "after"))
    assert records == [
        (ACTIVE, "user sam", "root", "left the company", {"is_active": True},
         {"is_active": False}),
        (ACTIVE, "user sam", "root", "back from leave", {"is_active": False},
         {"is_active": True}),
    ]
    assert verify_access_chain(list(AccessRecord.objects.order_by("seq"))) is None


def test_making_an_account_writes_no_record_of_its_active_state(client, root):  # noqa: F811
    response = client.post("/admin/auth/user/add/", {
        "username": "newbie", "password1": "a-long-Passw0rd!", "password2": "a-long-Passw0rd!",
        "usable_password": "true"})
    assert response.status_code == 302
    assert not AccessRecord.objects.filter(action=ACTIVE).exists()
