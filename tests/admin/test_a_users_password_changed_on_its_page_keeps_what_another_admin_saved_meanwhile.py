"""A user's password changed on admin's change-password page keeps what another admin saved
of the user while the change was judged, and a user page shown before the change, saved
after it, keeps the new password.

Django's page read the user, checked and hashed the new password, and saved the user whole,
as read, in no transaction and with no lock: a deactivation another admin saved while the
password was checked and hashed (a second or so with the production hasher) was written
back as "active", and the deactivated person could sign in with their new password. Now the
page reads the user FOR UPDATE in its transaction (audit.page_edits.RowLockedAdmin): the
other admin's save waits for the change, then is saved on the row as it changed; and the
change writes the password alone.

Both admins use their own pages, through their own sessions. The other admin's save is sent
while the password is being checked (a password validator of this test's, which runs
between the page's read of the user and its save)."""

import threading

import pytest
from django.contrib.auth.hashers import check_password
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from tests.approvals.run_lock_order import blocked_on_a_lock

from .change_pages import shown_form, ticked

pytestmark = pytest.mark.django_db(transaction=True)

NEW_PASSWORD = "a new one, long enough 7431"


def signed_in(username: str) -> Client:
    user = User.objects.create_superuser(username, f"{username}@example.com", "x")
    client = Client()
    client.force_login(user)
    return client


def user_url(user) -> str:
    return f"/admin/auth/user/{user.pk}/change/"


def password_url(user) -> str:
    return f"/admin/auth/user/{user.pk}/password/"


def password_fields(client, user) -> dict:
    fields = shown_form(client, password_url(user))
    return {**fields, "password1": [NEW_PASSWORD], "password2": [NEW_PASSWORD],
            "usable_password": ["true"]}


# What the other admin does while the password is checked: set by the test, called by
# WhileChecked, the one validator the test's settings name.
meanwhile = []


class WhileChecked:
    def validate(self, password, user=None):
        while meanwhile:
            meanwhile.pop()()

    def get_help_text(self):
        return ""


@pytest.fixture
def checked_meanwhile(settings):
    settings.AUTH_PASSWORD_VALIDATORS = [{"NAME": f"{__name__}.WhileChecked"}]
    yield meanwhile
    meanwhile.clear()


def sent_alongside(client, url: str, fields: dict) -> dict:
    """`fields` posted to `url` from a thread of its own, waited for until it is answered or
    waits for a lock; what it came to, once `outcome["thread"]` is joined."""
    outcome = {}

    def posting():
        try:
            outcome["response"] = client.post(url, fields)
        except Exception as exc:  # what the thread ended in, asserted by the test
            outcome["response"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=posting, daemon=True)
    thread.start()
    outcome["thread"] = thread
    thread.join(0.2)
    while thread.is_alive() and not blocked_on_a_lock(0.2):
        thread.join(0.2)
    return outcome


def test_a_deactivation_saved_while_the_password_is_checked_stays(checked_meanwhile):
    mine, other = signed_in("root"), signed_in("other")
    eve = User.objects.create_user("eve", "eve@example.com", "old password 1")
    fields = password_fields(mine, eve)
    theirs = ticked(shown_form(other, user_url(eve), "user_form"), "is_active", False)
    sent = []
    checked_meanwhile.append(lambda: sent.append(sent_alongside(other, user_url(eve), theirs)))

    response = mine.post(password_url(eve), fields)

    assert response.status_code == 302, response.context["adminform"].form.errors
    (outcome,) = sent
    outcome["thread"].join(60)
    assert not outcome["thread"].is_alive()
    assert outcome["response"].status_code == 302
    eve.refresh_from_db()
    assert eve.is_active is False
    assert check_password(NEW_PASSWORD, eve.password)


def test_a_user_page_shown_before_a_password_change_keeps_the_new_password_once_saved():
    mine, other = signed_in("root"), signed_in("other")
    eve = User.objects.create_user("eve", "eve@example.com", "old password 1")
    fields = shown_form(mine, user_url(eve), "user_form")
    changed = other.post(password_url(eve), password_fields(other, eve))
    assert changed.status_code == 302

    saved = mine.post(user_url(eve), {**fields, "first_name": ["Eve"]})

    assert saved.status_code == 302, saved.context["adminform"].form.errors
    eve.refresh_from_db()
    assert eve.first_name == "Eve"
    assert check_password(NEW_PASSWORD, eve.password)
