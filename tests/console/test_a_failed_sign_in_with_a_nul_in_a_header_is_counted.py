"""The failed-login log keeps the client's User-Agent and Accept headers, which any client
sets. A failed sign-in sent with a NUL in either (PostgreSQL stores none) is answered as any
failed sign-in and counted toward the lockout, on the console's login and Django admin's:
before, it was a server error and went uncounted, a way to try passwords unthrottled."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User

pytestmark = pytest.mark.django_db

CONSOLE_LOGIN, ADMIN_LOGIN = "/accounts/login/", "/admin/login/"


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


@pytest.mark.parametrize("path", [CONSOLE_LOGIN, ADMIN_LOGIN])
@pytest.mark.parametrize("header", ["HTTP_USER_AGENT", "HTTP_ACCEPT"])
def test_a_failed_sign_in_with_a_nul_header_is_refused_counted_and_locked_out(
        client, path, header):
    User.objects.create_user("olga", password="right-password", is_staff=True)
    client.raise_request_exception = False

    def sign_in(password):
        return client.post(path, {"username": "olga", "password": password},
                           REMOTE_ADDR="10.0.0.7", **{header: "probe\x00/1.0"})

    assert sign_in("wrong").status_code == 200
    assert sign_in("wrong").status_code == 200
    attempt = AccessAttempt.objects.get(username="olga")
    assert attempt.failures_since_start == 2
    assert "\x00" not in attempt.user_agent + attempt.http_accept
    assert "probe0x00/1.0" in attempt.user_agent + attempt.http_accept
    assert sign_in("wrong").status_code == 429
    # Locked out: the right password opens no session either.
    assert sign_in("right-password").status_code == 429
    assert "_auth_user_id" not in client.session
