"""A sign-in with a username longer than any user's (the user model's max_length) is
refused as a wrong password is, on the console's login and Django admin's alike, before
authentication: no such name reaches django-axes, which would record it in a column of 255
characters and fail. The length counted is the name's after Unicode normalisation (NFKC),
the name authentication would be given."""

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.contrib.auth.models import User

pytestmark = pytest.mark.django_db

CONSOLE_LOGIN, ADMIN_LOGIN = "/accounts/login/", "/admin/login/"
REFUSED = {CONSOLE_LOGIN: "Your username and password didn't match.",
           ADMIN_LOGIN: "Please enter the correct username and password"}
LONGEST = User._meta.get_field("username").max_length


@pytest.mark.parametrize("username", ["u" * 256, "u" * (LONGEST + 1),
                                      # 15 characters, 270 once normalised
                                      "\ufdfa" * 15])
@pytest.mark.parametrize("path", [CONSOLE_LOGIN, ADMIN_LOGIN])
def test_a_username_longer_than_any_users_gets_the_invalid_login_page(client, path,
                                                                      username):
    response = client.post(path, {"username": username, "password": "whatever"})
    assert response.status_code == 200
    assert REFUSED[path] in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert not AccessAttempt.objects.exists() and not AccessFailureLog.objects.exists()


@pytest.mark.parametrize("path", [CONSOLE_LOGIN, ADMIN_LOGIN])
def test_the_longest_username_a_user_can_have_signs_in(client, path):
    User.objects.create_user("u" * LONGEST, password="right-password", is_staff=True)
    response = client.post(path, {"username": "u" * LONGEST, "password": "right-password"})
    assert response.status_code == 302 and "_auth_user_id" in client.session
